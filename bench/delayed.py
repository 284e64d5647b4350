"""x-delayed-message lateness: how late and in which order delayed messages arrive.

    .venv/bin/python bench/delayed.py [--messages 1000] [--max-delay 2000] [--seed 4] [--url URL]

Publishes N messages with random `x-delay` in [0, max-delay] ms through an x-delayed-message
exchange (x-delayed-type direct) of a live hashbroker (`BrokerThread`, or `--url` for another
broker with the plugin) and consumes them on a second connection in its own thread. Lateness is
arrival time minus (publish time + x-delay), in ms, the publish time being the middle of the confirmed
publish (publisher confirms, one at a time); an order violation is a message arriving after one that
was due later than it (strict, and beyond the measurement slack: the longest publish-confirm round
trip + 1 ms for the broker's millisecond clock). Prints a
table; asserts nothing (tests/integration/test_delayed_live.py asserts).
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
from typing import Any

import pika

from broker.embedded import BrokerThread

EXCHANGE = "bench.delayed"
QUEUE = "bench.delayed.q"


def run(url: str, n: int, max_delay: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    delays = [rng.randint(0, max_delay) for _ in range(n)]
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.exchange_delete(EXCHANGE)
    ch.queue_delete(QUEUE)
    ch.exchange_declare(EXCHANGE, "x-delayed-message", arguments={"x-delayed-type": "direct"})
    ch.queue_declare(QUEUE)
    ch.queue_bind(QUEUE, EXCHANGE, "k")
    due: dict[int, float] = {}
    arrived: list[tuple[int, float]] = []  # (message, arrival time) in arrival order
    ready = threading.Event()
    stop = threading.Event()

    def consume() -> None:
        c2 = pika.BlockingConnection(pika.URLParameters(url))
        ch2 = c2.channel()
        ch2.basic_consume(QUEUE, lambda c, m, p, b: arrived.append((int(b), time.monotonic())), auto_ack=True)
        ready.set()
        while not stop.is_set() and len(arrived) < n:
            c2.process_data_events(0.05)
        c2.close()

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    ready.wait(10)
    ch.confirm_delivery()  # each publish waits for its confirm: the broker got it in [before, after]
    started = time.monotonic()
    window = 0.0
    for i, d in enumerate(delays):
        before = time.monotonic()
        ch.basic_publish(EXCHANGE, "k", str(i).encode(), pika.BasicProperties(headers={"x-delay": d}))
        after = time.monotonic()
        due[i] = (before + after) / 2 + d / 1000
        window = max(window, after - before)
    publish_s = time.monotonic() - started
    reader.join(max_delay / 1000 + 30)
    stop.set()
    ch.queue_delete(QUEUE)
    ch.exchange_delete(EXCHANGE)
    conn.close()
    late = sorted((t - due[i]) * 1000 for i, t in arrived)
    strict = loose = 0
    slack = window * 1000 + 1  # due times are known to +-window/2; the broker's clock ticks in ms
    latest_due = float("-inf")
    for i, _t in arrived:
        if due[i] < latest_due:
            strict += 1
            if (latest_due - due[i]) * 1000 > slack:
                loose += 1
        latest_due = max(latest_due, due[i])
    return {
        "published": n,
        "received": len(arrived),
        "publish_s": publish_s,
        "late": late,
        "violations": strict,
        "violations_beyond": loose,
        "slack_ms": slack,
    }


def pct(values: list[float], p: float) -> float:
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--max-delay", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--url", help="an AMQP URL with the delayed-message plugin (default: a BrokerThread)")
    args = parser.parse_args()
    if args.url:
        r = run(args.url, args.messages, args.max_delay, args.seed)
        target = args.url
    else:
        with BrokerThread(port=0) as bt:
            r = run(bt.url, args.messages, args.max_delay, args.seed)
        target = "hashbroker (BrokerThread)"
    late = r["late"]
    print(f"x-delayed-message: {r['published']} messages, delays 0-{args.max_delay} ms, {target}")
    print(f"published in {r['publish_s'] * 1000:.0f} ms; received {r['received']}/{r['published']}")
    header = f"{'lateness ms':<14}{'min':>8}{'p50':>8}{'p90':>8}{'p99':>8}{'max':>8}{'mean':>8}"
    print(header)
    print("-" * len(header))
    if late:
        cols = [late[0], pct(late, 50), pct(late, 90), pct(late, 99), late[-1], statistics.fmean(late)]
        print(f"{'':<14}" + "".join(f"{v:>8.1f}" for v in cols))
    print(
        f"order violations: {r['violations']} "
        f"(beyond the {r['slack_ms']:.1f} ms measurement slack: {r['violations_beyond']})"
    )


if __name__ == "__main__":
    main()
