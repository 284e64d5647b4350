"""A management write's session on the broker's loop: the acting principal and a channel with no socket.

RabbitMQ's management acts through rabbit_channel as the HTTP user, so every check and error text is
the AMQP channel's own. Here the declarations call `broker.session.declarations` with a
`DirectSession` as the principal, and publish and "get messages" drive a real `Channel` (the same
basic.publish, basic.get, basic.nack and basic.reject handlers an AMQP client reaches) whose owner
is the `DirectSession`: it implements the session's `ChannelOwner` port in memory, keeping the
channel's typed output (get-ok, return, confirm) instead of framing it. Nothing here opens a
connection, so the broker's connection list and counts never show a management write.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from amqpwire.errors import not_allowed
from amqpwire.fields import FieldTable
from broker.management.values import json_value
from broker.management.write_errors import PropertyTypeError
from broker.protocol import commands as C
from broker.protocol import properties as P
from broker.session.channel import Channel
from broker.session.ports import ChannelServer

if TYPE_CHECKING:
    from amqpwire.errors import AmqpError
    from broker.entities.message import StoredMessage
    from broker.entities.queues.catalog import Consumer, Queue
    from broker.entities.vhost import VHost
    from broker.session.ports import ChannelHandle

_SESSIONS = itertools.count(1)


class LocalServer(ChannelServer, Protocol):
    """The broker as an in-process session sees it: what a channel reads, and the vhosts."""

    @property
    def vhosts(self) -> Mapping[str, VHost]: ...


class GetOk(NamedTuple):
    """One basic.get-ok the channel sent."""

    delivery_tag: int
    redelivered: bool
    message_count: int
    msg: StoredMessage


class DirectSession:
    """Who acts (the HTTP user, or the internal superuser for definitions imports) on one vhost.

    It is the `Principal` the declarations check permissions and exclusive ownership against, and
    the `ChannelOwner` of the channel it opens: it keeps the channel's output instead of a socket.
    """

    def __init__(self, broker: LocalServer, vhost: str, user: str, *, superuser: bool = False) -> None:
        found = broker.vhosts.get(vhost)
        if found is None:  # what connection.open answers for a vhost that is not there
            raise not_allowed(f"vhost {vhost} not found")
        self.broker = broker
        self.vhost_obj: VHost = found
        self.vhost_name = vhost
        self.user = user
        # what the firehose names the connection: RabbitMQ's direct connection is a process, whose
        # pid is printed as <node.N.M.K> there
        self.name = f"<{found.node}.0.{next(_SESSIONS)}.0>"
        self.superuser = superuser
        self.exclusive_queues: list[Queue] = []
        self.paused = False
        self.cancel_notify = False
        self.gets: list[GetOk] = []
        self.returned: list[StoredMessage] = []
        self.confirmed: asyncio.Future[bool] | None = None

    def check_access(self, kind: str, resource: str, name: str) -> None:
        """The AMQP permission check of the acting user; the internal superuser may do anything
        (rabbit_definitions imports as ?INTERNAL_USER, whatever the importer's permissions)."""
        if not self.superuser:
            self.broker.auth.check(self.user, self.vhost_name, kind, resource, name)

    # -- the channel's output (broker.session.ports.Outbox), kept ------------------------------------

    def send_method(self, channel: int, payload: bytes) -> None:
        """Replies without a message (declare-ok, confirm.select-ok...): nothing waits for them."""

    def send_deliver(
        self,
        channel: int,
        consumer_tag: bytes,
        delivery_tag: int,
        redelivered: bool,
        msg: StoredMessage,
        backlog: int = 0,
    ) -> None:
        """Never called: the session opens no consumer."""

    def send_get_ok(
        self, channel: int, delivery_tag: int, redelivered: bool, message_count: int, msg: StoredMessage
    ) -> None:
        self.gets.append(GetOk(delivery_tag, redelivered, message_count, msg))

    def send_return(self, channel: int, reply_code: int, reply_text: str, msg: StoredMessage) -> None:
        self.returned.append(msg)

    def send_confirm(self, channel: int, ack: bool, seq: int, multiple: bool) -> None:
        done = self.confirmed
        if done is not None and not done.done():
            done.set_result(ack)

    def want_flush_confirms(self, channel: ChannelHandle) -> None:
        channel.flush_confirms()

    # -- the channel's closing (broker.session.ports.ChannelOwner) ------------------------------------

    def channel_closed(self, channel: ChannelHandle) -> None:
        channel.teardown()

    def announce_consumer(self, kind: str, number: int, consumer: Consumer) -> None:
        """Management consumes nothing: no consumer events."""

    def close_channel(
        self, channel: ChannelHandle, err: AmqpError, culprit: tuple[int, int] = (0, 0)
    ) -> None:
        """A soft error after the method returned (a failed store sync): the channel is gone."""
        channel.closing = True
        channel.teardown()

    def open_channel(self) -> Channel:
        return Channel(self, 1)


PROPERTY_NAMES = tuple(name for _bit, name, _kind in P.PROPERTIES)


def encode_properties(properties: dict[str, Any]) -> bytes:
    """The JSON `properties` of a publish as content-header property bytes.

    As rabbit_mgmt_format:to_basic_properties: unknown names are ignored, integer properties must
    be JSON integers (["not_int", name]) and string ones JSON strings (["not_string", name]). An
    integer wider than its field keeps its low bits, as the AMQP encoding of RabbitMQ does when the
    message reaches a consumer (its own "get messages" still shows the unencoded value).
    """
    values: dict[str, Any] = {}
    for _bit, name, kind in P.PROPERTIES:
        if name not in properties:
            continue
        value = properties[name]
        if kind == "t":
            values[name] = FieldTable.from_python(value if isinstance(value, dict) else {})
        elif kind in ("o", "L"):
            if not isinstance(value, int) or isinstance(value, bool):
                raise PropertyTypeError("not_int", name)
            values[name] = value & (0xFF if kind == "o" else 0xFFFFFFFFFFFFFFFF)
        elif isinstance(value, str):
            values[name] = value
        else:
            raise PropertyTypeError("not_string", name)
    return P.encode(values)


async def publish(
    session: DirectSession, exchange: str, routing_key: str, properties: dict[str, Any], body: bytes
) -> bool:
    """basic.publish with mandatory and confirms, as rabbit_mgmt_wm_exchange_publish does; whether a
    queue took it (a message a queue refused for overflow was still routed)."""
    ch = session.open_channel()
    try:
        ch.on_confirm_select(C.ConfirmSelect(True))
        session.confirmed = asyncio.get_running_loop().create_future()
        ch.on_basic_publish((exchange, routing_key, True, False, encode_properties(properties), body))
        await session.confirmed  # persistent messages on durable queues: after the store's commit
        return not session.returned
    finally:
        ch.teardown()


def get_messages(
    session: DirectSession, queue: str, count: int, ackmode: str, encoding: str, truncate: int | None
) -> list[dict[str, Any]]:
    """RabbitMQ's "Get messages": take up to `count` with basic.get, then settle all per `ackmode`.

    Like rabbit_mgmt_wm_queue_get, messages are taken one after another and only settled at the
    end, so the requeue modes return distinct messages (marked redelivered next time).
    """
    no_ack = ackmode == "ack_requeue_false"
    ch = session.open_channel()
    try:
        taken = session.gets
        for _ in range(max(count, 0)):
            before = len(taken)
            ch.on_basic_get(C.BasicGet(0, queue, no_ack))
            if len(taken) == before:  # basic.get-empty
                break
        if taken and not no_ack:
            if ackmode == "reject_requeue_false":
                for got in taken:
                    ch.on_basic_reject(C.BasicReject(got.delivery_tag, False))
            else:  # ack_requeue_true / reject_requeue_true: back to the queue
                ch.on_basic_nack(C.BasicNack(taken[-1].delivery_tag, True, True))
    finally:
        ch.teardown()
    return [render_message(got.msg, got.redelivered, got.message_count, encoding, truncate) for got in taken]


def render_message(
    msg: StoredMessage, redelivered: bool, message_count: int, encoding: str, truncate: int | None
) -> dict[str, Any]:
    body = msg.body
    payload = body if truncate is None else body[: max(truncate, 0)]
    text: str | None = None
    if encoding == "auto":
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError:
            text = None
    properties = {name: json_value(value) for name in PROPERTY_NAMES if (value := msg.prop(name)) is not None}
    return {
        "payload_bytes": len(body),
        "redelivered": redelivered,
        "exchange": msg.exchange,
        "routing_key": msg.routing_key,
        "message_count": message_count,
        # RabbitMQ renders an empty property list as the empty Erlang list, i.e. a JSON array
        "properties": properties if properties else [],
        "payload": text if text is not None else base64.b64encode(payload).decode("ascii"),
        "payload_encoding": "string" if text is not None else "base64",
    }
