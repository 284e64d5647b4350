"""Every change the management API makes to queues, exchanges, bindings and messages.

The views call only this module. Each write runs on the broker's event loop as the request's user,
through the code an AMQP channel of that user runs (`broker.management.local_channel`): the declarations'
plain functions for queues, exchanges and bindings, a socketless channel's basic.publish and
basic.get for messages. So the HTTP API makes RabbitMQ's checks in RabbitMQ's order with the AMQP
error texts, which `AmqpOpError` carries to the views. A definitions import acts as the internal
superuser, as rabbit_definitions does: it declares in any vhost, whatever the importer's permissions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from amqpwire.errors import AmqpError
from amqpwire.fields import FieldTable
from broker.management import local_channel as direct
from broker.management.local_channel import DirectSession
from broker.management.write_errors import ACK_MODES, AmqpOpError, DefinitionError, PropertyTypeError
from broker.protocol import commands as C
from broker.session import declarations as D
from broker.session.channel_base import REPLY_TO
from exchanges.base import Destination

if TYPE_CHECKING:
    from broker.management.http import Request
    from broker.server import Broker

__all__ = ["ACK_MODES", "AmqpOpError", "DefinitionError", "PropertyTypeError", "Writes"]

T = TypeVar("T")


class Writes:
    """Writes on `broker`, each as the request's user (permissions, user_id checks)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def _as_user(self, req: Request, vhost: str, op: Callable[[DirectSession], T]) -> T:
        """Run `op` as the request's user on `vhost`; a refusal becomes AmqpOpError."""
        try:
            return op(DirectSession(self.broker, vhost, req.user))
        except AmqpError as exc:
            raise AmqpOpError(exc.reply_code, exc.reply_text) from None

    async def declare_queue(
        self, req: Request, vhost: str, name: str, durable: bool, auto_delete: bool, arguments: dict[str, Any]
    ) -> None:
        self._as_user(req, vhost, lambda s: _declare_queue(s, name, durable, auto_delete, arguments))

    async def delete_queue(
        self, req: Request, vhost: str, name: str, if_unused: bool, if_empty: bool
    ) -> None:
        def op(s: DirectSession) -> None:
            method = C.QueueDelete(0, name, if_unused, if_empty, False)
            D.queue_delete(s.vhost_obj, s, _queue(s, "queue.delete", name), method)

        self._as_user(req, vhost, op)

    async def purge_queue(self, req: Request, vhost: str, name: str) -> None:
        self._as_user(
            req,
            vhost,
            lambda s: D.queue_purge(s.vhost_obj, s, _queue(s, "queue.purge", name)),
        )

    async def get_messages(
        self,
        req: Request,
        vhost: str,
        queue: str,
        count: int,
        ackmode: str,
        encoding: str,
        truncate: int | None,
    ) -> list[dict[str, Any]]:
        return self._as_user(
            req, vhost, lambda s: direct.get_messages(s, queue, count, ackmode, encoding, truncate)
        )

    async def declare_exchange(
        self,
        req: Request,
        vhost: str,
        name: str,
        type_: str,
        durable: bool,
        auto_delete: bool,
        internal: bool,
        arguments: dict[str, Any],
    ) -> None:
        self._as_user(
            req, vhost, lambda s: _declare_exchange(s, name, type_, durable, auto_delete, internal, arguments)
        )

    async def delete_exchange(self, req: Request, vhost: str, name: str, if_unused: bool) -> None:
        self._as_user(
            req,
            vhost,
            lambda s: D.exchange_delete(s.vhost_obj, s, C.ExchangeDelete(0, name, if_unused, False)),
        )

    async def publish(
        self,
        req: Request,
        vhost: str,
        exchange: str,
        routing_key: str,
        properties: dict[str, Any],
        body: bytes,
    ) -> bool:
        try:
            session = DirectSession(self.broker, vhost, req.user)
            return await direct.publish(session, exchange, routing_key, properties, body)
        except AmqpError as exc:
            raise AmqpOpError(exc.reply_code, exc.reply_text) from None

    async def bind(
        self,
        req: Request,
        vhost: str,
        source: str,
        destination: str,
        destination_type: str,
        key: str,
        args: dict[str, Any],
    ) -> None:
        self._as_user(req, vhost, lambda s: _bind(s, source, destination, destination_type, key, args))

    async def unbind(
        self,
        req: Request,
        vhost: str,
        source: str,
        destination: str,
        destination_type: str,
        key: str,
        args: dict[str, Any],
    ) -> None:
        self._as_user(
            req, vhost, lambda s: _bind(s, source, destination, destination_type, key, args, remove=True)
        )

    async def apply_definitions(
        self,
        req: Request,
        vhost: str,
        queues: list[dict[str, Any]],
        exchanges: list[dict[str, Any]],
        bindings: list[dict[str, Any]],
    ) -> None:
        """Queues, then exchanges, then bindings (rabbit_definitions' order), each in file order.

        File order matters for bindings: on x-consistent-hash the n-th binding made decides which
        buckets its queue gets. The first failure stops the import (DefinitionError names the item)
        and keeps what was declared before it, as RabbitMQ's import does.
        """
        current = ""
        try:
            s = DirectSession(self.broker, vhost, req.user, superuser=True)
            for q in queues:
                current = f"queue '{q['name']}'"
                _declare_queue(
                    s,
                    q["name"],
                    bool(q.get("durable", False)),
                    bool(q.get("auto_delete", False)),
                    q.get("arguments") or {},
                )
            for x in exchanges:
                current = f"exchange '{x['name']}'"
                _declare_exchange(
                    s,
                    x["name"],
                    x.get("type") or "direct",
                    bool(x.get("durable", False)),
                    bool(x.get("auto_delete", False)),
                    bool(x.get("internal", False)),
                    x.get("arguments") or {},
                )
            for b in bindings:
                kind = str(b.get("destination_type", "queue"))
                current = f"binding '{b['source']}' -> {kind} '{b['destination']}'"
                key, args = str(b.get("routing_key", "")), b.get("arguments") or {}
                _bind(s, b["source"], b["destination"], kind, key, args)
        except AmqpError as exc:
            raise DefinitionError(exc.reply_code, exc.reply_text, current) from None


