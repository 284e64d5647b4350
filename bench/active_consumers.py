"""Active-consumer balance: RabbitMQ's `first` policy vs Pulsar's consistent-hash ring (PIP-392).

    .venv/bin/python bench/active_consumers.py [--queues 100] [--consumers 10]

100 queues, 10 consumers subscribed to every queue. With `first` one consumer is active on all
queues; with `consistent-hash` every consumer owns some, and when an 11th consumer joins only the
queues it takes over change owner (about 1/11 of them). Prints one table; `measure` is what
tests/test_active_consumers.py asserts on.
"""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from broker.active_consumers import ActiveConsumerSelector, Mode


def measure(queues: int = 100, consumers: int = 10) -> dict[str, Any]:
    queue_names = [f"queue-{i}" for i in range(queues)]
    names = [f"consumer-{i}" for i in range(consumers)]
    out: dict[str, Any] = {}
    modes: tuple[Mode, ...] = ("first", "consistent-hash")
    for mode in modes:
        selector = ActiveConsumerSelector(mode)
        before = selector.assign(queue_names, names)
        after = selector.assign(queue_names, [*names, f"consumer-{consumers}"])
        load = Counter(before.values())
        moved = [q for q in queue_names if before[q] != after[q]]
        out[mode] = {
            "active_consumers": len(load),
            "max_queues": max(load.values()),
            "min_queues": min(load.get(n, 0) for n in names),
            "mean_queues": queues / consumers,
            "moved_on_join": len(moved),
            "moved_to_new_only": all(after[q] == f"consumer-{consumers}" for q in moved),
            "load": {n: load.get(n, 0) for n in names},
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=100)
    parser.add_argument("--consumers", type=int, default=10)
    args = parser.parse_args()
    result = measure(args.queues, args.consumers)
    header = f"{'mode':<16}{'active':>8}{'max':>6}{'min':>6}{'mean':>7}{'max/mean':>10}{'moved on join':>15}"
    print(header)
    print("-" * len(header))
    for mode, r in result.items():
        print(
            f"{mode:<16}{r['active_consumers']:>8}{r['max_queues']:>6}{r['min_queues']:>6}"
            f"{r['mean_queues']:>7.1f}{r['max_queues'] / r['mean_queues']:>10.2f}"
            f"{r['moved_on_join']:>11}/{args.queues}"
        )
    for mode, r in result.items():
        print(f"{mode} load per consumer: {r['load']}")


if __name__ == "__main__":
    main()
