"""Throughput: identical workloads against hashbroker and a reference broker, in one run.

    .venv/bin/python bench/throughput.py [--reference URL] [--hashbroker URL] [--messages N] ...

Workloads: (a) pika publish, no confirms; (b) aio-pika publish with confirms, a window in flight;
(c) one producer + one consumer end to end with prefetch; (d) a raw pipelined publisher (pre-encoded
frames, no client library) measuring ingest + routing. Each workload alternates between the two
brokers for `--rounds` rounds and reports each one's median. Without --hashbroker, also the times
to listen (the port accepts) and to serve (Connection.Start answers the protocol header) and the
idle RSS of `--starts` fresh `hashbroker serve` processes; the workloads then run against one more
on a free port. Prints a table; asserts nothing (numbers depend on the machine).

Next to each rate the table gives the CPU time per message of the client (this process, all its
threads) and of each broker process (hashbroker's, when this script started it; the reference's
when it is a local `beam.smp`). A ratio near 1.0 with the client's CPU per message close to the
wall time per message means the client library, not the broker, set the pace of that workload.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from urllib.parse import urlparse

import aio_pika
import pika
from pamqp import commands, frame, header
from pamqp.body import ContentBody

REFERENCE_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"
BODY = b"x" * 16


def build_summary() -> str:
    """Which builds the hashbroker started here runs: the publish scanner's and hashing's (mypyc
    or python) and the event loop it picks (uvloop when installed)."""
    from broker.protocol import native
    from broker.runtime.eventloop import loop_factory
    from exchanges import hash_implementation

    return (
        f"hashbroker: publish scanner {native.IMPLEMENTATION}, hashing {hash_implementation()}, "
        f"loop {loop_factory()[0]}"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def hashbroker_cmd() -> list[str]:
    exe = shutil.which("hashbroker", path=str(Path(sys.executable).parent)) or shutil.which("hashbroker")
    return [exe] if exe else [sys.executable, "-m", "broker.cli.main"]


def start_serve(port: int, data_dir: str | None = None) -> tuple[subprocess.Popen[bytes], float, float]:
    """Start `hashbroker serve`; return it with the seconds until its port accepted a connection
    (listening) and until it answered an AMQP protocol header with Connection.Start (serving)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [*hashbroker_cmd(), "serve", "--host", "127.0.0.1", "--port", str(port)]
        + (["--data-dir", data_dir] if data_dir else []),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = t0 + 30
    while time.perf_counter() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"hashbroker serve exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
                listening = time.perf_counter() - t0
                # Serving, not just a bound socket: Connection.Start (a method frame, type 1,
                # channel 0) answers the protocol header.
                sock.settimeout(10)
                sock.sendall(b"AMQP\x00\x00\x09\x01")
                if sock.recv(1)[:1] == b"\x01":
                    return proc, listening, time.perf_counter() - t0
        except OSError:
            time.sleep(0.01)
    proc.kill()
    raise RuntimeError("hashbroker serve did not listen within 30 s")


def ensure_bytecode() -> None:
    """Byte-compile hashbroker's packages, as `pip install .` does at install time.

    An editable install leaves compiling to the first import, and where PYTHONDONTWRITEBYTECODE is
    set (this project's CI machines set it) nothing is ever cached: every start would compile ~10,000
    lines from source (~+100 ms, ~+3 MiB). Start-up figures should measure the broker, not that."""
    import compileall

    import amqpwire
    import broker
    import exchanges

    for package in (amqpwire, broker, exchanges):
        compileall.compile_dir(str(Path(str(package.__file__)).parent), quiet=1)


