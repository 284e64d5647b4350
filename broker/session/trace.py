"""The firehose tracer (rabbit_trace) and the hash exchanges' live view, on the publish and delivery
paths of a channel whose vhost is tapped.

With tracing on, every publish is copied to the vhost's `amq.rabbitmq.trace` topic exchange with
routing key `publish.<exchange>` and every delivery (to a consumer or basic.get) with
`deliver.<queue>`. The copy's body is the message's; its only property is a headers table with the
layout RabbitMQ 3.10.8 sends (observed live, see tests/differential/test_differential_trace.py):
`exchange_name`, `routing_keys` (array, CC and BCC keys included), `properties` (the message's
properties as a table, last property first, integers as signedint truncated to 32 bits), `node`,
then `redelivered` for a delivery, then `vhost`, `connection`, `channel`, `user`, and for a publish
`routed_queues`. Messages published to the trace exchange itself are never traced, so consuming a
trace queue does not feed it.

The channel calls in here only when `VHost.tapped` (publish) or `VHost.tracing` (delivery) is set:
one attribute read on the hot path when nothing is watching. The tracer reads only where and who
of the channel (`broker.session.ports.ChannelIdentity`).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from broker.entities import hash_watch
from broker.entities.message import RoutingView, StoredMessage
from broker.protocol import properties as P
from broker.session.ports import ChannelIdentity

if TYPE_CHECKING:
    from collections.abc import Sequence

    from broker.entities.exchange import Exchange
    from broker.entities.queues.catalog import Queue
    from broker.entities.vhost import VHost

TRACE_EXCHANGE = "amq.rabbitmq.trace"
_INT_PROPERTIES = ("delivery_mode", "priority", "timestamp")
_NAMES = {name: bytes((len(name),)) + name.encode() for _bit, name, _kind in P.PROPERTIES}
_HEADERS_ONLY = b"\x20\x00"  # property flags: only `headers` is present
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")


def tap_publish(ch: ChannelIdentity, x: Exchange, msg: StoredMessage, routed: Sequence[Queue]) -> None:
    """basic.publish in a tapped vhost, once routed (`routed`: the queues it reaches) and before
    the message reaches them, as in rabbit_channel (in a transaction: when published, not at
    commit): the hash exchanges' live view records it, the firehose copies it. A direct reply-to
    publish or a message a delayed exchange holds is routed to no queue at that point
    (routed_queues is empty)."""
    vhost = ch.vhost
    if vhost.hash_watches and x.type_name in hash_watch.HASH_TYPES:
        hash_watch.record(vhost, x, RoutingView(msg), [q.name for q in routed])
    if vhost.tracing and listened(vhost) is not None:
        queues = _array(b"\x0drouted_queues", [_b(q.name) for q in routed])
        emit(ch, "publish." + msg.exchange, msg, _who(ch) + queues)


def trace_deliver(ch: ChannelIdentity, queue: str, redelivered: bool, msg: StoredMessage) -> None:
    """A delivery (basic.deliver or basic.get-ok) from `queue` in a vhost with tracing on."""
    if msg.exchange == TRACE_EXCHANGE or listened(ch.vhost) is None:
        return
    emit(ch, "deliver." + queue, msg, _int(b"\x0bredelivered", 1 if redelivered else 0) + _who(ch))


def listened(vhost: VHost) -> Exchange | None:
    """The trace exchange when something is bound to it: a copy bound nowhere is not built."""
    x = vhost.exchanges.get(TRACE_EXCHANGE)
    return x if x is not None and x.impl is not None and x.binding_set else None


def emit(ch: ChannelIdentity, routing_key: str, msg: StoredMessage, extra: bytes) -> None:
    """Publish the trace copy of `msg` to the vhost's trace exchange (rabbit_basic:publish: through
    the vhost's pipeline, counted by no channel).

    The headers table is written as wire bytes directly (`extra` are the encoded entries after
    `node`): the same bytes `FieldTable.encode` gives, at a fraction of its cost per message.
    """
    vhost = ch.vhost
    x = listened(vhost)
    if x is None or msg.exchange == TRACE_EXCHANGE:
        return
    table = b"".join(
        (
            _str(b"\x0dexchange_name", _b(msg.exchange)),
            _array(b"\x0crouting_keys", [_b(k) for k in msg.routing_keys]),
            _table(b"\x0aproperties", properties_body(msg.strip_bcc() if msg.has_bcc else msg)),
            _str(b"\x04node", _b(vhost.node)),
            extra,
        )
    )
    props = _HEADERS_ONLY + _U32.pack(len(table)) + table
    vhost.publish(x, StoredMessage(TRACE_EXCHANGE, routing_key, props, msg.body), counted=False)


def properties_body(msg: StoredMessage) -> bytes:
    """rabbit_trace's table of the message's properties (encoded, without its length): last
    property first, shortstrs as longstr, integers as signedint (a timestamp wider than 32 bits
    keeps its low 32, as Erlang's encoder does)."""
    if not msg.flags:
        return b""
    props = msg.props
    parts: list[bytes] = []
    for name, span in msg.spans().items():
        start, end = span
        key = _NAMES[name]
        if name == "headers":
            headers = msg.headers()  # decoded and encoded again, as RabbitMQ does
            parts.append(_table(key, headers.encode() if headers is not None else b""))
        elif name in _INT_PROPERTIES:
            value = P.decode_value(props, name, span) & 0xFFFFFFFF
            parts.append(_int(key, value - (1 << 32) if value >= 1 << 31 else value))
        else:
            parts.append(_str(key, props[start + 1 : end]))
    parts.reverse()
    return b"".join(parts)


def _who(ch: ChannelIdentity) -> bytes:
    conn = ch.conn
    return b"".join(
        (
            _str(b"\x05vhost", _b(ch.vhost.name)),
            _str(b"\x0aconnection", _b(conn.name)),
            _int(b"\x07channel", ch.number),
            _str(b"\x04user", _b(conn.user)),
        )
    )


# field-table entries as wire bytes: `key` is the field name with its length byte
def _str(key: bytes, value: bytes) -> bytes:
    return key + b"S" + _U32.pack(len(value)) + value


def _int(key: bytes, value: int) -> bytes:
    return key + b"I" + _I32.pack(value)


def _table(key: bytes, body: bytes) -> bytes:
    return key + b"F" + _U32.pack(len(body)) + body


def _array(key: bytes, items: list[bytes]) -> bytes:
    body = b"".join(b"S" + _U32.pack(len(item)) + item for item in items)
    return key + b"A" + _U32.pack(len(body)) + body


def _b(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")
