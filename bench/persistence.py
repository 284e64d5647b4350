"""Persistence: confirmed persistent writes/s of the store, and end to end against RabbitMQ.

    .venv/bin/python bench/persistence.py [--messages N] [--window W] [--body BYTES]
                                          [--reference URL] [--e2e-messages N] [--skip-e2e]

1. Store level (`broker.store`, no AMQP): N persistent messages with W confirms in flight (a sliding
   window, as a confirming publisher keeps it), once per `sync` mode, plus a window of 1 (one commit
   per message) to show what group commit buys. A write counts once its future resolved, i.e. once
   its transaction committed.
2. End to end: one aio-pika publisher with publisher confirms, delivery_mode 2, to a durable queue,
   W in flight, against `hashbroker serve --data-dir <temporary dir>` in its own process (as the
   reference runs in its own) and the reference RabbitMQ, same client, same run; prints both rates
   and their ratio.

Prints a table; asserts nothing (numbers depend on the machine and its disk).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from collections import deque
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(REPO))

from broker.store import QueueRecord, open_store  # noqa: E402

REFERENCE_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"
# Property flags for delivery_mode only, then delivery_mode = 2: what a persistent publish carries.
PERSISTENT_PROPS = b"\x10\x00\x02"


@dataclass
class StoreResult:
    label: str
    rate: float
    transactions: int
    messages: int

    @property
    def per_transaction(self) -> float:
        return self.messages / self.transactions if self.transactions else 0.0


# -- 1. store level ----------------------------------------------------------------------------------


async def _store_run(data_dir: Path, n: int, window: int, body: bytes, sync: str) -> StoreResult:
    store = open_store(data_dir, sync=sync)
    store.load()
    store.start()
    try:
        store.put_queue(QueueRecord("/", "bench"))
        await store.sync()
        base = store.stats.transactions
        in_flight: deque[asyncio.Future[None]] = deque()
        t0 = time.perf_counter()
        for seq in range(1, n + 1):
            if len(in_flight) >= window:
                await in_flight.popleft()
            in_flight.append(store.persist("/", [("bench", seq)], PERSISTENT_PROPS, body, "", "bench"))
        while in_flight:
            await in_flight.popleft()
        elapsed = time.perf_counter() - t0
        return StoreResult("", n / elapsed, store.stats.transactions - base, n)
    finally:
        await store.close()


def bench_store(n: int, window: int, body: bytes, sync: str) -> StoreResult:
    """Confirmed persistent writes/s of the store alone, in a fresh temporary data directory."""
    with tempfile.TemporaryDirectory(prefix="hashbroker-bench-") as tmp:
        result = asyncio.run(_store_run(Path(tmp), n, window, body, sync))
    result.label = f"store, sync={sync}, {window} in flight"
    return result


# -- 2. end to end -----------------------------------------------------------------------------------


def broker_has_data_dir() -> bool:
    """True once the broker's settings know `data_dir` (the durable store is present)."""
    from broker.runtime.settings import Settings

    return "data_dir" in Settings.model_fields


async def _confirmed_publish(url: str, n: int, window: int, body: bytes) -> float:
    import aio_pika

    queue = f"bench.persist.{uuid.uuid4().hex[:10]}"
    conn = await aio_pika.connect(url)
    async with conn:
        ch = await conn.channel(publisher_confirms=True)
        await ch.declare_queue(queue, durable=True)
        sem = asyncio.Semaphore(window)

        async def one() -> None:
            async with sem:
                await ch.default_exchange.publish(
                    aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                    routing_key=queue,
                )

        try:
            t0 = time.perf_counter()
            await asyncio.gather(*(one() for _ in range(n)))
            return n / (time.perf_counter() - t0)
        finally:
            await ch.queue_delete(queue)


def bench_end_to_end(url: str, n: int, window: int, body: bytes) -> float:
    """aio-pika publisher confirms, delivery_mode 2, durable queue, `window` in flight."""
    return asyncio.run(_confirmed_publish(url, n, window, body))


