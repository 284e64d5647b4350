"""The event hub (broker.entities.events) and the event exchange plugin, without sockets.

The hub counts every kind it is told and builds an event's headers only when a sink listens; the
vhost tells what happens to its exchanges, queues and bindings (what goes unasked as RabbitMQ's
internal user); the plugin publishes each event to `amq.rabbitmq.event` once something is bound
there, with RabbitMQ's message properties.
"""

from __future__ import annotations

import pytest

from amqpwire.fields import Field, FieldTable
from broker.entities.clock import ManualClock
from broker.entities.events import INTERNAL_USER, Event, Events
from broker.entities.queues.catalog import Queue
from broker.entities.vhost import VHost
from broker.plugins.event_exchange import EXCHANGE, EventExchange
from broker.protocol import properties as P
from exchanges.base import Binding, Destination
from tests.unit.entities_support import COMPAT, declare


class Sink:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def wants(self) -> bool:
        return True

    def notify(self, event: Event) -> None:
        self.events.append(event)

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]

    def actors(self) -> list[str]:
        return self.actors_of(self.events)

    @staticmethod
    def actors_of(events: list[Event]) -> list[str]:
        return [dict(e.props)["user_who_performed_action"].value.decode() for e in events]


def hub_vhost(clock: ManualClock | None = None) -> tuple[VHost, Events, Sink]:
    events = Events()
    v = VHost("/", COMPAT, clock or ManualClock())
    v.events = events
    sink = Sink()
    events.sinks.append(sink)
    return v, events, sink


def bind(v: VHost, source: str, queue: str, key: str) -> Binding:
    binding = Binding(Destination.queue(queue), key, FieldTable())
    v.add_binding(v.exchanges[source], binding)
    return binding


def test_counts_without_a_sink_and_builds_nothing() -> None:
    events = Events()
    built: list[int] = []
    events.emit("queue.created", lambda: built.append(1) or ())
    events.count("queue.declared")
    assert events.counts == {"queue.created": 1, "queue.declared": 1}
    assert built == []


def test_acting_is_restored_after_an_error() -> None:
    events = Events()
    sink = Sink()
    events.sinks.append(sink)
    with pytest.raises(RuntimeError), events.acting("alice"):
        events.emit("user.created", lambda: ())
        raise RuntimeError
    events.emit("user.deleted", lambda: ())
    events.emit("vhost.down", lambda: (), actor="bob")
    events.emit("connection.closed", lambda: (), acted=False)
    assert Sink.actors_of(sink.events[:3]) == ["alice", INTERNAL_USER, "bob"]
    assert sink.events[3].props == ()


def test_a_deleted_queue_takes_its_bindings_and_auto_delete_exchange() -> None:
    v, events, sink = hub_vhost()
    with events.acting("guest"):
        x = v.declare_exchange(
            "x", "topic", durable=False, auto_delete=True, internal=False, arguments=FieldTable()
        )
        q = declare(v, "q")
        bind(v, "x", "q", "a.#")
        bind(v, "amq.topic", "q", "b")
        v.delete_queue(q)
    assert sink.kinds() == [
        "exchange.created",
        "queue.created",
        "binding.created",
        "binding.created",
        "binding.deleted",  # amq.topic's: sources by name
        "exchange.deleted",  # x, auto-deleted: no delete-in-progress parameter
        "binding.deleted",
        "queue.deleted",
    ]
    assert sink.actors() == ["guest"] * 4 + [INTERNAL_USER] * 3 + ["guest"]
    assert "x" not in v.exchanges and x.binding_set == set()


def test_an_asked_exchange_deletion_sets_and_clears_its_parameter() -> None:
    v, _events, sink = hub_vhost()
    x = v.declare_exchange(
        "x", "direct", durable=False, auto_delete=False, internal=False, arguments=FieldTable()
    )
    v.delete_exchange(x)
    assert sink.kinds() == ["exchange.created", "parameter.set", "exchange.deleted", "parameter.cleared"]
    assert dict(sink.events[1].props)["component"] == Field("longstr", b"exchange-delete-in-progress")


def test_expired_queue_is_deleted_by_the_internal_user() -> None:
    clock = ManualClock()
    v, events, sink = hub_vhost(clock)
    with events.acting("guest"):
        declare(v, "q", x_expires=1000)
    clock.advance(2)
    assert sink.kinds() == ["queue.created", "queue.deleted"]
    assert sink.actors() == ["guest", INTERNAL_USER]
    assert events.counts["queue.deleted"] == 1


def plugin(clock: ManualClock) -> tuple[VHost, Events, EventExchange]:
    events = Events()
    v = VHost("/", COMPAT, clock)
    v.events = events
    return v, events, EventExchange(events, v)


def test_the_exchange_is_a_durable_internal_topic_exchange() -> None:
    v, events, _plugin = plugin(ManualClock())
    x = v.exchanges[EXCHANGE]
    assert (x.type_name, x.durable, x.auto_delete, x.internal) == ("topic", True, False, True)
    assert events.counts["exchange.created"] == 1


def test_events_reach_a_bound_queue_only_once_bound() -> None:
    clock = ManualClock(epoch=1_700_000_000.0)
    v, events, _plugin = plugin(clock)
    q: Queue = declare(v, "listener")  # queue.created: nothing bound yet, not published
    bind(v, EXCHANGE, "listener", "#")  # binding.created: published, to the queue just bound
    with events.acting("guest"):
        declare(v, "other")
    assert q.message_count == 2
    first, second = q.get(no_ack=True), q.get(no_ack=True)
    assert first is not None and second is not None
    assert [first.msg.routing_key, second.msg.routing_key] == ["binding.created", "queue.created"]
    msg = second.msg
    assert msg.exchange == EXCHANGE and msg.body == b""
    assert msg.prop("delivery_mode") == 2
    assert msg.prop("timestamp") == int(clock.wall())
    headers = msg.headers()
    assert headers is not None
    names = [k for k, _v in headers]
    assert names[0] == "user_who_performed_action" and names[-1] == "timestamp_in_ms"
    assert headers.get("timestamp_in_ms") == Field("long", int(clock.wall() * 1000))
    assert headers.get("name") == Field("longstr", b"other")
    assert headers.get("durable") == Field("bool", False)
    assert P.delivery_mode(msg.props) == 2


def test_without_a_binding_nothing_is_published() -> None:
    v, events, _plugin = plugin(ManualClock())
    q = declare(v, "q")
    with events.acting("guest"):
        declare(v, "other")
    assert q.message_count == 0
    assert v.exchanges[EXCHANGE].publish_in == 0


def test_a_failing_sink_costs_a_log_line_not_the_operation(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(Sink):
        def notify(self, event: Event) -> None:
            raise ValueError("boom")

    v, events, sink = hub_vhost()
    events.sinks.insert(0, Broken())
    declare(v, "q")
    assert "q" in v.queues
    assert sink.kinds() == ["queue.created"]
    assert "event queue.created not delivered" in caplog.text
