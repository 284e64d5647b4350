"""The queue-type interface with the classic queue behind it, driven with a ManualClock: registry,
enqueue/deliver/get/ack/requeue/purge/delete, message TTL and x-expires without sleeping."""

from __future__ import annotations

import pytest

from amqpwire.errors import AmqpError, ReplyCode
from amqpwire.fields import Field, FieldTable
from broker.entities.clock import ManualClock
from broker.entities.queues.arguments import check_queue_arguments
from broker.entities.queues.base import _TYPES, INTERFACE, register
from broker.entities.queues.catalog import ClassicQueue, Queue, find_queue_type, queue_type_names
from exchanges.base import Binding, Destination
from tests.unit.entities_support import RecordingChannel, args, consumer, declare, message, vhost


def test_queue_builds_the_type_x_queue_type_names() -> None:
    v = vhost()
    assert type(declare(v, "plain")) is ClassicQueue
    assert type(declare(v, "named", x_queue_type="classic")) is ClassicQueue
    assert find_queue_type("classic") is ClassicQueue and "classic" in queue_type_names()
    with pytest.raises(AmqpError) as err:
        Queue(
            v,
            "qq",
            durable=True,
            exclusive_owner=None,
            auto_delete=False,
            arguments=args(x_queue_type="nosuch"),
        )
    assert err.value.reply_code == ReplyCode.NOT_IMPLEMENTED


def test_register_refuses_a_type_that_leaves_part_of_the_interface_out() -> None:
    class HalfQueue(ClassicQueue):
        type_name = "half"

    try:
        assert register(HalfQueue) is HalfQueue  # inherits every operation from the classic type
        assert find_queue_type("half") is HalfQueue
    finally:
        _TYPES.pop("half", None)

    class Bare(Queue):
        type_name = "bare"

        def enqueue(self, msg: object, seq: int = 0) -> None:  # type: ignore[override]
            pass

    with pytest.raises(TypeError) as err:
        register(Bare)
    assert "validate_arguments" in str(err.value) and "enqueue" not in str(err.value)
    assert find_queue_type("bare") is None
    assert len(INTERFACE) == len(set(INTERFACE))


def test_declare_checks_go_through_the_type() -> None:
    check_queue_arguments(args(x_max_length=5), "q", "/")
    with pytest.raises(AmqpError) as err:
        check_queue_arguments(args(x_delivery_limit=5), "q", "/")
    assert err.value.reply_text == (
        "PRECONDITION_FAILED - invalid arg 'x-delivery-limit' for queue 'q' in vhost '/' "
        "of queue type rabbit_classic_queue"
    )
    with pytest.raises(AmqpError) as err:  # a stream's declaration is checked by the stream type
        check_queue_arguments(args(x_queue_type="stream", x_max_age="1x"), "s", "/", durable=True)
    assert err.value.reply_text == (
        "PRECONDITION_FAILED - invalid arg 'x-max-age' for queue 's' in vhost '/': invalid_max_age"
    )


def test_get_ack_requeue_keeps_positions_and_counts() -> None:
    v = vhost()
    q = declare(v)
    for body in (b"a", b"b", b"c"):
        q.enqueue(message(body))
    first, second = q.get(no_ack=False), q.get(no_ack=False)
    assert first is not None and second is not None and q.count == 1
    q.unacked += 2  # the session layer counts a basic.get it must track
    q.requeue([second, first])
    q.settled(2)
    assert [e.msg.body for e in q.levels[0]] == [b"a", b"b", b"c"]
    assert all(e.redelivered for e in list(q.levels[0])[:2])
    taken = q.get(no_ack=True)
    assert taken is not None and taken.redelivered
    assert q.stats["get"] == 2 and q.stats["get_no_ack"] == 1 and q.stats["redeliver"] == 1
    assert q.purge() == 2 and q.count == 0 and q.bytes == 0


def test_priorities_deliver_the_highest_first() -> None:
    v = vhost()
    q = declare(v, x_max_priority=5)
    for body, prio in ((b"low", 0), (b"high", 5), (b"mid", 2), (b"over", 9)):
        q.enqueue(message(body, priority=prio))
    assert [q.get(True).msg.body for _ in range(4)] == [b"high", b"over", b"mid", b"low"]  # type: ignore[union-attr]


def test_basic_get_count_is_taken_after_dropping_the_expired_messages_it_exposed() -> None:
    """RabbitMQ 3.10.8 (rabbit_amqqueue_process:fetch drops expired messages after the fetch):
    a, b(1 ms), c, d(1 ms), e, f(1 ms); after 0.3 s three gets report 4 / 2 / 0."""
    clock = ManualClock()
    v = vhost(clock)
    q = declare(v)
    for body, exp in ((b"a", None), (b"b", "1"), (b"c", None), (b"d", "1"), (b"e", None), (b"f", "1")):
        q.enqueue(message(body, expiration=exp))
    clock.advance(0.3)
    seen = []
    for _ in range(3):
        entry = q.get(no_ack=True)
        assert entry is not None
        seen.append((entry.msg.body, q.count))
    assert seen == [(b"a", 4), (b"c", 2), (b"e", 0)]
    assert q.get(no_ack=True) is None


