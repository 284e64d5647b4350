"""Throughput and broker CPU per message with N publishers and N consumers, hashbroker vs RabbitMQ.

    .venv/bin/python bench/scaling.py [--clients 1,2,4,8] [--messages 50000] [--rounds 3]

For each N, N publisher processes each pipeline `--messages` pre-encoded 16-byte publishes into
their own queue while N consumer processes (basic.consume, no-ack, one per queue) count the
deliveries; the round's rate is all messages over the time until the last consumer has them all.
The clients are raw sockets writing pre-encoded frames and counting frames (no client library),
so that on a small machine the broker, not the client, is what the figure measures. The broker's
CPU per message is read from /proc for the process that owns the broker's listening port (RabbitMQ's
`beam.smp`, hashbroker's `hashbroker serve`). Rounds alternate between the brokers; medians are
printed as a markdown table. Asserts nothing.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import socket
import statistics
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pamqp import commands, frame
from raw_amqp import handshake_bytes, publish_bytes
from throughput import BODY, build_summary, free_port, listener_pid, process_cpu_seconds, start_serve

REFERENCE_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"


def connect(host: str, port: int) -> socket.socket:
    """A socket past connection.open-ok with channel 1 open (replies read and discarded)."""
    sock = socket.create_connection((host, port), timeout=120)
    sock.sendall(handshake_bytes() + frame.marshal(commands.Channel.Open(), 1))
    read_until(sock, b"\x00\x14\x00\x0b")  # channel.open-ok
    return sock


def read_until(sock: socket.socket, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data


def publisher(host: str, port: int, queue: str, messages: int, start: mp.Event) -> None:
    sock = connect(host, port)
    one = publish_bytes(queue, BODY, persistent=False)
    batch = one * 1000
    start.wait()
    for _ in range(messages // 1000):
        sock.sendall(batch)
    sock.sendall(one * (messages % 1000))
    sock.sendall(frame.marshal(commands.Queue.Declare(queue=queue, passive=True), 1))
    read_until(sock, b"\x00\x32\x00\x0b")  # queue.declare-ok: every publish before it is in
    sock.close()


def consumer(host: str, port: int, queue: str, messages: int, ready: mp.Event, done: mp.Queue) -> None:
    sock = connect(host, port)
    sock.sendall(frame.marshal(commands.Basic.Consume(queue=queue, no_ack=True), 1))
    read_until(sock, b"\x00\x3c\x00\x15")  # basic.consume-ok
    ready.set()
    seen = 0
    pending = b""
    while seen < messages:
        data = sock.recv(1 << 20)
        if not data:
            raise ConnectionError("the broker closed the connection")
        buf = pending + data
        pos = 0
        while len(buf) - pos >= 7:
            size = int.from_bytes(buf[pos + 3 : pos + 7], "big")
            end = pos + 8 + size
            if end > len(buf):
                break
            if buf[pos] == 3:  # a body frame: one per 16-byte message
                seen += 1
            pos = end
        pending = buf[pos:]
    done.put(time.perf_counter())
    sock.close()


def one_round(url: str, n: int, messages: int, pid: int | None) -> tuple[float, float | None]:
    parsed = urlparse(url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 5672
    queues = [f"bench.scale.{uuid.uuid4().hex[:8]}" for _ in range(n)]
    admin = connect(host, port)
    for q in queues:
        admin.sendall(frame.marshal(commands.Queue.Declare(queue=q, auto_delete=False), 1))
        read_until(admin, b"\x00\x32\x00\x0b")
    ctx = mp.get_context("fork")
    start, done = ctx.Event(), ctx.Queue()
    readies = [ctx.Event() for _ in queues]
    consumers = [
        ctx.Process(target=consumer, args=(host, port, q, messages, r, done))
        for q, r in zip(queues, readies, strict=True)
    ]
    publishers = [ctx.Process(target=publisher, args=(host, port, q, messages, start)) for q in queues]
    for p in consumers + publishers:
        p.start()
    for r in readies:
        r.wait(60)
    time.sleep(0.5)  # publishers connected too
    cpu0 = process_cpu_seconds(pid)
    t0 = time.perf_counter()
    start.set()
    finished = max(done.get(timeout=600) for _ in queues)
    cpu1 = process_cpu_seconds(pid)
    for p in consumers + publishers:
        p.join(60)
    for q in queues:
        admin.sendall(frame.marshal(commands.Queue.Delete(queue=q), 1))
        read_until(admin, b"\x00\x32\x00\x29")
    admin.close()
    total = n * messages
    cpu_us = None if cpu0 is None or cpu1 is None else (cpu1 - cpu0) / total * 1e6
    return total / (finished - t0), cpu_us


def median_cpu(runs: list[tuple[float, float | None]]) -> float | None:
    known = [c for _, c in runs if c is not None]
    return statistics.median(known) if known else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default="1,2,4,8")
    parser.add_argument("--messages", type=int, default=50_000, help="per publisher")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reference", default=REFERENCE_URL)
    args = parser.parse_args()
    port = free_port()
    proc, _listening, _serving = start_serve(port)
    brokers = {
        "hashbroker": (f"amqp://guest:guest@127.0.0.1:{port}/%2F", proc.pid),
        "rabbitmq": (args.reference, listener_pid(urlparse(args.reference).port or 5672)),
    }
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(
        f"# bench/scaling.py: {args.messages:,} x 16 B per publisher, {args.rounds} rounds, "
        f"{os.cpu_count()} cpus, Python {platform.python_version()}, {when}; {build_summary()}"
    )
    rows = []
    try:
        for n in (int(x) for x in args.clients.split(",")):
            results: dict[str, list[tuple[float, float | None]]] = {b: [] for b in brokers}
            for _ in range(args.rounds):
                for name, (url, pid) in brokers.items():
                    results[name].append(one_round(url, n, args.messages, pid))
                    print(f"  N={n} {name}: {results[name][-1][0]:,.0f} msg/s", file=sys.stderr)
            med = {
                b: (
                    statistics.median(r for r, _ in runs),
                    statistics.median(c for _, c in runs if c is not None)
                    if any(c for _, c in runs)
                    else None,
                )
                for b, runs in results.items()
            }
            rows.append((n, med))
    finally:
        proc.terminate()
        proc.wait(10)
    print("| N pub + N cons | hashbroker msg/s | RabbitMQ msg/s | ratio | broker CPU µs/msg, hb / RMQ |")
    print("|---:|---:|---:|---:|---|")
    for n, med in rows:
        (hb, hb_cpu), (rmq, rmq_cpu) = med["hashbroker"], med["rabbitmq"]
        cpu = f"{hb_cpu:.1f} / {rmq_cpu:.1f}" if hb_cpu is not None and rmq_cpu is not None else "-"
        print(f"| {n} | {hb:,.0f} | {rmq:,.0f} | {hb / rmq:.2f} | {cpu} |")


if __name__ == "__main__":
    main()