def bench_hashbroker_end_to_end(n: int, window: int, body: bytes, sync: str = "normal") -> tuple[float, str]:
    """The same workload against hashbroker; returns (rate, note on persistence).

    Once the broker has `data_dir`, it runs as `hashbroker serve --data-dir <tmp>` in its own
    process, as the reference RabbitMQ does: an embedded `BrokerThread` would share the client's
    interpreter (and GIL) and measure the two together.
    """
    from broker.embedded import BrokerThread

    with tempfile.TemporaryDirectory(prefix="hashbroker-bench-") as tmp:
        if not broker_has_data_dir():
            with BrokerThread(port=0) as b:
                note = "hashbroker does NOT persist yet (store not integrated): its rate is in-memory only"
                return bench_end_to_end(b.url, n, window, body), note
        port = _free_port()
        proc = subprocess.Popen(
            [
                *(
                    sys.executable,
                    "-m",
                    "broker.cli.main",
                    "serve",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                ),
                *("--data-dir", tmp, "--store-sync", sync, "--log-level", "WARNING"),
            ],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        try:
            url = f"amqp://guest:guest@127.0.0.1:{port}/%2F"
            deadline = time.time() + 30
            while not _reachable(url):
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"hashbroker serve did not start (exit {proc.poll()})")
                time.sleep(0.05)
            note = f"hashbroker serve (own process) persists to a temporary data dir ({tmp}), sync={sync}"
            return bench_end_to_end(url, n, window, body), note
        finally:
            proc.terminate()
            proc.wait(10)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _reachable(url: str) -> bool:
    import socket
    from urllib.parse import urlparse

    u = urlparse(url)
    try:
        with socket.create_connection((u.hostname or "127.0.0.1", u.port or 5672), timeout=2):
            return True
    except OSError:
        return False


# -- main -----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=50_000, help="messages per store run")
    parser.add_argument("--window", type=int, default=1000, help="confirms in flight")
    parser.add_argument("--body", type=int, default=64, help="message body size in bytes")
    parser.add_argument("--unbatched-messages", type=int, default=2_000, help="messages for the window-1 run")
    parser.add_argument("--reference", default=REFERENCE_URL, help="reference broker URL (RabbitMQ)")
    parser.add_argument("--e2e-messages", type=int, default=20_000, help="messages per end-to-end run")
    parser.add_argument(
        "--e2e-sync", default="normal", choices=["normal", "full"], help="hashbroker store sync"
    )
    parser.add_argument("--skip-e2e", action="store_true", help="only the store micro-benchmark")
    args = parser.parse_args(argv)
    body = os.urandom(args.body)

    print(
        f"# {time.strftime('%Y-%m-%d %H:%M:%S')} {platform.node()} {platform.machine()} "
        f"{os.cpu_count()} cpus, Python {platform.python_version()}, body {args.body} B"
    )
    print(f"{'store workload':<44} {'confirmed/s':>12} {'commits':>8} {'msgs/commit':>12}")
    runs = [
        (args.messages, args.window, "normal"),
        (args.messages, args.window, "full"),
        (args.unbatched_messages, 1, "normal"),
        (args.unbatched_messages, 1, "full"),
    ]
    for n, window, sync in runs:
        r = bench_store(n, window, body, sync)
        print(f"{r.label:<44} {r.rate:>12,.0f} {r.transactions:>8} {r.per_transaction:>12.1f}")

    if args.skip_e2e:
        return 0
    print()
    label = f"aio-pika confirms, persistent, {args.window} in flight"
    hb, note = bench_hashbroker_end_to_end(args.e2e_messages, args.window, body, args.e2e_sync)
    ref: float | None = None
    if _reachable(args.reference):
        ref = bench_end_to_end(args.reference, args.e2e_messages, args.window, body)
    else:
        print(f"# reference broker {args.reference} not reachable: no comparison", file=sys.stderr)
    print(f"{'end to end':<44} {'hashbroker/s':>12} {'reference/s':>12} {'ratio':>7}")
    ratio = f"{hb / ref:.2f}" if ref else "-"
    print(f"{label:<44} {hb:>12,.0f} {ref or 0:>12,.0f} {ratio:>7}")
    print(f"# {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