def _queue(s: DirectSession, method: str, name: str) -> str:
    """The queue `method` really acts on, as the channel resolves a name it is given."""
    return D.sharded_queue(s.vhost_obj, method, D.strip_cr_lf(name))


def _declare_queue(
    s: DirectSession, name: str, durable: bool, auto_delete: bool, arguments: dict[str, Any]
) -> None:
    name = D.strip_cr_lf(name)
    if name.startswith(REPLY_TO):  # rabbit_channel's direct reply-to clause comes first
        D.check_reply_to_declare(s.vhost_obj, name, s.broker.reply_channel_exists)
        return
    method = C.QueueDeclare(
        0, name, False, durable, False, auto_delete, False, FieldTable.from_python(arguments)
    )
    D.queue_declare(s.vhost_obj, s, D.sharded_queue(s.vhost_obj, "queue.declare", name), method)


def _declare_exchange(
    s: DirectSession,
    name: str,
    type_: str,
    durable: bool,
    auto_delete: bool,
    internal: bool,
    arguments: dict[str, Any],
) -> None:
    args = FieldTable.from_python(arguments)
    D.exchange_declare(
        s.vhost_obj, s, C.ExchangeDeclare(0, name, type_, False, durable, auto_delete, internal, False, args)
    )


def _bind(
    s: DirectSession,
    source: str,
    destination: str,
    destination_type: str,
    key: str,
    args: dict[str, Any],
    *,
    remove: bool = False,
) -> None:
    """exchange.bind/unbind or queue.bind/unbind, the names resolved as the channel resolves them."""
    dest_name = D.strip_cr_lf(destination)
    if destination_type == "exchange":
        dest = Destination.exchange(dest_name)
    else:
        method = "queue.unbind" if remove else "queue.bind"
        dest = Destination.queue(D.sharded_queue(s.vhost_obj, method, dest_name))
    fn = D.unbind if remove else D.bind
    fn(s.vhost_obj, s, D.strip_cr_lf(source), dest, key, FieldTable.from_python(args))
