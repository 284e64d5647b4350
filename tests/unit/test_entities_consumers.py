"""broker.entities.queues.consumers: who gets the next message (rotation, priorities, single active
consumer, the consumer ring) and `Queue.active_consumer`, on real queues with a recording channel."""

from __future__ import annotations

from broker.entities.queues.consumer_ring import ConsumerInfo, HashRing
from broker.entities.queues.consumers import ActiveConsumerSelector, choose_active
from tests.unit.entities_support import RecordingChannel, consumer, declare, message, vhost


def publish(q, n: int, start: int = 0) -> None:  # type: ignore[no-untyped-def]
    for i in range(start, start + n):
        q.enqueue(message(str(i).encode()))


def test_round_robin_rotates_over_consumers_with_credit() -> None:
    v = vhost()
    q = declare(v)
    ch = RecordingChannel()
    for tag in ("a", "b", "c"):
        q.add_consumer(consumer(ch, q, tag, no_ack=True))
    publish(q, 6)
    assert [t for t, _ in ch.delivered] == ["a", "b", "c", "a", "b", "c"]
    assert q.active_consumer is None


def test_a_consumer_without_credit_is_skipped_and_served_again_after_acks() -> None:
    v = vhost()
    q = declare(v)
    ch = RecordingChannel()
    q.add_consumer(consumer(ch, q, "a", prefetch=1))
    q.add_consumer(consumer(ch, q, "b", prefetch=3))
    publish(q, 5)
    assert [t for t, _ in ch.delivered] == ["a", "b", "b", "b"]
    assert q.count == 1 and q.unacked == 4
    ch.ack_all()
    q.try_deliver()
    assert ch.delivered[-1] == ("a", b"4")
    assert q.count == 0


def test_priorities_the_highest_band_with_credit_takes_everything() -> None:
    v = vhost()
    q = declare(v)
    ch = RecordingChannel()
    q.add_consumer(consumer(ch, q, "low", prefetch=10))
    q.add_consumer(consumer(ch, q, "high1", prefetch=2, priority=10))
    q.add_consumer(consumer(ch, q, "high2", prefetch=1, priority=10))
    publish(q, 6)
    # RabbitMQ 3.10.8: the priority-10 band round-robins until out of credit, then priority 0
    assert [t for t, _ in ch.delivered] == ["high1", "high2", "high1", "low", "low", "low"]


def test_single_active_consumer_first_registered_then_the_next_on_cancel() -> None:
    v = vhost()
    q = declare(v, x_single_active_consumer=True)
    ch = RecordingChannel()
    a, b = consumer(ch, q, "a", no_ack=True), consumer(ch, q, "b", no_ack=True)
    q.add_consumer(a)
    q.add_consumer(b)
    assert q.active_consumer is a
    publish(q, 3)
    assert {t for t, _ in ch.delivered} == {"a"}
    q.remove_consumer(a)
    assert q.active_consumer is b
    publish(q, 2, 3)
    assert ch.delivered[-2:] == [("b", b"3"), ("b", b"4")]
    info = q.info()
    assert info.single_active_consumer_tag == "b"
    assert [c.active for c in info.consumers] == [True]


def _ring_case() -> tuple[str, list[str]]:
    """A queue name whose ring owner among these consumer names is not the first registered."""
    names = ["worker-a", "worker-b", "worker-c", "worker-d"]
    for i in range(100):
        qname = f"orders-{i}"
        if HashRing(names).owner(qname) != names[0]:
            return qname, names
    raise AssertionError("no queue name found")


def test_consistent_hash_selection_names_the_ring_owner_as_active_consumer() -> None:
    qname, names = _ring_case()
    v = vhost()
    v.active_consumer_selection = "consistent-hash"
    q = declare(v, qname, x_single_active_consumer=True)
    ch = RecordingChannel()
    made = [consumer(ch, q, f"ctag-{i}", no_ack=True, name=n) for i, n in enumerate(names)]
    for c in made:
        q.add_consumer(c)
    owner = HashRing(names).owner(qname)
    active = q.active_consumer
    assert active is not None and active is not made[0]
    assert active.ring_key == owner
    publish(q, 4)
    assert {t for t, _ in ch.delivered} == {active.tag}
    # the read model names the same consumer, and only it is active
    info = q.info()
    assert info.single_active_consumer_tag == active.tag
    assert [c.tag for c in info.consumers if c.active] == [active.tag]
    # the owner leaves: the ring of the remaining names decides
    q.remove_consumer(active)
    rest = [n for n in names if n != owner]
    assert q.active_consumer is not None and q.active_consumer.ring_key == HashRing(rest).owner(qname)


def test_the_selector_model_and_the_queue_use_one_rule() -> None:
    qname, names = _ring_case()
    selector = ActiveConsumerSelector("consistent-hash")
    assert selector.active(qname, names) == HashRing(names).owner(qname)
    assert names[choose_active("consistent-hash", qname, names) or 0] == selector.active(qname, names)
    assert ActiveConsumerSelector("first").active(qname, names) == names[0]
    infos = [ConsumerInfo("t1", "x", 0), ConsumerInfo("t2", "y", 5)]
    assert selector.active(qname, infos) == infos[1]  # only the highest priority group is on the ring
    assert selector.active(qname, []) is None
