"""Quorum queues and streams: the same aio-pika workloads against hashbroker and RabbitMQ, one run.

    .venv/bin/python bench/queue_types.py [--reference URL] [--messages N] [--quorum-messages N]
                                          [--window W] [--prefetch P] [--body BYTES] [--rounds R]
                                          [--raw-messages N] [--only quorum|stream]

Workloads (every one alternates between the two brokers round by round, so drifting load on a shared
machine hits both alike, and reports each broker's median round and the ratio hashbroker/RabbitMQ):

* quorum publish: one aio-pika channel with publisher confirms, ``--window`` publishes in flight,
  ``--quorum-messages`` into a fresh durable quorum queue; the rate once every confirm arrived.
* quorum consume: that queue drained by one aio-pika consumer (prefetch ``--prefetch``, an ack with
  multiple=true every half prefetch); the rate until the last message arrived.
* quorum consume, raw client: the queue filled again with ``--raw-messages`` (default 100,000;
  pre-encoded publishes with confirms on a raw socket, every one confirmed before the drain starts),
  then drained the same way by a client that reads pre-split frames from a socket and writes
  pre-encoded acks (no client library: aio-pika costs far more CPU per message than either broker,
  so it sets the pace of the row above; this one shows the broker's own delivery rate, over rounds
  long enough, about a second, that a scheduling hiccup on a shared machine does not decide them).
* quorum consume, Go client: the queue filled the same way, then drained as above by Go's amqp091
  client (``bench/go_consume``, built here with the Debian packages golang-go and
  golang-github-rabbitmq-amqp091-go-dev; the row is left out where they are missing). A real
  client library whose CPU per message is a fraction of either broker's, so the rate is the
  broker's; its CPU is counted as client CPU.
* stream publish: ``--messages`` in total (default 1,000,000) appended to one stream per broker with
  confirms, ``--window`` in flight, split into ``--rounds`` timed rounds.
* stream read: a consumer from ``x-stream-offset: first`` (prefetch ``--prefetch``, multiple acks)
  reading all ``--messages``; every round re-reads the whole stream (reads take nothing away) and
  checks the last ``x-stream-offset`` is ``messages - 1`` (``--read-rounds`` rounds, default
  ``--rounds``). During each read the RSS of the
  ``hashbroker serve`` process (its own process: started here on a free port with its own data dir)
  is sampled every 50 ms; the table gives its RSS before the first read and the peak during the
  reads next to the size of the bodies read, which says whether the bodies stay out of RAM.

`--only quorum` runs the four quorum workloads alone (a minute or two), `--only stream` the two
stream ones. Prints a table, with the load average before and after; asserts nothing (numbers
depend on the machine).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import aio_pika
from aio_pika.abc import AbstractIncomingMessage
from callgrind_ingest import RawClient
from pamqp import commands, frame, header
from pamqp.body import ContentBody
from throughput import free_port, process_cpu_seconds, reference_pid, rss_mib, start_serve

REFERENCE_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"


@dataclass
class Series:
    """The rounds of one workload against one broker: rates, and CPU microseconds per message of
    the broker process and of this (client) process."""

    rates: list[float] = field(default_factory=list)
    broker_us: list[float] = field(default_factory=list)
    client_us: list[float] = field(default_factory=list)

    def median(self) -> float | None:
        return statistics.median(self.rates) if self.rates else None


async def publish_confirmed(url: str, queue: str, n: int, window: int, body: bytes) -> float:
    """``n`` publishes with confirms, ``window`` in flight (``window`` publishers, each awaiting its
    confirm before its next publish); messages per second."""
    conn = await aio_pika.connect(url)
    async with conn:
        ch = await conn.channel(publisher_confirms=True)
        message = aio_pika.Message(body)
        exchange = ch.default_exchange

        async def publisher(count: int) -> None:
            for _ in range(count):
                await exchange.publish(message, routing_key=queue)

        shares = [n // window + (1 if i < n % window else 0) for i in range(window)]
        t0 = time.perf_counter()
        await asyncio.gather(*(publisher(k) for k in shares if k))
        return n / (time.perf_counter() - t0)


async def consume(
    url: str, queue: str, n: int, prefetch: int, arguments: dict[str, Any] | None
) -> tuple[float, Any]:
    """Read ``n`` messages with one consumer, acking every half prefetch (multiple); the rate and
    the last delivery's ``x-stream-offset`` (None for a queue)."""
    conn = await aio_pika.connect(url)
    async with conn:
        ch = await conn.channel()
        await ch.set_qos(prefetch_count=prefetch)
        q = await ch.get_queue(queue, ensure=False)
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        every = max(1, prefetch // 2)
        got = 0

        async def on_message(msg: AbstractIncomingMessage) -> None:
            nonlocal got
            got += 1
            if got % every == 0 or got == n:
                await msg.ack(multiple=True)
            if got == n and not done.done():
                done.set_result((msg.headers or {}).get("x-stream-offset"))

        t0 = time.perf_counter()
        tag = await q.consume(on_message, no_ack=False, arguments=arguments)
        last = await asyncio.wait_for(done, 3600)
        elapsed = time.perf_counter() - t0
        await q.cancel(tag)
        return n / elapsed, last


def raw_fill(url: str, queue: str, n: int, body: bytes) -> None:
    """`n` pre-encoded publishes of `body` to `queue` with publisher confirms on a raw socket;
    returns once the broker confirmed the last one, so its store is done with them. Confirms are
    read between chunks, so neither side's socket buffer fills while the other waits."""
    client = RawClient(urlparse(url).port or 5672)
    try:
        ok = client.call(commands.Confirm.Select())
        assert isinstance(ok, commands.Confirm.SelectOk), ok
        one = (
            frame.marshal(commands.Basic.Publish(exchange="", routing_key=queue), 1)
            + frame.marshal(header.ContentHeader(0, len(body), commands.Basic.Properties()), 1)
            + frame.marshal(ContentBody(body), 1)
        )
        confirmed = sent = 0
        while confirmed < n:
            if sent < n:
                k = min(1000, n - sent)
                client.sock.sendall(one * k)
                sent += k
            confirmed = max(confirmed, _confirms(client, wait=sent == n))
    finally:
        client.sock.close()


def _confirms(client: RawClient, *, wait: bool) -> int:
    """The highest delivery tag confirmed in what `client` has read or can read now (waiting for
    more only with `wait`); 0 for none. A nack fails the run."""
    client.sock.setblocking(wait)
    try:
        client.buf += client.sock.recv(1 << 20)
    except BlockingIOError:
        pass
    finally:
        client.sock.setblocking(True)
    best = 0
    while True:
        try:
            used, _ch, value = frame.unmarshal(client.buf)
        except Exception:  # an incomplete frame: the rest comes with the next read
            return best
        client.buf = client.buf[used:]
        if isinstance(value, commands.Basic.Nack):
            raise RuntimeError(f"publish nacked: {value.delivery_tag}")
        if isinstance(value, commands.Basic.Ack):
            best = max(best, value.delivery_tag)


def raw_consume(url: str, queue: str, n: int, prefetch: int) -> float:
    """Drain `n` messages of one frame each from `queue` as `consume` does (prefetch, an ack with
    multiple=true every half prefetch), through a raw socket client; the rate."""
    client = RawClient(urlparse(url).port or 5672)
    try:
        client.call(commands.Basic.Qos(prefetch_count=prefetch))
        t0 = time.perf_counter()
        ok = client.call(commands.Basic.Consume(queue=queue))
        assert isinstance(ok, commands.Basic.ConsumeOk), ok
        client.drain(n, max(1, prefetch // 2))
        return n / (time.perf_counter() - t0)
    finally:
        client.sock.close()


GO_SOURCE = Path(__file__).resolve().parent / "go_consume" / "main.go"
GO_PATH = Path("/usr/share/gocode")  # Debian's golang-github-rabbitmq-amqp091-go-dev


def build_go_consumer(workdir: str) -> str | None:
    """bench/go_consume built into `workdir`; None (with the reason printed) where Go or amqp091-go
    is missing or the build fails."""
    go = shutil.which("go")
    if go is None or not (GO_PATH / "src" / "github.com" / "rabbitmq" / "amqp091-go").is_dir():
        print("no Go row: apt-get install golang-go golang-github-rabbitmq-amqp091-go-dev", file=sys.stderr)
        return None
    package = Path(workdir) / "src" / "goconsume"
    package.mkdir(parents=True)
    shutil.copy(GO_SOURCE, package / "main.go")
    binary = str(Path(workdir) / "goconsume")
    env = {**os.environ, "GOPATH": f"{workdir}{os.pathsep}{GO_PATH}", "GO111MODULE": "off"}
    built = subprocess.run(
        [go, "build", "-o", binary, "."], cwd=package, env=env, capture_output=True, text=True, timeout=300
    )
    if built.returncode != 0:
        print(f"no Go row: the build failed: {built.stderr.strip()}", file=sys.stderr)
        return None
    return binary


def go_consume(binary: str, url: str, queue: str, n: int, prefetch: int) -> float:
    """Drain `n` messages with the Go consumer (prefetch, multiple acks every half prefetch); its rate."""
    out = subprocess.run(
        [binary, url, queue, str(n), str(prefetch)], capture_output=True, text=True, timeout=330
    ).stdout.strip()
    if not out.startswith("rate "):
        raise RuntimeError(f"Go consumer: {out}")
    return float(out.split()[1])


async def declare(url: str, queue: str, kind: str) -> None:
    conn = await aio_pika.connect(url)
    async with conn:
        ch = await conn.channel()
        await ch.declare_queue(queue, durable=True, arguments={"x-queue-type": kind})


async def delete(url: str, queue: str) -> None:
    conn = await aio_pika.connect(url)
    async with conn:
        ch = await conn.channel()
        await ch.queue_delete(queue)


class RssSampler:
    """The peak RSS (MiB) of a process while the sampler runs, sampled every 50 ms."""

    def __init__(self, pid: int | None) -> None:
        self.pid, self.peak = pid, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set() and self.pid is not None:
            self.peak = max(self.peak, rss_mib(self.pid))
            self._stop.wait(0.05)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if self.pid is not None:
            self.peak = max(self.peak, rss_mib(self.pid))


def client_cpu_seconds() -> float:
    """CPU of this process and of its children that ended (a client program run for a round)."""
    done = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + done.ru_utime + done.ru_stime


def timed(label: str, series: Series, pid: int | None, messages: int, fn: Callable[[], float]) -> None:
    cpu0, client0 = process_cpu_seconds(pid), client_cpu_seconds()
    rate = fn()
    cpu1, client1 = process_cpu_seconds(pid), client_cpu_seconds()
    print(
        f"  {time.strftime('%H:%M:%S')} {label}: {messages:,} at {rate:,.0f} msg/s",
        file=sys.stderr,
        flush=True,
    )
    series.rates.append(rate)
    series.client_us.append((client1 - client0) / messages * 1e6)
    if cpu0 is not None and cpu1 is not None:
        series.broker_us.append((cpu1 - cpu0) / messages * 1e6)


def load_average() -> str:
    """The 1, 5 and 15 minute load averages (the machine may be shared: they say how much)."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "-"


def _us(values: list[float]) -> str:
    return f"{statistics.median(values):.0f}" if values else "-"


def row(label: str, hb: Series, ref: Series) -> str:
    h, r = hb.median(), ref.median()
    ratio = f"{h / r:.2f}" if h and r else "-"
    broker = f"{_us(hb.broker_us)}/{_us(ref.broker_us)}"
    client = f"{_us(hb.client_us)}/{_us(ref.client_us)}"
    rounds = " ".join(f"{x:,.0f}" for x in hb.rates) + " | " + " ".join(f"{x:,.0f}" for x in ref.rates)
    return f"{label:<40} {h or 0:>10,.0f} {r or 0:>10,.0f} {ratio:>6} {client:>9} {broker:>9}   {rounds}"


HEADER = (
    f"{'workload (msg/s, median of rounds)':<40} {'hashbroker':>10} {'RabbitMQ':>10} {'ratio':>6}"
    f" {'client us':>9} {'broker us':>9}   rounds: hashbroker | RabbitMQ"
)


class Bench:
    """Both brokers, the settings, and every round's results."""

    def __init__(
        self, args: argparse.Namespace, targets: dict[str, tuple[str, int | None]], hb_pid: int
    ) -> None:
        self.args, self.targets, self.hb_pid = args, targets, hb_pid
        self.body = b"x" * args.body
        self.suffix = uuid.uuid4().hex[:10]
        self.results = {w: {t: Series() for t in targets} for w in ("qp", "qc", "qr", "qg", "sp", "sr")}
        self.go_dir = tempfile.TemporaryDirectory(prefix="qsbench-go-")
        self.go_consumer = build_go_consumer(self.go_dir.name) if args.only != "stream" else None
        self.stream = f"bench.qs.stream.{self.suffix}"
        self.last_offsets: dict[str, set[Any]] = {t: set() for t in targets}
        self.rss_before_read = 0.0
        self.rss_peak_read = 0.0

    def quorum_round(self, r: int, target: str) -> None:
        url, pid = self.targets[target]
        q, n, a = f"bench.qs.quorum.{self.suffix}.{r}", self.args.quorum_messages, self.args
        asyncio.run(declare(url, q, "quorum"))
        timed(
            f"{target} quorum publish",
            self.results["qp"][target],
            pid,
            n,
            lambda: asyncio.run(publish_confirmed(url, q, n, a.window, self.body)),
        )
        timed(
            f"{target} quorum consume",
            self.results["qc"][target],
            pid,
            n,
            lambda: asyncio.run(consume(url, q, n, a.prefetch, None))[0],
        )
        # the rows whose client does not set the pace: the queue filled again for each
        raw = a.raw_messages
        drains: list[tuple[str, str, Callable[[], float]]] = [
            ("raw client", "qr", lambda: raw_consume(url, q, raw, a.prefetch))
        ]
        go = self.go_consumer
        if go is not None:
            drains.append(("Go client", "qg", lambda: go_consume(go, url, q, raw, a.prefetch)))
        for client, key, drain in drains:
            raw_fill(url, q, raw, self.body)
            timed(f"{target} quorum consume, {client}", self.results[key][target], pid, raw, drain)
        asyncio.run(delete(url, q))

    def stream_publish_round(self, target: str, n: int) -> None:
        url, pid = self.targets[target]
        window = self.args.window
        timed(
            f"{target} stream publish",
            self.results["sp"][target],
            pid,
            n,
            lambda: asyncio.run(publish_confirmed(url, self.stream, n, window, self.body)),
        )

    def stream_read_round(self, target: str) -> None:
        url, pid = self.targets[target]
        n, prefetch = self.args.messages, self.args.prefetch

        def read() -> float:
            rate, last = asyncio.run(consume(url, self.stream, n, prefetch, {"x-stream-offset": "first"}))
            self.last_offsets[target].add(last)
            return rate

        with RssSampler(self.hb_pid if target == "hashbroker" else None) as sampler:
            timed(f"{target} stream read", self.results["sr"][target], pid, n, read)
        self.rss_peak_read = max(self.rss_peak_read, sampler.peak)

    def run(self) -> None:
        a = self.args
        if a.only != "stream":
            for r in range(a.rounds):
                for target in self.targets:
                    self.quorum_round(r, target)
        if a.only != "quorum":
            self.stream_rounds()

    def stream_rounds(self) -> None:
        a = self.args
        for url, _pid in self.targets.values():
            asyncio.run(declare(url, self.stream, "stream"))
        for i in range(a.rounds):
            n = a.messages // a.rounds + (1 if i < a.messages % a.rounds else 0)
            for target in self.targets:
                self.stream_publish_round(target, n)
        self.rss_before_read = rss_mib(self.hb_pid)
        for _ in range(a.read_rounds or a.rounds):
            for target in self.targets:
                self.stream_read_round(target)
        for url, _pid in self.targets.values():
            asyncio.run(delete(url, self.stream))

    def cleanup(self) -> None:
        """Best effort, for an interrupted run: nothing of ours stays on the shared RabbitMQ."""
        names = [self.stream] + [f"bench.qs.quorum.{self.suffix}.{r}" for r in range(self.args.rounds)]
        for name in names:
            with contextlib.suppress(Exception):
                asyncio.run(delete(self.targets["rabbitmq"][0], name))
        self.go_dir.cleanup()

    def report(self) -> None:
        a, res = self.args, self.results
        print(HEADER)
        measured = {
            "qp": f"quorum publish, confirms, {a.window} in flight",
            "qc": f"quorum consume, prefetch {a.prefetch}",
            "qr": f"quorum consume, raw, {a.raw_messages // 1000}k/round",
            "qg": f"quorum consume, Go, {a.raw_messages // 1000}k/round",
            "sp": f"stream publish, confirms, {a.window} in flight",
            "sr": f"stream read {a.messages:,} from first",
        }
        for key, label in measured.items():
            if res[key]["hashbroker"].rates or res[key]["rabbitmq"].rates:
                print(row(label, res[key]["hashbroker"], res[key]["rabbitmq"]))
        if a.only == "quorum":
            return
        offsets = {t: sorted(v) for t, v in self.last_offsets.items()}
        print(f"last x-stream-offset read (expected {a.messages - 1}): {offsets}")
        bodies = a.messages * a.body / 2**20
        print(
            f"hashbroker RSS: {self.rss_before_read:.1f} MiB after publishing,"
            f" peak {self.rss_peak_read:.1f} MiB during the reads; the bodies read total {bodies:.1f} MiB"
        )
        print(
            "client/broker us: CPU microseconds per message of this process / of the broker process,"
            " hashbroker/RabbitMQ"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reference", default=REFERENCE_URL, help="reference broker URL (RabbitMQ)")
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages in the stream (each read)")
    parser.add_argument("--quorum-messages", type=int, default=20_000, help="messages per quorum round")
    parser.add_argument("--raw-messages", type=int, default=100_000, help="messages per raw consume round")
    parser.add_argument("--window", type=int, default=1000, help="confirms in flight")
    parser.add_argument("--prefetch", type=int, default=1000, help="consumer prefetch")
    parser.add_argument("--body", type=int, default=100, help="body bytes")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per workload (median)")
    parser.add_argument("--read-rounds", type=int, default=0, help="stream read rounds (default: --rounds)")
    parser.add_argument("--only", choices=("quorum", "stream"), help="run only these workloads")
    args = parser.parse_args(argv)

    data_dir = tempfile.TemporaryDirectory(prefix="qsbench-")
    port = free_port()
    proc, _, _ = start_serve(port, data_dir.name)
    targets = {
        "hashbroker": (f"amqp://guest:guest@127.0.0.1:{port}/%2F", proc.pid),
        "rabbitmq": (args.reference, reference_pid(args.reference)),
    }
    try:
        print(
            f"# {time.strftime('%Y-%m-%d %H:%M:%S')} {platform.node()} {platform.machine()} "
            f"{os.cpu_count()} cpus, Python {platform.python_version()}, aio-pika {aio_pika.__version__}; "
            f"{args.rounds} rounds, body {args.body} B, window {args.window}, prefetch {args.prefetch}; "
            f"load average {load_average()}",
            flush=True,
        )
        bench = Bench(args, targets, proc.pid)
        try:
            bench.run()
        finally:
            bench.cleanup()
        bench.report()
        print(f"load average at the end: {load_average()}")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        data_dir.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