def test_zero_ttl_deliveries_are_counted_in_message_stats() -> None:
    v = vhost()
    q = declare(v, x_message_ttl=0)
    ch = RecordingChannel()
    q.add_consumer(consumer(ch, q, "c", prefetch=1))
    q.enqueue(message(b"1"))  # offered to the consumer with credit
    q.enqueue(message(b"2"))  # no credit: expires at once
    assert ch.delivered == [("c", b"1")]
    assert q.count == 0 and q.unacked == 1
    stats = q.stats
    assert stats["publish"] == 2 and stats["deliver"] == 1 and stats["deliver_get"] == 1


def test_message_ttl_dead_letters_on_the_clock_without_any_read() -> None:
    clock = ManualClock()
    v = vhost(clock)
    dlq = declare(v, "dlq")
    q = declare(v, "q", x_message_ttl=1000, x_dead_letter_exchange="amq.fanout")
    v.add_binding(v.exchanges["amq.fanout"], Binding(Destination.queue("dlq"), "", FieldTable()))
    q.enqueue(message(b"m"))
    clock.advance(0.9)
    assert dlq.count == 0 and q.count == 1
    clock.advance(0.2)  # the TTL timer fires: nothing read the queue
    assert q.count == 0 and dlq.count == 1
    dead = dlq.get(no_ack=True)
    assert dead is not None
    deaths = dead.msg.headers()
    assert deaths is not None and deaths.get("x-first-death-reason") == Field("longstr", b"expired")
    x_death = deaths.get("x-death")
    assert x_death is not None
    assert x_death.value[0].value.get("time") == Field("timestamp", int(clock.wall()))
    assert clock.pending == 0


def test_x_expires_deletes_an_unused_queue_and_consumers_hold_it() -> None:
    clock = ManualClock()
    v = vhost(clock)
    q = declare(v, "temp", x_expires=5000)
    ch = RecordingChannel()
    c = consumer(ch, q, "c")
    clock.advance(4)
    q.add_consumer(c)
    clock.advance(10)
    assert "temp" in v.queues
    q.remove_consumer(c)
    clock.advance(4.9)
    q.reset_expiry()  # a use (declare, get) restarts the countdown
    clock.advance(4.9)
    assert "temp" in v.queues
    clock.advance(0.2)
    assert "temp" not in v.queues and q.deleted
    assert clock.pending == 0


def test_delete_cancels_consumers_and_timers() -> None:
    clock = ManualClock()
    v = vhost(clock)
    q = declare(v, "d", x_message_ttl=60_000, x_expires=60_000)
    ch = RecordingChannel()
    q.add_consumer(consumer(ch, q, "c1", prefetch=1))
    q.add_consumer(consumer(ch, q, "c2", prefetch=1))
    for i in range(4):
        q.enqueue(message(str(i).encode()))
    gone: list[str] = []
    v.on_queue_deleted.append(lambda deleted: gone.append(deleted.name))
    assert v.delete_queue(q) == 2
    assert ch.cancelled == [] and gone == ["d"] and q.consumers == type(q.consumers)()
    clock.advance(0)  # the consumers' channels hear of it after the deleting method's reply
    assert ch.cancelled == ["c1", "c2"]
    assert q.count == 0 and clock.pending == 0
    assert v.delete_queue(q) == 0


def test_redeclare_must_be_equivalent() -> None:
    v = vhost()
    q = declare(v, "eq", x_max_length=5)
    q.check_equivalent(False, False, args(x_max_length=5))
    with pytest.raises(AmqpError) as err:
        q.check_equivalent(True, False, args(x_max_length=5))
    assert err.value.reply_text == (
        "PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'eq' in vhost '/': "
        "received 'true' but current is 'false'"
    )
    with pytest.raises(AmqpError) as err:
        q.check_equivalent(False, False, args(x_max_length=6))
    assert err.value.reply_code == ReplyCode.PRECONDITION_FAILED and "x-max-length" in err.value.reply_text


def test_consume_and_delete_checks_belong_to_the_type() -> None:
    v = vhost()
    q = declare(v, "busy")
    ch = RecordingChannel()
    q.check_consume(FieldTable(), exclusive=True, no_ack=False, prefetch=0)  # nobody there yet
    q.add_consumer(consumer(ch, q, "c"))
    with pytest.raises(AmqpError) as err:
        q.check_consume(FieldTable(), exclusive=True, no_ack=False, prefetch=0)
    assert err.value.reply_text == "ACCESS_REFUSED - queue 'busy' in vhost '/' in exclusive use"
    with pytest.raises(AmqpError) as err:
        q.check_consume(args(x_stream_offset="first"), exclusive=False, no_ack=False, prefetch=0)
    assert err.value.reply_code == ReplyCode.PRECONDITION_FAILED
    q.enqueue(message(b"m"))
    with pytest.raises(AmqpError) as err:
        q.check_delete(if_unused=True, if_empty=False)
    assert err.value.reply_text == "PRECONDITION_FAILED - queue 'busy' in vhost '/' in use"
    q.check_delete(if_unused=False, if_empty=True)  # the message went to the consumer
    (_c, _q, entry), *_ = ch.entries
    q.ack([entry])
    assert q.unacked == 0 and q.stats["ack"] == 1


def test_if_empty_counts_ready_messages() -> None:
    v = vhost()
    q = declare(v, "full")
    q.enqueue(message(b"m"))
    with pytest.raises(AmqpError) as err:
        q.check_delete(if_unused=True, if_empty=True)
    assert err.value.reply_text == "PRECONDITION_FAILED - queue 'full' in vhost '/' not empty"
