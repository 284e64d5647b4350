"""The broker's internal events: RabbitMQ's `rabbit_event:notify`, one source for every listener.

RabbitMQ announces what happens to its objects (queue.created, connection.closed, user.created,
policy.set, ...) on one event bus; the `rabbitmq_event_exchange` plugin republishes them to
`amq.rabbitmq.event` and the core's churn metrics (what `rabbitmq_prometheus` serves as
`rabbitmq_queues_created_total`, `rabbitmq_connections_closed_total`, ...) count the same moments.
Here too one hub, `Events`, is told at those points (by the vhost, the session, the user registry,
the policies and the management writes) and both consumers read it: the hub counts every kind it is
told (`counts`, the churn counters) and hands the event to its sinks (the event exchange, when that
plugin is on). A counted moment RabbitMQ publishes no event for (a queue.declare that found its
queue) is `count`ed only.

An event's properties are already in the form the event exchange writes them: `(name, Field)` in
the order of the message's headers (the plugin folds RabbitMQ's property list, reversing it, and
spells a resource as its name followed by `vhost`), without `timestamp_in_ms`, which the plugin
adds. Building them costs something, so a caller hands a function that builds them and the hub
calls it only when a sink listens.

Who performed an action (`user_who_performed_action`) is the hub's `actor` while the session or
management runs a client's command (`acting`), RabbitMQ's internal user otherwise (an x-expires
deletion, a vhost's own exchanges).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Protocol

from amqpwire.fields import Field, FieldTable

if TYPE_CHECKING:
    from broker.entities.exchange import Exchange
    from broker.entities.policy import Policy
    from broker.entities.queues.catalog import Queue
    from broker.entities.users import Permission
    from exchanges.base import Binding

log = logging.getLogger("hashbroker.events")

INTERNAL_USER = "rmq-internal"
"""RabbitMQ's ?INTERNAL_USER: the actor of what no client asked for."""

Props = tuple[tuple[str, Field], ...]
"""An event's headers in wire order (the event exchange appends `timestamp_in_ms`)."""


@dataclass(frozen=True, slots=True)
class Event:
    """One notification: `kind` is the routing key the event exchange uses ("queue.created")."""

    kind: str
    props: Props


class EventSink(Protocol):
    """What listens to the hub (the event exchange plugin)."""

    def wants(self) -> bool:
        """Whether it would do anything with an event now (nothing is built for it otherwise)."""
        ...

    def notify(self, event: Event) -> None: ...


class Events:
    """The hub: counts each kind it is told and passes the events on to its sinks."""

    __slots__ = ("actor", "counts", "sinks")

    def __init__(self) -> None:
        self.sinks: list[EventSink] = []
        self.counts: Counter[str] = Counter()
        self.actor = INTERNAL_USER

    @contextmanager
    def acting(self, user: str) -> Iterator[None]:
        """Events told inside this block were caused by `user`."""
        before = self.actor
        self.actor = user
        try:
            yield
        finally:
            self.actor = before

    def count(self, kind: str) -> None:
        """A counted moment with no event (RabbitMQ's core metrics only)."""
        self.counts[kind] += 1

    def emit(
        self,
        kind: str,
        build: Callable[[], Iterable[tuple[str, Field]]],
        *,
        acted: bool = True,
        actor: str | None = None,
    ) -> None:
        """Count `kind` and, when a sink listens, hand it the event whose headers `build` returns
        (`acted`: headed by `user_who_performed_action`, as most of RabbitMQ's events are: `actor`,
        else the hub's current one)."""
        self.counts[kind] += 1
        if not self.sinks:
            return
        sinks = [sink for sink in self.sinks if sink.wants()]
        if not sinks:
            return
        props = tuple(build())
        if acted:
            who = self.actor if actor is None else actor
            props = (("user_who_performed_action", longstr(who)), *props)
        event = Event(kind, props)
        for sink in sinks:
            try:
                sink.notify(event)
            except Exception:  # a listener's fault must not fail what the broker was doing
                log.exception("event %s not delivered to %r", kind, sink)


def auth_attempt_kind(protocol: str, succeeded: bool) -> str:
    """The hub's counter of one outcome of rabbit_core_metrics' auth attempts for `protocol`
    ("amqp091", "http", "stream"), as rabbitmq_prometheus' auth_attempts_* families read it."""
    return f"auth_attempt.{protocol}.{'succeeded' if succeeded else 'failed'}"


