"""The consumer ring and selection: Pulsar's Murmur3-32, the consistent-hash ring, the `first` policy."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from broker.entities.queues.consumer_ring import ConsumerInfo, HashRing, murmur3_32, pulsar_hash
from broker.entities.queues.consumers import ActiveConsumerSelector

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.active_consumers import measure

# MurmurHash3 x86_32, seed 0: published vectors (SMHasher / Guava Murmur3_32HashFunctionTest)
# and values from the `mmh3` package (mmh3.hash(data, 0, signed=False)).
VECTORS = [
    (b"", 0, 0),
    (b"", 1, 0x514E28B7),
    (b"", 0xFFFFFFFF, 0x81F16F39),
    (b"\x00\x00\x00\x00", 0, 0x2362F9DE),
    (b"hello", 0, 613153351),
    (b"Hello, world!", 1234, 0xFAF6CDB3),
    (b"The quick brown fox jumps over the lazy dog", 0, 0x2E4FF723),
    (b"a", 0, 1009084850),
    (b"abc", 0, 3017643002),
    (b"abcd", 0, 1139631978),
    ("héllo".encode(), 0, 3164577896),
]


@pytest.mark.parametrize(("data", "seed", "expected"), VECTORS)
def test_murmur3_32_vectors(data: bytes, seed: int, expected: int) -> None:
    assert murmur3_32(data, seed) == expected


def test_murmur3_32_against_mmh3_when_installed() -> None:
    mmh3 = pytest.importorskip("mmh3")
    rng = random.Random(7)
    for _ in range(3000):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        seed = rng.randrange(2**32)
        assert murmur3_32(data, seed) == mmh3.hash(data, seed, signed=False)


def test_pulsar_hash_clears_the_sign_bit_and_hashes_utf8() -> None:
    assert pulsar_hash("ab") == 2613040991 & 0x7FFFFFFF == 465557343
    assert pulsar_hash("héllo") == pulsar_hash("héllo".encode())
    assert all(0 <= pulsar_hash(f"k{i}") < 2**31 for i in range(1000))


def test_ring_is_ceiling_with_wrap() -> None:
    ring = HashRing(["c1", "c2", "c3"])
    points = sorted({pulsar_hash(f"{c}{j}") for c in ("c1", "c2", "c3") for j in range(100)})
    assert len(ring._points) == len(points) == 300
    for queue in [f"q{i}" for i in range(300)]:
        h = pulsar_hash(queue)
        above = [p for p in points if p >= h]
        point = above[0] if above else points[0]
        owners = [c for c in ("c1", "c2", "c3") if any(pulsar_hash(f"{c}{j}") == point for j in range(100))]
        assert ring.owner(queue) == owners[-1]


def test_ring_ignores_registration_order_and_uses_names() -> None:
    sel = ActiveConsumerSelector("consistent-hash")
    a = [ConsumerInfo("ctag1", "alpha"), ConsumerInfo("ctag2", "beta"), ConsumerInfo("ctag3", "gamma")]
    b = [ConsumerInfo("other-tag-3", "gamma"), ConsumerInfo("x", "alpha"), ConsumerInfo("y", "beta")]
    for q in (f"queue-{i}" for i in range(50)):
        ca, cb = sel.active(q, a), sel.active(q, b)
        assert ca is not None and cb is not None and ca.name == cb.name
    # without x-consumer-name the tag is the name
    assert ConsumerInfo("tag").key == "tag"
    assert sel.active("queue-1", ["alpha", "beta", "gamma"]) == sel.active("queue-1", a).name  # type: ignore[union-attr]


def test_highest_priority_group_only() -> None:
    sel = ActiveConsumerSelector("consistent-hash")
    consumers = [
        ConsumerInfo("low", priority=0),
        ConsumerInfo("hi1", priority=5),
        ConsumerInfo("hi2", priority=5),
    ]
    owners = {sel.active(f"q{i}", consumers).tag for i in range(100)}  # type: ignore[union-attr]
    assert owners == {"hi1", "hi2"}


def test_first_policy_is_registration_order() -> None:
    sel = ActiveConsumerSelector("first")
    consumers = ["c1", "c2", "c3"]
    assert sel.active("q", consumers) == "c1"
    consumers.remove("c1")  # the active one cancels: the next registered takes over
    assert sel.active("q", consumers) == "c2"
    assert sel.active("q", []) is None
    with pytest.raises(ValueError):
        ActiveConsumerSelector("random")  # type: ignore[arg-type]


def test_bench_balance_and_minimal_movement() -> None:
    result = measure(100, 10)
    first, ch = result["first"], result["consistent-hash"]
    assert first["active_consumers"] == 1 and first["max_queues"] == 100
    assert ch["active_consumers"] == 10
    assert ch["max_queues"] <= 2 * ch["mean_queues"]
    assert ch["moved_to_new_only"]
    assert 1 <= ch["moved_on_join"] <= 20  # about 100/11


def test_join_moves_only_to_newcomer_and_leave_moves_only_from_leaver() -> None:
    sel = ActiveConsumerSelector("consistent-hash")
    queues = [f"orders.{i}" for i in range(500)]
    names = [f"worker-{i}" for i in range(8)]
    base = sel.assign(queues, names)
    joined = sel.assign(queues, [*names, "worker-new"])
    assert all(joined[q] in (base[q], "worker-new") for q in queues)
    left = sel.assign(queues, [n for n in names if n != "worker-3"])
    assert all(left[q] == base[q] for q in queues if base[q] != "worker-3")


def test_broker_queue_names_the_ring_chosen_active_consumer() -> None:
    """Over real sockets: with consistent-hash selection `Queue.active_consumer` (what management
    reports as single_active_consumer_tag) is the ring owner, not the first registered consumer."""
    import pika

    from broker.embedded import BrokerThread

    names = ["alpha", "beta", "gamma", "delta"]
    qname = next(f"sac-{i}" for i in range(100) if HashRing(names).owner(f"sac-{i}") != names[0])
    with BrokerThread(port=0, active_consumer_selection="consistent-hash") as bt:
        conn = pika.BlockingConnection(pika.URLParameters(bt.url))
        ch = conn.channel()
        ch.queue_declare(qname, arguments={"x-single-active-consumer": True})
        tags = {n: ch.basic_consume(qname, lambda *_a: None, arguments={"x-consumer-name": n}) for n in names}

        def read() -> tuple[str | None, str | None]:
            q = bt.broker.vhosts["/"].queues[qname]
            active = q.active_consumer
            return (active.tag if active is not None else None), q.info().single_active_consumer_tag

        active_tag, reported = bt.call(read)
        conn.close()
    owner = HashRing(names).owner(qname)
    assert active_tag == reported == tags[owner]
    assert active_tag != tags[names[0]]
