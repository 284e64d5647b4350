"""Microseconds per routed message for every exchange type at 4, 64 and 1,024 bindings/buckets.

Run: .venv/bin/python bench/routing.py [--messages 50000]
Hash exchanges are measured with distinct 12-13 byte keys (two MIX rounds of phash2 each), with
the reference's short keys "0".."N" (one round), and with 1,000 hot keys repeated (the per-exchange
key cache answers). "no table" computes the jump hash per message, as happens before a ring size
has routed `jump_table.BUILD_AFTER_ROUTES` messages (20,000 interpreted, 2,000,000 with the compiled
hash module); the other rows use the precomputed 2^21-entry table. The header says which hash
implementation ran (`HASHBROKER_PURE=1` forces the interpreted one).
No assertions: figures for the README.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import random
import time

import exchanges
from exchanges import Binding, Destination, FieldTable, SimpleMessage
from exchanges.base import ExchangeType
from exchanges.hashing.jump_table import TABLES

SIZES = (4, 64, 1024)


def build(
    exchange_type: str, bindings: list[tuple[str, str, dict | None]], arguments: dict | None = None
) -> ExchangeType:
    ex = exchanges.create_exchange(exchange_type, arguments)
    for queue, key, args in bindings:
        ex.add_binding(Binding(Destination.queue(queue), key, FieldTable.from_python(args)))
    return ex


def per_message_us(ex: ExchangeType, messages: list[SimpleMessage]) -> float:
    route = ex.route
    start = time.perf_counter()
    for message in messages:
        route(message)
    return (time.perf_counter() - start) / len(messages) * 1e6


def topic_pattern(rng: random.Random) -> str:
    words = []
    for _ in range(rng.randint(3, 5)):
        r = rng.random()
        words.append("*" if r < 0.15 else "#" if r < 0.2 else f"w{rng.randint(0, 30)}")
    return ".".join(words)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    args = parser.parse_args()
    rng = random.Random(1)
    keys = [str(rng.randint(0, 10**12)) for _ in range(args.messages)]
    plain = [SimpleMessage([k]) for k in keys]  # distinct 12-13 byte keys: two MIX rounds each
    short = [SimpleMessage([str(i)]) for i in range(args.messages)]  # the reference's "0".."N"
    repeated = [SimpleMessage([keys[i % 1000]]) for i in range(args.messages)]  # 1,000 hot keys
    topic_keys = [
        SimpleMessage([".".join(f"w{rng.randint(0, 30)}" for _ in range(rng.randint(3, 5)))])
        for _ in range(args.messages)
    ]
    header_msgs = [
        SimpleMessage([""], FieldTable.from_python({"a": f"v{rng.randint(0, 50)}", "b": 1}))
        for _ in range(args.messages)
    ]
    rows: list[tuple[str, int, str, float]] = []

    def add(name: str, n: int, mode: str, ex: ExchangeType, msgs: list[SimpleMessage]) -> None:
        rows.append((name, n, mode, per_message_us(ex, msgs)))

    for n in SIZES:
        weights = [(f"q{i}", "1", None) for i in range(n)]
        topic_bindings = [(f"q{i}", topic_pattern(rng), None) for i in range(n)]
        direct_bindings = [(f"q{i}", keys[i], None) for i in range(n)]
        header_bindings = [
            (f"q{i}", "", {"x-match": rng.choice(["all", "any"]), "a": f"v{i % 50}", "b": i % 3})
            for i in range(n)
        ]
        saved = TABLES.enabled
        TABLES.enabled = False
        add("x-consistent-hash", n, "no table, 13 B", build("x-consistent-hash", weights), plain)
        TABLES.enabled = saved
        TABLES.get(n)
        for mode, msgs in (("13 B keys", plain), ("short keys", short), ("hot keys", repeated)):
            add("x-consistent-hash", n, mode, build("x-consistent-hash", weights), msgs)
            add("x-modulus-hash", n, mode, build("x-modulus-hash", weights), msgs)
        add("direct", n, "", build("direct", direct_bindings), plain)
        add("fanout", n, "", build("fanout", weights), plain[: max(1000, args.messages // n)])
        add("topic", n, "", build("topic", topic_bindings), topic_keys)
        add("headers", n, "", build("headers", header_bindings), header_msgs)
    big_topic = [(f"q{i}", topic_pattern(rng), None) for i in range(10_000)]
    add("topic", 10_000, "", build("topic", big_topic), topic_keys)

    print(
        f"# bench/routing.py  {datetime.date.today()}  {platform.python_implementation()} "
        f"{platform.python_version()}  {platform.machine()}  {args.messages} messages, distinct keys  "
        f"hashing: {exchanges.hash_implementation()}"
    )
    print(f"{'type':<20}{'bindings':>9}  {'mode':<15}{'us/msg':>9}")
    for name, n, mode, us in rows:
        print(f"{name:<20}{n:>9}  {mode:<15}{us:>9.2f}")


if __name__ == "__main__":
    main()
