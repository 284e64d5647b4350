"""The read model: `Queue.info()` and `Exchange.info()` say what management shows, without
reaching into a queue type's internals, and reading them changes nothing."""

from __future__ import annotations

from amqpwire.fields import FieldTable
from broker.entities.clock import ManualClock
from broker.entities.policy import Policy
from exchanges.base import Binding, Destination
from tests.unit.entities_support import RecordingChannel, args, consumer, declare, message, vhost


def test_queue_info_counts_consumers_and_policy() -> None:
    clock = ManualClock()
    v = vhost(clock)
    q = declare(v, "orders", x_message_ttl=100, x_single_active_consumer=True)
    q.apply_policy(Policy("p1", "^orders$", {"max-length": 10}))
    ch = RecordingChannel()
    q.add_consumer(consumer(ch, q, "c1", prefetch=1))
    q.add_consumer(consumer(ch, q, "c2", prefetch=1))
    for body in (b"one", b"three"):
        q.enqueue(message(body))
    clock.advance(1)  # the TTL timer drops the ready one; the delivered one stays unacked
    info = q.info()
    assert (info.name, info.type, info.vhost, info.durable, info.exclusive) == (
        "orders",
        "classic",
        "/",
        False,
        False,
    )
    assert info.policy == "p1"
    assert (info.messages_ready, info.messages_unacknowledged, info.message_bytes_ready) == (0, 1, 0)
    assert [(c.tag, c.active, c.prefetch_count, c.ack_required) for c in info.consumers] == [
        ("c1", True, 1, True),
        ("c2", False, 1, True),
    ]
    assert info.single_active_consumer_tag == "c1" and info.exclusive_consumer_tag is None
    assert info.stats["publish"] == 2 and info.stats["deliver"] == 1
    assert info.arguments == args(x_message_ttl=100, x_single_active_consumer=True)


def test_reading_info_never_expires_messages() -> None:
    clock = ManualClock()
    v = vhost(clock)
    q = declare(v, "lazy", x_message_ttl=10)
    q.enqueue(message(b"m"))
    q.ready.cancel_timer()  # type: ignore[attr-defined]  # no timer: only a read could expire it
    clock.advance(1)
    assert q.info().messages_ready == 1
    assert q.message_count == 0  # queue.declare-ok's count does expire it


def test_exchange_info_keeps_binding_order_and_names_the_policy() -> None:
    v = vhost()
    x = v.declare_exchange(
        "ring", "x-consistent-hash", durable=True, auto_delete=False, internal=False, arguments=FieldTable()
    )
    for name in ("q3", "q1", "q2"):
        declare(v, name)
        v.add_binding(x, Binding(Destination.queue(name), "1", FieldTable()))
    x.policy = Policy("ae", "^ring$", {"alternate-exchange": "amq.fanout"}, apply_to="exchanges")
    info = x.info("/")
    assert [b.destination.name for b in info.bindings] == ["q3", "q1", "q2"]
    assert (info.name, info.type, info.durable, info.policy) == ("ring", "x-consistent-hash", True, "ae")
    assert info.routing_state == x.impl.state_summary  # type: ignore[union-attr]
    assert v.exchanges["amq.direct"].info("/").policy is None
    assert v.exchanges[""].info("/").routing_state == {}
