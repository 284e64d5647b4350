"""`hashbroker demo`: consistent-hash routing of 100,000 keys, compared with RabbitMQ 3.10.8.

Publishes through aio-pika (a real AMQP client) to an in-process broker on a free port, waits until
every message is routed (passive queue.declare counts), then prints the distribution.
"""

from __future__ import annotations

import asyncio
import sys
import time

from exchanges import hash_implementation

# Recorded from RabbitMQ 3.10.8 (Debian 3.10.8-1.1+deb12u1, Erlang/OTP 25.2.3, consistent-hash plugin):
# exchange type x-consistent-hash, queues bound in order with binding keys "1", "1", "2", "2", one
# message per routing key "0".."99999". Source: ../shared/reference/rabbitmq-3.10.8-routing.json,
# topology "chx_weights_1_1_2_2" (per_queue_counts).
RABBITMQ_3_10_8_COUNTS: dict[str, int] = {"q1": 16638, "q2": 16631, "q3": 33441, "q4": 33290}
WEIGHTS: dict[str, int] = {"q1": 1, "q2": 1, "q3": 2, "q4": 2}


def _progress(done: int, total: int, started: float) -> None:
    width = 40
    filled = width * done // total
    rate = done / max(time.perf_counter() - started, 1e-9)
    sys.stdout.write(
        f"\rpublishing [{'#' * filled}{'.' * (width - filled)}] {done:>7}/{total} ({rate:,.0f} msg/s)"
    )
    sys.stdout.flush()


async def _demo(total: int) -> dict[str, int]:
    try:
        import aio_pika
    except ImportError:  # pragma: no cover - only without the client installed
        raise SystemExit("hashbroker demo needs aio-pika (pip install aio-pika)") from None
    from broker.server import Broker

    async with Broker(host="127.0.0.1", port=0) as broker:
        print(f"hashbroker listening on {broker.host}:{broker.port}")
        conn = await aio_pika.connect(broker.url)
        async with conn:
            channel = await conn.channel(publisher_confirms=False)
            exchange = await channel.declare_exchange("e", "x-consistent-hash")
            queues = {}
            for name, weight in WEIGHTS.items():
                q = await channel.declare_queue(name)
                await q.bind(exchange, routing_key=str(weight))
                queues[name] = q
            started = time.perf_counter()
            step = max(total // 100, 1)
            for i in range(total):
                await exchange.publish(aio_pika.Message(body=b""), routing_key=str(i))
                if i % step == 0:
                    _progress(i, total, started)
            routed = 0
            counts: dict[str, int] = {}
            while routed < total:
                counts = {}
                for name in WEIGHTS:
                    ok = await channel.declare_queue(name, passive=True)
                    counts[name] = ok.declaration_result.message_count or 0
                routed = sum(counts.values())
                if routed < total:
                    await asyncio.sleep(0.05)
            _progress(total, total, started)
            print(f"\nrouted {total} messages in {time.perf_counter() - started:.1f}s")
        return counts


def report(counts: dict[str, int]) -> tuple[str, bool]:
    total = sum(counts.values())
    wsum = sum(WEIGHTS.values())
    lines = [f"{'queue':<6} {'weight':>6} {'messages':>9} {'share':>8} {'expected':>9}"]
    chi2 = 0.0
    for name, weight in WEIGHTS.items():
        n = counts.get(name, 0)
        expected = total * weight / wsum
        chi2 += (n - expected) ** 2 / expected if expected else 0.0
        lines.append(f"{name:<6} {weight:>6} {n:>9} {n / total:>8.2%} {weight / wsum:>9.2%}")
    lines.append(f"chi-squared = {chi2:.2f} (3 degrees of freedom; 7.81 is the 5% critical value)")
    same = counts == RABBITMQ_3_10_8_COUNTS
    verdict = (
        "counts are IDENTICAL to RabbitMQ 3.10.8's recorded counts"
        if same
        else f"counts DIFFER from RabbitMQ 3.10.8's recorded counts {RABBITMQ_3_10_8_COUNTS}"
    )
    lines.append(verdict)
    return "\n".join(lines), same


def run_demo(total: int = 100_000) -> int:
    counts = asyncio.run(_demo(total))
    text, same = report(counts)
    print(text)
    print(f"hashing: {hash_implementation()} (see exchanges/hashing.py; HASHBROKER_PURE=1 forces python)")
    return 0 if same or total != 100_000 else 1
