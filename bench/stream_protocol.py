"""Stream protocol throughput: rstream against hashbroker and RabbitMQ, in one run.

    .venv/bin/python bench/stream_protocol.py [--messages N] [--rounds R] [--size BYTES]
    .venv/bin/python bench/stream_protocol.py --rss [--rss-messages 10000000] [--data-dir DIR]

Throughput (the default): each round publishes `--messages` records of `--size` bytes (an AMQP 1.0
message rstream encodes once; the same bytes each time) with rstream's `send_batch` and waits for
every confirm, then consumes them all from the first offset with an rstream `Consumer`. The
brokers alternate (the one that goes first alternates too) over `--rounds` rounds, after an
uncounted round of `--warmup` messages on each (the first round of a process otherwise pays for
this client's and the broker's first use of their code paths); the table gives
each one's median rate, hashbroker's ratio to RabbitMQ, and the broker CPU per message: hashbroker's
process (started here, `--data-dir` persistent or a temporary one) and RabbitMQ's, the process that
owns the listening socket of its stream port (found through /proc/net/tcp's inode, so another
Erlang VM on the machine does not count).

RSS (`--rss`): publishes `--rss-messages` records of 100 bytes into one stream of a hashbroker with
a persistent data dir, then reports its VmRSS and VmHWM (peak); they must stay bounded whatever
the stream holds (`--rss-limit`, MiB; the exit status says whether it did).

Asserts nothing else (rates depend on the machine and on what else runs on it). RabbitMQ's CPU
per message is its whole process's: when other clients use the same RabbitMQ during a round, their
work counts too, and its rate drops with theirs; run on a quiet machine and broker, and read several
rounds. A round takes well under a second, so one burst of other work on a shared machine moves a
round by 20% or more: the default is 5 rounds (a median of 3 swung from 0.88x to 1.16x between two
runs of the same trees), and the load average before and after is printed with the table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from rstream import (
    AMQPMessage,
    ConfirmationStatus,
    Consumer,
    ConsumerOffsetSpecification,
    OffsetType,
    Producer,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import ensure_bytecode, free_port, hashbroker_cmd, listener_pid, process_cpu_seconds

USER = PASSWORD = "guest"
HOST = "127.0.0.1"
#: How many records one publish frame carries, and how many may wait for their confirm.
BATCH = 200
WINDOW = 20_000


def start_hashbroker(data_dir: str) -> tuple[subprocess.Popen[bytes], int]:
    """`hashbroker serve` with the stream listener on a free port; returns it once that port accepts."""
    amqp, stream = free_port(), free_port()
    proc = subprocess.Popen(
        [
            *hashbroker_cmd(),
            "serve",
            "--host",
            HOST,
            "--port",
            str(amqp),
            "--stream-port",
            str(stream),
            "--data-dir",
            data_dir,
            "--log-level",
            "WARNING",
        ],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"hashbroker serve exited with {proc.returncode}")
        try:
            with socket.create_connection((HOST, stream), timeout=0.2):
                return proc, stream
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("hashbroker's stream port did not accept within 60 s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not stopped within a minute (a large store's shutdown)."""
    proc.terminate()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def status_mib(pid: int, field: str) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def record(size: int) -> bytes:
    """An AMQP 1.0 message of `size` bytes in all, as rstream encodes one."""
    body = b"x" * size
    overhead = len(bytes(AMQPMessage(body=body))) - size
    return bytes(AMQPMessage(body=b"x" * (size - overhead)))


async def publish(port: int, stream: str, n: int, data: bytes, create: bool = True) -> float:
    """Messages per second, from the first send to the last confirm."""
    confirmed = 0
    room = asyncio.Event()
    done = asyncio.Event()

    def on_confirm(status: ConfirmationStatus) -> None:
        nonlocal confirmed
        confirmed += 1
        if sent - confirmed <= WINDOW // 2:
            room.set()
        if confirmed >= n:
            done.set()

    async with Producer(HOST, port=port, username=USER, password=PASSWORD) as producer:
        if create:
            await producer.create_stream(stream, exists_ok=True)
        batch = [data] * BATCH
        sent = 0
        t0 = time.perf_counter()
        while sent < n:
            chunk = batch if n - sent >= BATCH else batch[: n - sent]
            sent += len(chunk)
            await producer.send_batch(stream, chunk, on_publish_confirm=on_confirm)
            if sent - confirmed > WINDOW:
                room.clear()
                await asyncio.wait_for(room.wait(), 120)
        await asyncio.wait_for(done.wait(), 300)
        return n / (time.perf_counter() - t0)


async def consume(port: int, stream: str, n: int) -> float:
    """Messages per second, from subscribing at the first offset to the n-th record."""
    got = 0
    done = asyncio.Event()

    async def on_message(msg: bytes, ctx: object) -> None:
        nonlocal got
        got += 1
        if got >= n:
            done.set()

    consumer = Consumer(HOST, port=port, username=USER, password=PASSWORD)
    await consumer.start()
    try:
        t0 = time.perf_counter()
        await consumer.subscribe(
            stream, on_message, offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None)
        )
        await asyncio.wait_for(done.wait(), 300)
        return n / (time.perf_counter() - t0)
    finally:
        await consumer.close()


async def delete(port: int, stream: str) -> None:
    async with Producer(HOST, port=port, username=USER, password=PASSWORD) as producer:
        await producer.delete_stream(stream, missing_ok=True)


