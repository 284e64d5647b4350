"""PIP-392 consistent-hash selection for consumers of a sharded pseudo-queue.

Under `active_consumer_selection = "consistent-hash"` a consumer of the pseudo-queue X joins every
local shard; each shard's active consumer is the owner of the shard's name on the ring of the
pseudo-queue's consumer names (broker.entities.queues.consumer_ring.HashRing), re-chosen on every join/leave.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pika
import pytest

from broker.embedded import BrokerThread
from broker.entities.queues.consumer_ring import HashRing

X = "hb4.ring"
SHARDS = 24  # with these names every worker owns some of 24 shards (a ring gives no such promise)


def shard(i: int) -> str:
    return f"sharding: {X} - rabbit@localhost - {i}"


def _setup(bt: BrokerThread) -> pika.BlockingConnection:
    conn = pika.BlockingConnection(pika.URLParameters(bt.url))
    ch = conn.channel()
    ch.exchange_declare(X, "x-modulus-hash")
    bt.call(bt.broker.policies.set, "ring", "^hb4[.]ring$", {"shards-per-node": SHARDS}, 0, "exchanges")
    return conn


def owners(bt: BrokerThread) -> dict[str, str | None]:
    def read() -> dict[str, str | None]:
        queues = bt.broker.vhosts["/"].queues
        out: dict[str, str | None] = {}
        for i in range(SHARDS):
            active = queues[shard(i)].sac_active
            out[shard(i)] = active.args.get("x-consumer-name").value.decode() if active is not None else None
        return out

    return bt.call(read)


def test_each_consumer_owns_the_shards_its_ring_gives_it() -> None:
    with BrokerThread(port=0, active_consumer_selection="consistent-hash") as bt:
        conn = _setup(bt)
        chans = []
        names = [f"worker-{i}" for i in range(4)]
        for n in names:
            ch = conn.channel()
            ch.basic_consume(X, lambda *a: None, arguments={"x-consumer-name": n})
            chans.append(ch)
        before = owners(bt)
        ring = HashRing(names)
        assert before == {q: ring.owner(q) for q in before}
        assert set(before.values()) == set(names)  # every consumer owns some shards
        ch = conn.channel()
        ch.basic_consume(X, lambda *a: None, arguments={"x-consumer-name": "worker-4"})
        after = owners(bt)
        moved = {q for q in before if before[q] != after[q]}
        assert moved and all(after[q] == "worker-4" for q in moved)  # the newcomer takes only what it wins
        assert after == {q: HashRing([*names, "worker-4"]).owner(q) for q in after}
        chans[0].close()  # a consumer leaves: its shards go to the ring's next owners, no others move
        left = owners(bt)
        assert all(left[q] == after[q] for q in after if after[q] != "worker-0")
        assert "worker-0" not in left.values()
        conn.close()


@pytest.mark.slow
def test_no_loss_or_duplicate_while_consumers_come_and_go() -> None:
    total = 3000
    with BrokerThread(port=0, active_consumer_selection="consistent-hash") as bt:
        conn = _setup(bt)
        acked: Counter[bytes] = Counter()

        def publish() -> None:
            pub = pika.BlockingConnection(pika.URLParameters(bt.url))
            pch = pub.channel()
            pch.confirm_delivery()
            for n in range(total):
                pch.basic_publish(X, f"k{n}", str(n).encode())
                if n % 200 == 0:
                    time.sleep(0.02)
            pub.close()

        def on_message(ch: Any, method: Any, _props: Any, body: bytes) -> None:
            acked[body] += 1
            ch.basic_ack(method.delivery_tag)

        live: list[tuple[Any, str]] = []
        serial = 0

        def join() -> None:
            nonlocal serial
            ch = conn.channel()
            ch.basic_qos(prefetch_count=5)
            tag = ch.basic_consume(X, on_message, arguments={"x-consumer-name": f"w{serial}"})
            serial += 1
            live.append((ch, tag))

        for _ in range(3):
            join()
        publisher = threading.Thread(target=publish)
        publisher.start()
        step = 0
        while publisher.is_alive():
            conn.process_data_events(0.05)
            step += 1
            if step % 4 == 0:
                join()
            elif step % 4 == 2 and len(live) > 2:
                ch, tag = live.pop(0)
                if step % 8 == 2:
                    ch.basic_cancel(tag)  # leave by cancel (pika nacks undispatched deliveries)
                else:
                    ch.close()  # leave by channel close (unacked messages are requeued)
        publisher.join()
        deadline = time.time() + 20
        while sum(acked.values()) < total and time.time() < deadline:
            conn.process_data_events(0.1)
        conn.process_data_events(0.3)
        assert serial > 6
        assert set(acked) == {str(n).encode() for n in range(total)}
        assert [b for b, c in acked.items() if c > 1] == []
        conn.close()


def test_first_selection_keeps_least_consumers_attach() -> None:
    with BrokerThread(port=0) as bt:
        conn = _setup(bt)
        ch = conn.channel()
        for n in range(3):
            ch.basic_consume(X, lambda *a: None, arguments={"x-consumer-name": f"w{n}"})
        counts = bt.call(
            lambda: [len(bt.broker.vhosts["/"].queues[shard(i)].consumers) for i in range(SHARDS)]
        )
        assert sum(counts) == 3 and max(counts) == 1
        conn.close()