def measure_starts(count: int) -> tuple[list[float], list[float], list[float]]:
    """Seconds to listen, seconds to serve and idle RSS (MiB, 1 s after serving) of `count` fresh
    `hashbroker serve`s."""
    ensure_bytecode()
    listen, serve, rss = [], [], []
    for _ in range(count):
        with tempfile.TemporaryDirectory() as data_dir:
            proc, listening, serving = start_serve(free_port(), data_dir)
            try:
                time.sleep(1.0)
                rss.append(rss_mib(proc.pid))
                listen.append(listening)
                serve.append(serving)
            finally:
                proc.terminate()
                proc.wait(10)
    return listen, serve, rss


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def temp_queue(url: str) -> str:
    name = f"bench.{uuid.uuid4().hex[:10]}"
    conn = pika.BlockingConnection(pika.URLParameters(url))
    conn.channel().queue_declare(name, auto_delete=False)
    conn.close()
    return name


def delete_queue(url: str, name: str) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(url))
    conn.channel().queue_delete(name)
    conn.close()


def wait_count(url: str, queue: str, n: int, timeout: float = 120) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    deadline = time.monotonic() + timeout
    while ch.queue_declare(queue, passive=True).method.message_count < n and time.monotonic() < deadline:
        time.sleep(0.02)
    conn.close()


def bench_pika_publish(url: str, n: int) -> float:
    """(a) pika BlockingConnection publishing n x 16 B without confirms, until all are enqueued."""
    q = temp_queue(url)
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    t0 = time.perf_counter()
    for _ in range(n):
        ch.basic_publish("", q, BODY)
    wait_count(url, q, n)
    elapsed = time.perf_counter() - t0
    conn.close()
    delete_queue(url, q)
    return n / elapsed


def bench_aio_pika_confirms(url: str, n: int, window: int) -> float:
    """(b) aio-pika with publisher confirms, ``window`` publishes in flight."""
    q = temp_queue(url)

    async def run() -> float:
        conn = await aio_pika.connect(url)
        async with conn:
            ch = await conn.channel(publisher_confirms=True)
            sem = asyncio.Semaphore(window)

            async def one() -> None:
                async with sem:
                    await ch.default_exchange.publish(aio_pika.Message(BODY), routing_key=q)

            t0 = time.perf_counter()
            await asyncio.gather(*(one() for _ in range(n)))
            return n / (time.perf_counter() - t0)

    rate = asyncio.run(run())
    delete_queue(url, q)
    return rate


_STAMP = struct.Struct("d")


def bench_end_to_end(url: str, n: int, prefetch: int, latencies: list[float] | None = None) -> float:
    """(c) one producer thread and one consumer (prefetch, multiple acks) until all n consumed.
    With `latencies`, each body starts with its publish time and each message's publish-to-consume
    milliseconds are appended there (bench/e2e_latency.py)."""
    q = temp_queue(url)
    done = threading.Event()

    def produce() -> None:
        conn = pika.BlockingConnection(pika.URLParameters(url))
        ch = conn.channel()
        if latencies is None:
            for _ in range(n):
                ch.basic_publish("", q, BODY)
        else:
            for _ in range(n):
                ch.basic_publish("", q, _STAMP.pack(time.perf_counter()) + BODY[_STAMP.size :])
        conn.process_data_events(0)
        done.wait(300)
        conn.close()

    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.basic_qos(prefetch_count=prefetch)
    got = 0
    t0 = time.perf_counter()
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    for method, _props, body in ch.consume(q, inactivity_timeout=30):
        if method is None:
            break
        if latencies is not None:
            latencies.append((time.perf_counter() - _STAMP.unpack_from(body)[0]) * 1000)
        got += 1
        if got % (prefetch // 2 or 1) == 0 or got == n:
            ch.basic_ack(method.delivery_tag, multiple=True)
        if got == n:
            break
    elapsed = time.perf_counter() - t0
    done.set()
    ch.cancel()
    conn.close()
    producer.join(10)
    delete_queue(url, q)
    return got / elapsed


def bench_raw_pipelined(url: str, n: int) -> float:
    """(d) pre-encoded publish frames written back to back on a socket; rate until all are enqueued."""
    q = temp_queue(url)
    parsed = urlparse(url)
    sock = socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 5672))
    buf = b""

    def read_frame() -> object:
        nonlocal buf
        while True:
            try:
                used, _ch, value = frame.unmarshal(buf)
                if used:
                    buf = buf[used:]
                    return value
            except Exception:
                pass
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk

    sock.sendall(frame.marshal(header.ProtocolHeader(), 0))
    read_frame()
    sock.sendall(frame.marshal(commands.Connection.StartOk(response="\0guest\0guest"), 0))
    tune = read_frame()
    assert isinstance(tune, commands.Connection.Tune)
    sock.sendall(
        frame.marshal(
            commands.Connection.TuneOk(channel_max=tune.channel_max, frame_max=tune.frame_max, heartbeat=0), 0
        )
    )
    sock.sendall(frame.marshal(commands.Connection.Open(virtual_host="/"), 0))
    read_frame()
    sock.sendall(frame.marshal(commands.Channel.Open(), 1))
    read_frame()
    one = (
        frame.marshal(commands.Basic.Publish(exchange="", routing_key=q), 1)
        + frame.marshal(header.ContentHeader(0, len(BODY), commands.Basic.Properties()), 1)
        + frame.marshal(ContentBody(BODY), 1)
    )
    batch = one * 1000
    t0 = time.perf_counter()
    sent = 0
    while sent < n:
        k = min(1000, n - sent)
        sock.sendall(batch if k == 1000 else one * k)
        sent += k
    wait_count(url, q, n)
    elapsed = time.perf_counter() - t0
    sock.close()
    delete_queue(url, q)
    return n / elapsed


