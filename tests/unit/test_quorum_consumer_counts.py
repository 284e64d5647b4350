"""Quorum queues' declare-ok consumer_count (rabbit_fifo's consumer map) and the cancel
notifications a deleted queue sends after the current method's reply, on a ManualClock."""

from __future__ import annotations

from broker.entities.clock import ManualClock
from tests.unit.entities_support import RecordingChannel, consumer, declare, message, quorum, vhost


def test_each_unsettled_get_counts_until_settled() -> None:
    q = quorum(vhost())
    for i in range(3):
        q.enqueue(message(f"m.{i}".encode()))
    for n in (1, 2):
        assert q.get(False) is not None
        q.unacked += 1  # what the channel does for a basic.get awaiting its ack
        assert q.consumer_count == n
    assert q.get(True) is not None and q.consumer_count == 2
    q.settled()
    assert q.consumer_count == 1
    q.settled()
    assert q.consumer_count == 0


def test_cancelled_consumer_counts_while_it_holds_deliveries() -> None:
    q = quorum(vhost())
    ch = RecordingChannel()
    c = consumer(ch, q, "c1", prefetch=2)
    q.add_consumer(c)
    for i in range(3):
        q.enqueue(message(f"m.{i}".encode()))
    assert c.unacked == 2 and q.consumer_count == 1
    q.remove_consumer(c)
    assert q.consumer_count == 1
    ch.ack_all()
    assert q.consumer_count == 0


def test_single_active_consumer_counts_the_active_one_only() -> None:
    q = quorum(vhost(), x_single_active_consumer=True)
    ch = RecordingChannel()
    cs = [consumer(ch, q, f"c{i}") for i in range(3)]
    for c in cs:
        q.add_consumer(c)
    assert q.consumer_count == 1
    q.remove_consumer(cs[0])
    assert q.consumer_count == 1
    q.remove_consumer(cs[1])
    q.remove_consumer(cs[2])
    assert q.consumer_count == 0


def test_settled_get_drops_the_expired_heads_it_exposed() -> None:
    clock = ManualClock()
    for no_ack, expected in ((True, 1), (False, 3)):
        q = quorum(vhost(clock))
        q.enqueue(message(b"m.0"))
        q.enqueue(message(b"m.1", expiration="50"))
        q.enqueue(message(b"m.2", expiration="50"))
        q.enqueue(message(b"m.3"))
        clock.advance(0.4)
        e = q.get(no_ack)
        assert e is not None and e.msg.body == b"m.0" and q.count == expected


def test_an_expired_message_returned_waits_for_the_head() -> None:
    clock = ManualClock()
    q = quorum(vhost(clock))
    q.enqueue(message(b"m.0", expiration="200"))
    q.enqueue(message(b"m.1"))
    e = q.get(False)
    assert e is not None
    clock.advance(0.4)
    q.requeue([e])
    assert q.count == 2  # behind m.1: not at the head yet
    assert (g := q.get(True)) is not None and g.msg.body == b"m.1" and q.count == 0


def test_deleted_queue_tells_its_consumers_after_the_current_method() -> None:
    for make in (lambda v: declare(v, "d"), quorum):
        clock = ManualClock()
        v = vhost(clock)
        q = make(v)
        ch = RecordingChannel()
        q.add_consumer(consumer(ch, q, "c1"))
        q.add_consumer(consumer(ch, q, "c2"))
        v.delete_queue(q)
        assert ch.cancelled == [] and not q.consumers
        clock.advance(0)
        assert ch.cancelled == ["c1", "c2"]
