"""Active-consumer balance: RabbitMQ's `first` policy vs Pulsar's consistent-hash ring (PIP-392).

    .venv/bin/python bench/active_consumers.py [--queues 100] [--consumers 10] [--live]

100 queues, 10 consumers subscribed to every queue. With `first` one consumer is active on all
queues; with `consistent-hash` every consumer owns some, and when an 11th consumer joins only the
queues it takes over change owner (about 1/11 of them). Prints one table; `measure` is what
tests/unit/test_active_consumers.py asserts on.

`--live` measures the same table on a live hashbroker (`BrokerThread`, one per mode): the queues are
declared with x-single-active-consumer, the consumers (x-consumer-name) subscribe to all of them, the
active consumer of each queue is read from the broker, then an 11th consumer subscribes.
"""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

import pika

from broker.entities.queues.consumer_ring import Mode
from broker.entities.queues.consumers import ActiveConsumerSelector


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


def _summary(queue_names: list[str], names: list[str], before: dict[str, str], after: dict[str, str]) -> dict:
    load = Counter(before.values())
    moved = [q for q in queue_names if before[q] != after[q]]
    newcomer = f"consumer-{len(names)}"
    return {
        "active_consumers": len(load),
        "max_queues": max(load.values()),
        "min_queues": min(load.get(n, 0) for n in names),
        "mean_queues": len(queue_names) / len(names),
        "moved_on_join": len(moved),
        "moved_to_new_only": all(after[q] == newcomer for q in moved),
        "load": {n: load.get(n, 0) for n in names},
    }


def measure_live(queues: int = 100, consumers: int = 10) -> dict[str, Any]:
    """The same figures, read from a running hashbroker's single-active-consumer queues."""
    from broker.embedded import BrokerThread

    queue_names = [f"queue-{i}" for i in range(queues)]
    names = [f"consumer-{i}" for i in range(consumers)]
    out: dict[str, Any] = {}
    modes: tuple[Mode, ...] = ("first", "consistent-hash")
    for mode in modes:
        with BrokerThread(port=0, active_consumer_selection=mode) as bt:
            conn = pika.BlockingConnection(pika.URLParameters(bt.url))
            ch = conn.channel()
            for q in queue_names:
                ch.queue_declare(q, arguments={"x-single-active-consumer": True})

            def subscribe(name: str, ch: Any = ch) -> None:
                for q in queue_names:
                    ch.basic_consume(
                        q, lambda *a: None, consumer_tag=f"{name}/{q}", arguments={"x-consumer-name": name}
                    )

            def owners() -> dict[str, str]:
                queues_ = bt.broker.vhosts["/"].queues
                return {q: getattr(queues_[q].sac_active, "tag", "").split("/")[0] for q in queue_names}

            for n in names:
                subscribe(n)
            before = bt.call(owners)
            subscribe(f"consumer-{consumers}")
            after = bt.call(owners)
            conn.close()
        out[mode] = _summary(queue_names, names, before, after)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=100)
    parser.add_argument("--consumers", type=int, default=10)
    parser.add_argument("--live", action="store_true", help="measure on a live hashbroker, not the model")
    args = parser.parse_args()
    result = (measure_live if args.live else measure)(args.queues, args.consumers)
    print(f"{'live hashbroker (BrokerThread)' if args.live else 'model (broker.entities.queues.consumers)'}:")
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
