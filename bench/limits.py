"""Benchmark: hashbroker's limits next to RabbitMQ's, where the shared RabbitMQ can be measured.

    python bench/limits.py                                  # everything, full sizes (~15 min)
    python bench/limits.py --only rss,connections --messages 20000 --connections 500
    python bench/limits.py --only restart --restart-messages 50000

hashbroker runs as `hashbroker serve --port <free> --data-dir <tmp>` in its own process; its memory
is that process's RSS (/proc/<pid>/status VmRSS). RabbitMQ is the one on --rabbitmq (shared with
others, so it is never restarted nor reconfigured): its memory is the node's `mem_used` from the
management API (/api/nodes/<node>), read after the 5 s statistics interval; its uniquely named
queues are deleted afterwards. Figures measured on both print the ratio hashbroker / RabbitMQ; the
brokers alternate (the order flips each repeat) and each figure is the median of --repeats.

rss          memory per queued 1 KB transient message: --messages into one classic queue (confirms on),
             (memory after - memory before) / messages; for RabbitMQ also the queue's own `memory`.
flood        peak RSS of `hashbroker serve --memory-high-watermark 200MB` while 4 connections publish
             1 KB messages without confirms for --flood-seconds; whether connection.blocked arrived
             and how many messages the queue took ("not supported" when serve rejects the flag).
restart      time to serve after a restart with --restart-messages persistent messages stored in a
             durable queue: SIGTERM, start again, seconds until the port accepts, until
             connection.start answers, until a passive declare reports every message.
connections  --connections concurrent connections (handshake done, one channel, no heartbeats) and
             their memory per connection; RabbitMQ gets --rabbitmq-connections (its descriptor limit
             is shared with everyone else's tests here).
fuzz         bench/fuzz.py for --fuzz-seconds: mutated client streams, exceptions and tracebacks counted.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import raw_amqp  # noqa: E402

KB = b"x" * 1024
PARTS = ("rss", "flood", "restart", "connections", "fuzz")
PREFIX = f"limits.{uuid.uuid4().hex[:8]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


class Hashbroker:
    """`hashbroker serve` in its own process on a free port, with a data dir that outlives restarts."""

    def __init__(self, data_dir: str, extra: list[str] | None = None) -> None:
        self.data_dir = data_dir
        self.extra = extra or []
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = Path(data_dir + ".log")

    def start(self, timeout: float = 600) -> tuple[float, float]:
        """Start; seconds until the port accepted and until connection.start answered the header."""
        cmd = [
            sys.executable,
            "-m",
            "broker.cli.main",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        t0 = time.perf_counter()
        with self.log.open("ab") as log:  # a file, not a pipe: 5,000 closes' log lines never block it
            self.proc = subprocess.Popen(
                [*cmd, "--data-dir", self.data_dir, "--log-level", "WARNING", *self.extra],
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                stderr=log,
            )
        listening = None
        while time.perf_counter() - t0 < timeout:
            if self.proc.poll() is not None:
                tail = self.log.read_text(errors="replace")[-500:]
                raise RuntimeError(f"hashbroker serve exited with {self.proc.returncode}: {tail}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                    listening = listening or time.perf_counter() - t0
                    sock.settimeout(timeout)
                    sock.sendall(b"AMQP\x00\x00\x09\x01")
                    if sock.recv(1)[:1] == b"\x01":  # a method frame: connection.start
                        return listening, time.perf_counter() - t0
            except OSError:
                time.sleep(0.01)
        raise RuntimeError(f"hashbroker serve did not serve within {timeout} s")

    @property
    def rss(self) -> int:
        assert self.proc is not None
        return rss_bytes(self.proc.pid)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Rabbit:
    """The shared RabbitMQ: AMQP address and the management API for the node's memory."""

    def __init__(self, amqp: str, api: str) -> None:
        host, _, port = amqp.rpartition(":")
        self.host, self.port = host, int(port)
        self.api = api.rstrip("/")
        self.node = self._get("/api/overview")["node"]

    def _get(self, path: str) -> Any:
        req = urllib.request.Request(self.api + path)
        req.add_header("authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.load(resp)

    def memory(self, settle: float = 2.0) -> dict[str, int]:
        """The node's OS RSS (`total.rss`) and memory categories (/api/nodes/<node>/memory)."""
        time.sleep(settle)
        breakdown = self._get(f"/api/nodes/{self.node}/memory")["memory"]
        out = {k: int(v) for k, v in breakdown.items() if isinstance(v, int)}
        out["rss"] = int(breakdown["total"]["rss"])
        return out

    def queue_memory(self, queue: str, messages: int) -> int:
        from urllib.parse import quote

        deadline = time.monotonic() + 30
        while True:
            info = self._get(f"/api/queues/%2F/{quote(queue, safe='')}")
            if info.get("messages") == messages or time.monotonic() > deadline:
                return int(info.get("memory", 0))
            time.sleep(1)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def fresh_hashbroker(tmp: str) -> Hashbroker:
    """A new broker for each round: one that freed memory in an earlier round would reuse it."""
    hb = Hashbroker(tempfile.mkdtemp(dir=tmp))
    hb.start(60)
    return hb


def rss_hashbroker(tmp: str, messages: int) -> dict[str, float]:
    """Bytes of RSS per queued 1 KB message (one round, a fresh broker)."""
    hb = fresh_hashbroker(tmp)
    try:
        queue = f"{PREFIX}.rss"
        run(raw_amqp.declare("127.0.0.1", hb.port, queue))
        time.sleep(0.5)
        before = hb.rss
        run(raw_amqp.fill("127.0.0.1", hb.port, queue, messages, KB, persistent=False))
        assert run(raw_amqp.count("127.0.0.1", hb.port, queue)) == messages
        time.sleep(0.5)
        return {"hashbroker": (hb.rss - before) / messages}
    finally:
        hb.stop()


def rss_rabbitmq(rabbit: Rabbit, messages: int) -> dict[str, float]:
    """Bytes per queued 1 KB message: the growth of the memory categories that hold queued messages
    (queue_procs, binary, msg_index: what RabbitMQ attributes to them, the figure compared); also
    the queue's own `memory` and the node's RSS growth, which the allocators' reserve and the other
    users of this shared node make noisy."""
    queue = f"{PREFIX}.rss.{uuid.uuid4().hex[:6]}"
    run(raw_amqp.declare(rabbit.host, rabbit.port, queue))
    try:
        before = rabbit.memory()
        run(raw_amqp.fill(rabbit.host, rabbit.port, queue, messages, KB, persistent=False))
        assert run(raw_amqp.count(rabbit.host, rabbit.port, queue)) == messages
        after = rabbit.memory()
        held = sum(after[k] - before[k] for k in ("queue_procs", "binary", "msg_index"))
        return {
            "rabbitmq": held / messages,
            "rabbitmq_rss_delta": (after["rss"] - before["rss"]) / messages,
            "rabbitmq_queue_memory": rabbit.queue_memory(queue, messages) / messages,
        }
    finally:
        run(raw_amqp.delete(rabbit.host, rabbit.port, queue))


async def _open_many(host: str, port: int, n: int) -> list[raw_amqp.RawConnection]:
    gate = asyncio.Semaphore(100)

    async def one() -> raw_amqp.RawConnection:
        async with gate:
            return await raw_amqp.RawConnection.open(host, port)

    return list(await asyncio.gather(*(one() for _ in range(n))))


Memory = dict[str, int]


def _hold(host: str, port: int, n: int, measure: Callable[[], Memory]) -> tuple[Memory, Memory, float]:
    """Open `n` connections, measure, close them: memory before and while open, seconds to open."""

    async def body() -> tuple[Memory, Memory, float]:
        before = await asyncio.to_thread(measure)
        t0 = time.perf_counter()
        conns = await _open_many(host, port, n)
        opened = time.perf_counter() - t0
        after = await asyncio.to_thread(measure)
        await asyncio.gather(*(c.close() for c in conns))
        return before, after, opened

    result: tuple[Memory, Memory, float] = run(body())
    return result


def connections_hashbroker(tmp: str, n: int) -> dict[str, float]:
    hb = fresh_hashbroker(tmp)

    def settled_rss() -> Memory:
        time.sleep(1.0)
        return {"rss": hb.rss}

    try:
        before, after, seconds = _hold("127.0.0.1", hb.port, n, settled_rss)
    finally:
        hb.stop()
    return {"hashbroker": (after["rss"] - before["rss"]) / n, "hashbroker_open_seconds": seconds}


def connections_rabbitmq(rabbit: Rabbit, n: int) -> dict[str, float]:
    before, after, seconds = _hold(rabbit.host, rabbit.port, n, rabbit.memory)
    kinds = ("connection_readers", "connection_writers", "connection_channels", "connection_other")
    return {
        "rabbitmq": sum(after[k] - before[k] for k in kinds) / n,
        "rabbitmq_rss_delta": (after["rss"] - before["rss"]) / n,
        "rabbitmq_open_seconds": seconds,
    }


Round = Callable[[], dict[str, float]]


def alternate(rounds: int, hashbroker: Round, rabbitmq: Round | None) -> dict[str, float]:
    """Medians over `rounds` rounds of both brokers, the order flipped every round."""
    results: list[dict[str, float]] = []
    for i in range(rounds):
        order = [hashbroker, rabbitmq] if i % 2 == 0 else [rabbitmq, hashbroker]
        merged: dict[str, float] = {}
        for measure in order:
            if measure is not None:
                merged.update(measure())
        results.append(merged)
    keys = {k for r in results for k in r}
    return {k: statistics.median(r[k] for r in results if k in r) for k in sorted(keys)}


def flood(args: argparse.Namespace, tmp: str) -> dict[str, Any]:
    hb = Hashbroker(os.path.join(tmp, "flood"), ["--memory-high-watermark", "200MB"])
    try:
        hb.start(60)
    except RuntimeError as exc:
        if "unrecognized arguments" in str(exc) or "memory" in str(exc).lower():
            lines = [line for line in str(exc).splitlines() if line.strip()]
            return {"supported": False, "why": lines[-1][:200]}
        raise
    queue = f"{PREFIX}.flood"
    peak = [hb.rss]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak.append(hb.rss)
            time.sleep(0.05)

    async def publisher(blocked: list[bool]) -> None:
        conn = await raw_amqp.RawConnection.open("127.0.0.1", hb.port)
        frames = raw_amqp.publish_bytes(queue, KB, persistent=False) * 100

        async def watch() -> None:
            while True:
                await conn.next_frame()
                if conn.blocked:
                    blocked.append(True)

        watcher = asyncio.create_task(watch())
        deadline = time.monotonic() + args.flood_seconds
        try:
            while time.monotonic() < deadline:
                conn.writer.write(frames)
                try:
                    await asyncio.wait_for(conn.writer.drain(), max(0.01, deadline - time.monotonic()))
                except TimeoutError:
                    break
        finally:
            watcher.cancel()
            conn.writer.transport.abort()

    async def body() -> list[bool]:
        blocked: list[bool] = []
        await asyncio.gather(*(publisher(blocked) for _ in range(4)), return_exceptions=True)
        return blocked

    try:
        run(raw_amqp.declare("127.0.0.1", hb.port, queue))
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        blocked = run(body())
        time.sleep(1.0)
        stop.set()
        sampler.join()
        depth = run(asyncio.wait_for(raw_amqp.count("127.0.0.1", hb.port, queue), 60))
        return {
            "supported": True,
            "peak_rss_mib": max(peak) / 2**20,
            "blocked": bool(blocked),
            "queued": depth,
        }
    finally:
        stop.set()
        hb.stop()


def restart(args: argparse.Namespace, tmp: str) -> dict[str, Any]:
    hb = Hashbroker(os.path.join(tmp, "restart"))
    queue = f"{PREFIX}.restart"
    n = args.restart_messages
    hb.start(60)
    try:
        run(raw_amqp.declare("127.0.0.1", hb.port, queue, durable=True))
        t0 = time.perf_counter()
        run(raw_amqp.fill("127.0.0.1", hb.port, queue, n, KB, persistent=True))
        fill_seconds = time.perf_counter() - t0
        hb.stop()
        t0 = time.perf_counter()
        listening, serving = hb.start()
        while run(raw_amqp.count("127.0.0.1", hb.port, queue)) < n:
            time.sleep(0.05)
        ready = time.perf_counter() - t0
        return {
            "messages": n,
            "fill_seconds": fill_seconds,
            "listening_s": listening,
            "serving_s": serving,
            "all_messages_s": ready,
            "rss_mib": hb.rss / 2**20,
        }
    finally:
        hb.stop()


def fuzz(args: argparse.Namespace) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "fuzz.py"), "--seconds", str(args.fuzz_seconds)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=args.fuzz_seconds + 300,
    )

    def number(pattern: str) -> int | None:
        m = re.search(pattern, proc.stdout)
        return int(m.group(1)) if m else None

    return {
        "connections": number(r"(?m)^(\d+) connections in"),
        "unhandled_exceptions": number(r"541 closes for unhandled exceptions: (\d+)"),
        "tracebacks": number(r"tracebacks in the broker log: (\d+)"),
        "neighbour_failures": number(r"neighbour failures: (\d+)"),
        "exit": proc.returncode,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(PARTS), help=f"comma-separated subset of {', '.join(PARTS)}")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--messages", type=int, default=100_000, help="1 KB messages queued for the rss figure")
    ap.add_argument("--flood-seconds", type=float, default=30)
    ap.add_argument("--restart-messages", type=int, default=1_000_000)
    ap.add_argument("--connections", type=int, default=5000)
    ap.add_argument("--rabbitmq-connections", type=int, default=300)
    ap.add_argument("--fuzz-seconds", type=float, default=180)
    ap.add_argument("--rabbitmq", default="127.0.0.1:5672", help="AMQP host:port of RabbitMQ ('' to skip)")
    ap.add_argument("--rabbitmq-api", default="http://127.0.0.1:15672")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = set(parts) - set(PARTS)
    if unknown:
        ap.error(f"unknown parts: {', '.join(sorted(unknown))}")
    rabbit = Rabbit(args.rabbitmq, args.rabbitmq_api) if args.rabbitmq else None
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    summary: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench_limits_") as tmp:
        if "rss" in parts:
            r = alternate(
                args.repeats,
                lambda: rss_hashbroker(tmp, args.messages),
                None if rabbit is None else lambda: rss_rabbitmq(rabbit, args.messages),
            )
            summary["rss_per_1kb_message"] = r
            report("memory per queued 1 KB message (bytes)", r)
        if "connections" in parts:
            c = alternate(
                args.repeats,
                lambda: connections_hashbroker(tmp, args.connections),
                None
                if rabbit is None or not args.rabbitmq_connections
                else lambda: connections_rabbitmq(rabbit, args.rabbitmq_connections),
            )
            summary["memory_per_connection"] = c
            title = f"memory per connection ({args.connections:,} on hashbroker, "
            report(title + f"{args.rabbitmq_connections:,} on RabbitMQ; bytes)", c)
        if "flood" in parts:
            summary["flood"] = f = flood(args, tmp)
            print(f"\n1 KB flood, --memory-high-watermark 200MB: {f}", flush=True)
        if "restart" in parts:
            summary["restart"] = r2 = restart(args, tmp)
            print(f"\nrestart with {args.restart_messages:,} stored 1 KB messages: {fmt(r2)}", flush=True)
    if "fuzz" in parts:
        summary["fuzz"] = fz = fuzz(args)
        print(f"\nfuzz for {args.fuzz_seconds:g} s: {fz}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
    return 0


def fmt(d: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v:,.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in d.items())


def report(title: str, medians: dict[str, float]) -> None:
    print(f"\n{title}, medians: {fmt(medians)}", flush=True)
    if medians.get("rabbitmq"):
        print(
            f"  ratio hashbroker / rabbitmq = {medians['hashbroker'] / medians['rabbitmq']:.2f}", flush=True
        )


if __name__ == "__main__":
    raise SystemExit(main())