def timed(pid: int | None, n: int, run: Callable[[], Awaitable[float]]) -> tuple[float, float | None]:
    """(rate, broker CPU microseconds per message)."""
    cpu0 = process_cpu_seconds(pid)
    rate = asyncio.run(run())  # type: ignore[arg-type]
    cpu1 = process_cpu_seconds(pid)
    cpu = None if cpu0 is None or cpu1 is None else (cpu1 - cpu0) * 1e6 / n
    return rate, cpu


def one_round(
    name: str, port: int, pid: int | None, n: int, data: bytes
) -> dict[str, tuple[float, float | None]]:
    stream = f"stream2-bench-{uuid.uuid4().hex[:8]}"
    try:
        pub = timed(pid, n, lambda: publish(port, stream, n, data))
        con = timed(pid, n, lambda: consume(port, stream, n))
    finally:
        asyncio.run(delete(port, stream))
    print(
        f"  {name:<10} publish {pub[0]:>9,.0f} msg/s ({_us(pub[1])})"
        f"   consume {con[0]:>9,.0f} msg/s ({_us(con[1])})",
        flush=True,
    )
    return {"publish": pub, "consume": con}


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _us(v: float | None) -> str:
    return "cpu ?" if v is None else f"cpu {v:.1f} us/msg"


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def throughput(args: argparse.Namespace) -> int:
    ref_pid = listener_pid(args.reference_port)
    if ref_pid is None:
        print(f"note: no local process listens on {args.reference_port}; RabbitMQ's CPU is unknown")
    data = record(args.size)
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_hashbroker(args.data_dir or tmp)
        try:
            brokers = {"hashbroker": (port, proc.pid), "rabbitmq": (args.reference_port, ref_pid)}
            results: dict[str, list[dict[str, tuple[float, float | None]]]] = {b: [] for b in brokers}
            order = list(brokers)
            print(f"{args.messages:,} messages of {len(data)} bytes, {args.rounds} rounds")
            print(f"load average at the start: {_load()}")
            if args.warmup:  # both brokers and this client's code paths once, not counted
                for name in order:
                    p, _pid = brokers[name]
                    one_round(f"({name})", p, None, args.warmup, data)
            for r in range(args.rounds):
                print(f"round {r + 1}", flush=True)
                for name in order if r % 2 == 0 else order[::-1]:
                    p, pid = brokers[name]
                    results[name].append(one_round(name, p, pid, args.messages, data))
        finally:
            stop(proc)
    print(f"load average at the end: {_load()}")
    print()
    print(f"{'workload':<20}{'hashbroker':>14}{'rabbitmq':>14}{'ratio':>8}{'hb cpu':>14}{'rmq cpu':>14}")
    for workload in ("publish", "consume"):
        hb = results["hashbroker"]
        rq = results["rabbitmq"]
        hb_rate = statistics.median(x[workload][0] for x in hb)
        rq_rate = statistics.median(x[workload][0] for x in rq)
        hb_cpu = _median([x[workload][1] for x in hb])
        rq_cpu = _median([x[workload][1] for x in rq])
        label = "publish (confirmed)" if workload == "publish" else "consume"
        print(
            f"{label:<20}{hb_rate:>10,.0f} m/s{rq_rate:>10,.0f} m/s{hb_rate / rq_rate:>7.2f}x"
            f"{_cpu_cell(hb_cpu):>14}{_cpu_cell(rq_cpu):>14}"
        )
    return 0


def _cpu_cell(v: float | None) -> str:
    return "?" if v is None else f"{v:.1f} us/msg"


def rss(args: argparse.Namespace) -> int:
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="stream2-rss-")
    proc, port = start_hashbroker(data_dir)
    stream = f"stream2-rss-{uuid.uuid4().hex[:8]}"
    data = record(100)
    step = 1_000_000
    print(f"{args.rss_messages:,} messages of {len(data)} bytes into {stream} (data dir {data_dir})")
    try:
        t0 = time.perf_counter()
        done = 0
        while done < args.rss_messages:
            n = min(step, args.rss_messages - done)
            asyncio.run(publish(port, stream, n, data, create=done == 0))
            done += n
            print(
                f"  {done:>11,} published  {time.perf_counter() - t0:7.0f} s  "
                f"VmRSS {status_mib(proc.pid, 'VmRSS'):6.1f} MiB  "
                f"VmHWM {status_mib(proc.pid, 'VmHWM'):6.1f} MiB",
                flush=True,
            )
        time.sleep(2)
        vm_rss, vm_hwm = status_mib(proc.pid, "VmRSS"), status_mib(proc.pid, "VmHWM")
        print(f"final: VmRSS {vm_rss:.1f} MiB, VmHWM {vm_hwm:.1f} MiB (limit {args.rss_limit} MiB)")
        asyncio.run(delete(port, stream))
    finally:
        stop(proc)
    return 0 if vm_hwm < args.rss_limit else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size", type=int, default=1024, help="bytes per message (AMQP 1.0 encoded)")
    ap.add_argument("--reference-port", type=int, default=5552, help="RabbitMQ's stream port on 127.0.0.1")
    ap.add_argument("--data-dir", help="hashbroker's data dir (default: a temporary one)")
    ap.add_argument(
        "--warmup", type=int, default=10_000, help="messages of an uncounted round on each broker (0: none)"
    )
    ap.add_argument("--rss", action="store_true", help="the memory check instead of the throughput table")
    ap.add_argument("--rss-messages", type=int, default=10_000_000)
    ap.add_argument("--rss-limit", type=float, default=200.0, help="MiB")
    args = ap.parse_args(argv)
    ensure_bytecode()
    return rss(args) if args.rss else throughput(args)


if __name__ == "__main__":
    raise SystemExit(main())