def count_auth_attempt(events: Events, protocol: str, succeeded: bool) -> None:
    """rabbit_core_metrics:auth_attempt_succeeded / auth_attempt_failed."""
    events.count(auth_attempt_kind(protocol, succeeded))


NO_EVENTS = Events()
"""The hub of an object no broker attached to one (a vhost built alone in a test)."""


# -- the header values, typed as the plugin's fmt/2 types Erlang terms ---------------------------


def longstr(value: str) -> Field:
    return Field("longstr", value.encode("utf-8", "surrogateescape"))


def long(value: int) -> Field:
    return Field("long", value)


def boolean(value: bool) -> Field:
    return Field("bool", value)


def array(values: Sequence[Field]) -> Field:
    return Field("array", list(values))


def strings(values: Iterable[str]) -> Field:
    """A list of binaries (a user's or vhost's tags)."""
    return array([longstr(v) for v in values])


def table(entries: Iterable[tuple[str, Field]]) -> Field:
    return Field("table", FieldTable(entries))


def charlist(text: str) -> Field:
    """An Erlang string (a list of character codes): the plugin writes it as an array of longs."""
    return array([long(ord(c)) for c in text])


def texts(*pairs: tuple[str, str]) -> Props:
    """Properties whose values are binaries."""
    return tuple((key, longstr(value)) for key, value in pairs)


def resource(key: str, name: str, vhost: str) -> Props:
    """A #resource{} property: its name under `key`, then `vhost`."""
    return texts((key, name), ("vhost", vhost))


def terms(entries: Iterable[tuple[str, Field]]) -> Field:
    """A field table's entries as RabbitMQ keeps them (`{Name, Type, Value}` tuples): not a
    property list, so the plugin writes an array of their `~p` prints (arguments, client
    properties)."""
    from broker.entities.queues.arguments import field_term
    from exchanges.erlang.atom import Atom
    from exchanges.erlang.format import erl_format

    return array(
        [
            longstr(
                erl_format(
                    "~1000000000p", [(name.encode("utf-8", "surrogateescape"), Atom(f.type), field_term(f))]
                )
            )
            for name, f in entries
        ]
    )


# -- the entities' events, with RabbitMQ's headers --------------------------------------------------

QUEUE_TYPE_MODULES = {
    "classic": "rabbit_classic_queue",
    "quorum": "rabbit_quorum_queue",
    "stream": "rabbit_stream_queue",
}
"""The queue type modules events name."""

DELETE_IN_PROGRESS = "exchange-delete-in-progress"
"""The runtime parameter 3.10.8 sets while it deletes an exchange (parameter.set before
exchange.deleted, parameter.cleared after)."""


def exchange_created(vhost: str, x: Exchange) -> Props:
    return (
        ("policy", longstr(x.policy_name or "")),
        ("arguments", terms(x.arguments)),
        ("internal", boolean(x.internal)),
        ("auto_delete", boolean(x.auto_delete)),
        ("durable", boolean(x.durable)),
        ("type", longstr(x.type_name)),
        *resource("name", x.name, vhost),
    )


def announce_exchange_deleted(events: Events, vhost: str, name: str) -> None:
    """exchange.deleted between the set and the clearing of its delete-in-progress parameter."""

    def parameter() -> Props:
        return texts(("name", name), ("component", DELETE_IN_PROGRESS), ("vhost", vhost))

    events.emit("parameter.set", lambda: (("value", boolean(True)), *parameter()))
    events.emit("exchange.deleted", lambda: resource("name", name, vhost))
    events.emit("parameter.cleared", parameter)


def binding_props(vhost: str, source: str, binding: Binding) -> Props:
    dest = binding.destination
    return (
        ("vhost", longstr(vhost)),
        ("arguments", terms(binding.arguments)),
        *texts(
            ("routing_key", binding.key),
            ("destination_kind", dest.kind),
            ("destination_name", dest.name),
            ("source_kind", "exchange"),
            ("source_name", source),
        ),
    )


