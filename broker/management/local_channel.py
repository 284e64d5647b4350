"""A management write's session on the broker's loop: the acting principal and a channel with no socket.

RabbitMQ's management acts through rabbit_channel as the HTTP user, so every check and error text is
the AMQP channel's own. Here the declarations call `broker.session.declarations` with a
`DirectSession` as the principal, and publish and "get messages" drive a real `Channel` (the same
basic.publish, basic.get, basic.nack and basic.reject handlers an AMQP client reaches) whose output
is kept in memory instead of being framed onto a connection. Nothing here opens a connection, so the
broker's connection list and counts never show a management write.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import struct
from typing import TYPE_CHECKING, Any, cast

from amqpwire.errors import not_allowed
from amqpwire.fields import FieldTable
from broker.entities.message import StoredMessage
from broker.management.values import json_value
from broker.management.write_errors import PropertyTypeError
from broker.protocol import commands as C
from broker.protocol import properties as P
from broker.session.channel import Channel

if TYPE_CHECKING:
    from broker.entities.queues.catalog import Queue
    from broker.entities.vhost import VHost
    from broker.server import Broker
    from broker.session.connection import Connection

#: the frame_max the channel's content framing would use; nothing is framed, so any legal value does
_FRAME_MAX = 131072
_GET_OK = b"\x00\x3c\x00\x47"
_RETURN = b"\x00\x3c\x00\x32"
_CONFIRM_ACK = b"\x00\x3c\x00\x50"
_CONFIRM_NACK = b"\x00\x3c\x00\x78"
_U32 = struct.Struct(">I")
_SESSIONS = itertools.count(1)


class DirectSession:
    """Who acts (the HTTP user, or the internal superuser for definitions imports) on one vhost.

    It is the `Principal` the declarations check permissions and exclusive ownership against, and
    the connection side of a `DirectChannel`: it takes the channel's replies instead of a socket.
    """

    def __init__(self, broker: Broker, vhost: str, user: str, *, superuser: bool = False) -> None:
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
        self.frame_max = _FRAME_MAX
        self.paused = False
        self.cancel_notify = False
        self.methods: list[bytes] = []
        self.confirmed: asyncio.Future[bool] | None = None

    def check_access(self, kind: str, resource: str, name: str) -> None:
        """The AMQP permission check of the acting user; the internal superuser may do anything
        (rabbit_definitions imports as ?INTERNAL_USER, whatever the importer's permissions)."""
        if not self.superuser:
            self.broker.auth.check(self.user, self.vhost_name, kind, resource, name)

    def send_method(self, channel: int, payload: bytes) -> None:
        self.methods.append(payload)
        done = self.confirmed
        if done is not None and not done.done() and payload.startswith((_CONFIRM_ACK, _CONFIRM_NACK)):
            done.set_result(payload.startswith(_CONFIRM_ACK))

    def send_frames(self, frames: list[bytes]) -> None:
        """Content is taken by `DirectChannel._content_frames`; nothing is left to send."""

    def want_flush_confirms(self, channel: Channel) -> None:
        channel.flush_confirms()

    def channel_closed(self, channel: Channel) -> None:
        channel.teardown()

    def open_channel(self) -> DirectChannel:
        # the channel parts are typed against Connection; this object offers every member they use
        return DirectChannel(cast("Connection", self), 1)


class DirectChannel(Channel):
    """A channel whose deliveries, gets and returns are kept as (method payload, message) pairs."""

    def __init__(self, conn: Connection, number: int) -> None:
        super().__init__(conn, number)
        self.contents: list[tuple[bytes, StoredMessage]] = []

    def _content_frames(self, method_payload: bytes, msg: StoredMessage, out: list[bytes]) -> None:
        self.contents.append((method_payload, msg))


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
        return not any(payload.startswith(_RETURN) for payload, _msg in ch.contents)
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
        for _ in range(max(count, 0)):
            before = len(ch.contents)
            ch.on_basic_get(C.BasicGet(0, queue, no_ack))
            if len(ch.contents) == before:  # basic.get-empty
                break
        taken = [(_get_ok(payload), msg) for payload, msg in ch.contents]
        if taken and not no_ack:
            if ackmode == "reject_requeue_false":
                for (tag, _r, _c), _msg in taken:
                    ch.on_basic_reject(C.BasicReject(tag, False))
            else:  # ack_requeue_true / reject_requeue_true: back to the queue
                ch.on_basic_nack(C.BasicNack(taken[-1][0][0], True, True))
    finally:
        ch.teardown()
    return [
        render_message(msg, redelivered, left, encoding, truncate) for (_t, redelivered, left), msg in taken
    ]


def _get_ok(payload: bytes) -> tuple[int, bool, int]:
    """(delivery tag, redelivered, message count) of a basic.get-ok method payload."""
    assert payload.startswith(_GET_OK)
    tag = int.from_bytes(payload[4:12], "big")
    redelivered = bool(payload[12])
    at = 13
    at += 1 + payload[at]  # exchange
    at += 1 + payload[at]  # routing key
    return tag, redelivered, _U32.unpack_from(payload, at)[0]


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