def process_cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds a process has used so far (Linux /proc), or None if unknown."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def listener_pid(port: int) -> int | None:
    """The pid of the local process listening on TCP `port` (Linux /proc): the socket's inode from
    /proc/net/tcp(6), then the process holding a descriptor to it. This finds the reference
    broker itself, not any other Erlang VM (rabbitmqctl, epmd's neighbours) that happens to run."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as fh:
                next(fh)
                for line in fh:
                    fields = line.split()
                    if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # LISTEN
                        inodes.add(fields[9])
        except OSError:
            continue
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                if os.readlink(fd) in wanted:
                    return int(entry.name)
        except OSError:
            continue
    return None


def reference_pid(url: str) -> int | None:
    """The pid of the local reference broker that `url` points at (None when it is elsewhere)."""
    parsed = urlparse(url)
    if parsed.hostname not in ("127.0.0.1", "localhost", "::1"):
        return None
    return listener_pid(parsed.port or 5672)


class Round:
    """One workload run against one broker: its rate and the CPU microseconds per message spent by
    this client process and by the broker process."""

    def __init__(self, rate: float, client_us: float, broker_us: float | None) -> None:
        self.rate, self.client_us, self.broker_us = rate, client_us, broker_us


def measure(label: str, fn: Callable[[], float], messages: int, broker_pid: int | None) -> Round | None:
    broker0 = process_cpu_seconds(broker_pid)
    client0 = time.process_time()
    try:
        rate = fn()
    except Exception as exc:
        print(f"  {label}: failed: {exc!r}", file=sys.stderr)
        return None
    client_us = (time.process_time() - client0) / messages * 1e6
    broker1 = process_cpu_seconds(broker_pid)
    broker_us = None if broker0 is None or broker1 is None else (broker1 - broker0) / messages * 1e6
    return Round(rate, client_us, broker_us)


def median_of(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def cpu_cell(hb: list[float | None], ref: list[float | None]) -> str:
    """Median CPU microseconds per message as "hashbroker/reference", "-" where unknown."""
    return "/".join("-" if v is None else f"{v:.0f}" for v in (median_of(hb), median_of(ref)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reference", default=REFERENCE_URL, help="reference broker URL (RabbitMQ)")
    parser.add_argument("--hashbroker", default=None, help="URL of a running hashbroker (default: start one)")
    parser.add_argument("--messages", type=int, default=100_000, help="messages for (a) and (d)")
    parser.add_argument("--confirm-messages", type=int, default=20_000, help="messages for (b)")
    parser.add_argument("--window", type=int, default=1000, help="confirms in flight for (b)")
    parser.add_argument("--e2e-messages", type=int, default=50_000, help="messages for (c)")
    parser.add_argument("--prefetch", type=int, default=1000, help="prefetch for (c)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per workload (median)")
    parser.add_argument("--starts", type=int, default=5, help="fresh starts timed for time-to-serve and RSS")
    args = parser.parse_args(argv)

    proc = None
    starts: tuple[list[float], list[float], list[float]] | None = None
    hb_url = args.hashbroker
    data_dir = None
    if hb_url is None:
        if args.starts > 0:
            starts = measure_starts(args.starts)
        data_dir = tempfile.TemporaryDirectory()
        port = free_port()
        proc, _, _ = start_serve(port, data_dir.name)
        hb_url = f"amqp://guest:guest@127.0.0.1:{port}/%2F"
    try:
        hb_pid = proc.pid if proc is not None else None
        ref_pid = reference_pid(args.reference)
        rows: list[tuple[str, int, Callable[[str], float]]] = [
            ("(a) pika publish, no confirms", args.messages, lambda u: bench_pika_publish(u, args.messages)),
            (
                f"(b) aio-pika confirms, {args.window} in flight",
                args.confirm_messages,
                lambda u: bench_aio_pika_confirms(u, args.confirm_messages, args.window),
            ),
            (
                f"(c) end to end, prefetch {args.prefetch}",
                args.e2e_messages,
                lambda u: bench_end_to_end(u, args.e2e_messages, args.prefetch),
            ),
            ("(d) raw pipelined publisher", args.messages, lambda u: bench_raw_pipelined(u, args.messages)),
        ]
        print(
            f"# {time.strftime('%Y-%m-%d %H:%M:%S')} {platform.node()} {platform.machine()} "
            f"{os.cpu_count()} cpus, Python {platform.python_version()}, {build_summary()}"
        )
        print(
            f"{'workload':<40} {'hashbroker msg/s':>17} {'reference msg/s':>16} {'ratio':>7}"
            f"  {'client us/msg':>14} {'broker us/msg':>14}  (hashbroker/reference CPU)"
        )
        for label, messages, fn in rows:
            # Alternate the brokers round by round so drifting load on the machine hits both alike;
            # report each broker's median round.
            hb_runs: list[Round] = []
            ref_runs: list[Round] = []
            for _ in range(args.rounds):
                hb_round = measure(f"hashbroker {label}", partial(fn, hb_url), messages, hb_pid)
                ref_round = measure(f"reference {label}", partial(fn, args.reference), messages, ref_pid)
                hb_runs += [hb_round] if hb_round else []
                ref_runs += [ref_round] if ref_round else []
            hb = median_of([r.rate for r in hb_runs])
            ref = median_of([r.rate for r in ref_runs])
            ratio = f"{hb / ref:.2f}" if hb and ref else "-"
            client = cpu_cell([r.client_us for r in hb_runs], [r.client_us for r in ref_runs])
            broker = cpu_cell([r.broker_us for r in hb_runs], [r.broker_us for r in ref_runs])
            print(f"{label:<40} {hb or 0:>17,.0f} {ref or 0:>16,.0f} {ratio:>7}  {client:>14} {broker:>14}")
        if starts is not None:
            listen, serve, rss = starts
            for name, seconds in (("time-to-listen", listen), ("time-to-serve", serve)):
                ms = sorted(round(x * 1000) for x in seconds)
                print(
                    f"{'hashbroker serve ' + name:<40} {statistics.median(ms):>15.0f} ms"
                    f"  (median of {len(ms)} starts: {', '.join(map(str, ms))})"
                )
            print(
                f"{'hashbroker serve idle RSS':<40} {statistics.median(rss):>15.1f} MiB"
                f"  ({min(rss):.1f}-{max(rss):.1f}; {statistics.median(rss) * 1.048576:.1f} MB)"
            )
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        if data_dir is not None:
            data_dir.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