def queue_created(q: Queue) -> Props:
    """A classic queue's process tells its owner; quorum and stream queues tell their type."""
    named = resource("name", q.name, q.vhost.name)
    kind = ("type", longstr(QUEUE_TYPE_MODULES.get(q.type_name, q.type_name)))
    arguments = ("arguments", terms(q.arguments))
    if q.type_name == "stream":
        return (kind, arguments, ("auto_delete", boolean(False)), ("durable", boolean(True)), *named)
    flags = (("auto_delete", boolean(q.auto_delete)), ("durable", boolean(q.durable)), *named)
    owner = q.exclusive_owner
    if q.type_name == "quorum":
        return (arguments, kind, ("exclusive", boolean(False)), *flags)
    return (
        ("exclusive", boolean(owner is not None)),
        ("owner_pid", longstr(getattr(owner, "pid", "") if owner is not None else "")),
        arguments,
        *flags,
    )


def json_field(value: object) -> Field:
    """A JSON value (a policy's definition) as the plugin types the Erlang term it decodes to."""
    if isinstance(value, bool):
        return boolean(value)
    if isinstance(value, int):
        return long(value)
    if isinstance(value, float):
        return Field("float", value)
    if isinstance(value, str):
        return longstr(value)
    if isinstance(value, dict):
        # an Erlang map's keys in order, folded into the headers last first, as the plugin does
        entries = sorted(((str(k), v) for k, v in value.items()), key=lambda kv: kv[0].encode(), reverse=True)
        return table((k, json_field(v)) for k, v in entries) if entries else array([])
    if isinstance(value, list):
        return array([json_field(v) for v in value])
    return longstr("null")


def announce_permission(events: Events, vhost: str, user: str, permission: Permission | None) -> None:
    """permission.created (`permission`: the one set) or permission.deleted (None)."""
    if permission is None:
        events.emit("permission.deleted", lambda: (("vhost", longstr(vhost)), ("user", longstr(user))))
        return
    events.emit(
        "permission.created",
        lambda: texts(
            ("read", permission.read),
            ("write", permission.write),
            ("configure", permission.configure),
            ("vhost", vhost),
            ("user", user),
        ),
    )


def announce_user(events: Events, kind: str, name: str, tags: Sequence[str] | None = None) -> None:
    """user.created, user.deleted, user.password.changed, or user.tags.set (with `tags`)."""
    if tags is None:
        events.emit(kind, lambda: (("name", longstr(name)),))
    else:
        events.emit(kind, lambda: (("tags", strings(tags)), ("name", longstr(name))))


def announce_policy_cleared(events: Events, vhost: str, name: str) -> None:
    events.emit("policy.cleared", lambda: (("vhost", longstr(vhost)), ("name", longstr(name))))


def _policy_terms(policy: Policy) -> Props:
    return (
        ("apply-to", longstr(policy.apply_to)),
        ("priority", long(policy.priority)),
        ("definition", json_field(policy.definition)),
        ("pattern", longstr(policy.pattern)),
    )


def announce_policy(events: Events, policy: Policy) -> None:
    events.emit(
        "policy.set",
        lambda: (
            *_policy_terms(policy),
            *texts(
                ("user_who_performed_action", events.actor), ("vhost", policy.vhost), ("name", policy.name)
            ),
        ),
        acted=False,
    )


def announce_queue_policies(
    events: Events, queues: Iterable[Queue], before: Mapping[str, Policy | None]
) -> None:
    """queue.policy.updated or queue.policy.cleared for each of `queues` (by name) whose
    effective policy is no longer what `before` had, as rabbit_policy tells it before the
    policy.set or policy.cleared that caused it."""
    for q in sorted(queues, key=lambda q: q.name):
        new = q.policy
        if new == before.get(q.name):
            continue
        about = texts(
            ("user_who_performed_action", events.actor),
            ("type", QUEUE_TYPE_MODULES.get(q.type_name, q.type_name)),
            ("vhost", q.vhost.name),
            ("name", q.name),
            ("vhost", q.vhost.name),
        )
        if new is None:
            events.emit("queue.policy.cleared", partial(tuple, about), acted=False)
        else:
            events.emit("queue.policy.updated", partial(_with_terms, new, about), acted=False)


def _with_terms(policy: Policy, about: Props) -> Props:
    return (*_policy_terms(policy), *about)
