"""A vhost's creation and deletion as RabbitMQ's rabbit_vhost tells them (broker.entities.events)."""

from __future__ import annotations

from functools import partial

from broker.entities.events import (
    INTERNAL_USER,
    Events,
    Props,
    announce_exchange_deleted,
    boolean,
    exchange_created,
    longstr,
    strings,
    table,
)
from broker.entities.vhost import VHost

CREATION_ORDER = (
    "",
    "amq.direct",
    "amq.topic",
    "amq.match",
    "amq.headers",
    "amq.fanout",
    "amq.rabbitmq.trace",
)
"""The order rabbit_vhost:add declares a new vhost's own exchanges in."""


def announce_vhost_created(events: Events, vhost: VHost) -> None:
    """A new vhost's own exchanges, in the order rabbit_vhost declares them, then vhost.created."""
    for name in CREATION_ORDER:
        x = vhost.exchanges.get(name)
        if x is not None:
            events.emit("exchange.created", partial(exchange_created, vhost.name, x))
    tags = strings(vhost.tags)
    description = longstr(vhost.description)

    def props() -> Props:
        from exchanges.erlang.format import format_term

        described = format_term(vhost.description.encode("utf-8", "surrogateescape"))
        metadata = f"#{{description => {described},tags => [{','.join(vhost.tags)}]}}"
        return (
            ("tags", tags),
            ("description", description),
            ("user_who_performed_action", longstr(events.actor)),
            ("cluster_state", table([(vhost.node, longstr("running"))])),
            ("tracing", boolean(vhost.tracing)),
            ("metadata", longstr(metadata)),
            ("default_queue_type", longstr("undefined")),
            ("tags", tags),
            ("description", description),
            ("name", longstr(vhost.name)),
        )

    events.emit("vhost.created", props, acted=False)


def announce_vhost_deleted(events: Events, vhost: VHost) -> None:
    """The end of rabbit_vhost:delete (its permissions and queues went first): its exchanges'
    deletions, vhost.deleted, and the node's vhost.down."""
    for xname in list(vhost.exchanges):
        announce_exchange_deleted(events, vhost.name, xname)
    events.emit("vhost.deleted", lambda: (("name", longstr(vhost.name)),))
    events.emit(
        "vhost.down",
        lambda: (("node", longstr(vhost.node)), ("name", longstr(vhost.name))),
        actor=INTERNAL_USER,
    )
