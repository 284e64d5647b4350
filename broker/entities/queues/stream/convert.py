"""AMQP 0-9-1 messages to and from the AMQP 1.0 records a stream holds, as RabbitMQ 3.10.8's
`rabbit_msg_record` and `rabbit_stream_queue` convert them.

A message published over AMQP 0-9-1 to a stream is stored as AMQP 1.0 sections: message
annotations (`x-routing-key`, `x-exchange`, then `x-basic-priority`, `x-basic-delivery-mode`,
`x-basic-expiration` when set), properties (omitted when none of message-id, user-id,
reply-to, correlation-id, content-type, content-encoding, creation-time is set; all 13 fields
written otherwise), application properties (`x-basic-type`, `x-basic-app-id`, then the headers
except array and table values; omitted when empty), and one data section with the body. A stream
client reads those bytes as they are.

Read over AMQP 0-9-1, a record is parsed back: the exchange and routing key from the annotations
(a record without them, as a stream client writes it, reads as published to the default exchange
with the stream's name as routing key), properties and headers mapped back, a non-utf8 or long
message-id / correlation-id flagged in `x-message-id-type` / `x-correlation-id-type` headers. What
RabbitMQ's conversion crashes on (a header or footer section, no data section, an application
property of a type AMQP 0-9-1 has no equivalent for, a decimal header) is `Unconvertible` here.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from amqpwire.fields import Field, FieldTable
from broker.entities.queues.stream import amqp10 as A


class UnconvertibleError(ValueError):
    """RabbitMQ's conversion crashes on this message."""


_UNSUPPORTED_HEADER = frozenset({"array", "table"})


def _ms_div(ms: int) -> int:
    """Erlang's `div` (truncating)."""
    q = abs(ms) // 1000
    return q if ms >= 0 else -q


def _str(v: str | bytes) -> str:
    return v if isinstance(v, str) else v.decode("utf-8", "surrogateescape")


def _raw(v: str | bytes) -> bytes:
    return v.encode("utf-8", "surrogateescape") if isinstance(v, str) else bytes(v)


def _from_091(f: Field) -> A.Value:
    t, v = f.type, f.value
    if t == "longstr":
        return ("utf8", _raw(v))
    if t in ("long", "short", "byte", "float", "double", "binary"):
        return (t, v)
    simple = {
        "unsignedbyte": "ubyte",
        "unsignedshort": "ushort",
        "unsignedint": "uint",
        "signedint": "int",
        "bool": "boolean",
    }
    if t in simple:
        return (simple[t], v)
    if t == "timestamp":
        return ("timestamp", int(v) * 1000)
    if t == "void":
        return None
    raise UnconvertibleError(f"header type {t}")


def from_amqp091(props: Mapping[str, Any], body: bytes, *, exchange: str, routing_key: str) -> bytes:
    """The AMQP 1.0 record RabbitMQ writes for an AMQP 0-9-1 publish (`props` by property name;
    `headers` a FieldTable)."""

    def get(name: str) -> Any:
        return props.get(name)

    ts = get("timestamp")
    fields: list[A.Value] = [
        ("utf8", _raw(get("message_id"))) if get("message_id") is not None else None,
        ("binary", _raw(get("user_id"))) if get("user_id") is not None else None,
        None,
        None,
        ("utf8", _raw(get("reply_to"))) if get("reply_to") is not None else None,
        ("utf8", _raw(get("correlation_id"))) if get("correlation_id") is not None else None,
        ("symbol", _raw(get("content_type"))) if get("content_type") is not None else None,
        ("symbol", _raw(get("content_encoding"))) if get("content_encoding") is not None else None,
        None,
        ("timestamp", int(ts) * 1000) if ts is not None else None,
        None,
        None,
        None,
    ]
    headers: FieldTable | None = get("headers")
    apc: list[tuple[A.Value, A.Value]] = [
        (("utf8", _raw(k)), _from_091(f)) for k, f in (headers or ()) if f.type not in _UNSUPPORTED_HEADER
    ]
    if get("app_id") is not None:
        apc.insert(0, (("utf8", b"x-basic-app-id"), ("utf8", _raw(get("app_id")))))
    if get("type") is not None:
        apc.insert(0, (("utf8", b"x-basic-type"), ("utf8", _raw(get("type")))))
    mac: list[tuple[A.Value, A.Value]] = []
    if get("expiration") is not None:
        mac.insert(0, (("symbol", b"x-basic-expiration"), ("utf8", _raw(get("expiration")))))
    if get("delivery_mode") is not None:
        mac.insert(0, (("symbol", b"x-basic-delivery-mode"), ("ubyte", get("delivery_mode"))))
    if get("priority") is not None:
        mac.insert(0, (("symbol", b"x-basic-priority"), ("ubyte", get("priority"))))
    mac.insert(0, (("symbol", b"x-exchange"), ("utf8", _raw(exchange))))
    mac.insert(0, (("symbol", b"x-routing-key"), ("utf8", _raw(routing_key))))
    out = [A.section(A.MESSAGE_ANNOTATIONS, ("map", mac))]
    if any(fields[i] is not None for i in (0, 1, 2, 4, 5, 6, 7, 9)):
        out.append(A.section(A.PROPERTIES, ("list", fields)))
    if apc:
        out.append(A.section(A.APPLICATION_PROPERTIES, ("map", apc)))
    out.append(A.section(A.DATA, ("binary", bytes(body))))
    return b"".join(out)


@dataclass(frozen=True, slots=True)
class Amqp091Message:
    """A record as an AMQP 0-9-1 consumer receives it (`props` by property name)."""

    exchange: str
    routing_key: str
    props: dict[str, Any]
    body: bytes


def _to_091(key: str, v: A.Value) -> tuple[str, Field]:
    if v is None:
        return key, Field("void", None)
    t, val = v[0], v[-1]
    if t == "utf8":
        return key, Field("longstr", _raw(val))
    if t in ("long", "byte", "short", "double", "float", "binary"):
        return key, Field(t, val)
    simple = {"ubyte": "unsignedbyte", "ushort": "unsignedshort", "uint": "unsignedint", "int": "signedint"}
    if t in simple:
        return key, Field(simple[t], val)
    if t == "timestamp":
        return key, Field("timestamp", _ms_div(val))
    if t == "boolean":
        return key, Field("bool", bool(val))
    raise UnconvertibleError(f"application property type {t}")


def _take(pairs: list[tuple[A.Value, A.Value]], key: A.Value) -> Any:
    for i, (k, v) in enumerate(pairs):
        if k is not None and k[0] == key[0] and _raw(k[1]) == _raw(key[1]):
            del pairs[i]
            return None if v is None else v[-1]
    return None


def _message_id(mid: A.Value, hkey: str, headers: list[tuple[str, Field]]) -> str | None:
    if mid is None:
        return None
    t, v = mid[0], mid[-1]
    if t == "uuid":
        headers.insert(0, (hkey, Field("longstr", b"uuid")))
        return str(uuid.UUID(bytes=bytes(v)))
    if t == "ulong":
        headers.insert(0, (hkey, Field("longstr", b"ulong")))
        return str(v)
    if t == "binary":
        enc = base64.b64encode(bytes(v))
        if len(enc) > 256:
            headers.insert(0, (hkey.replace("-type", ""), Field("longstr", bytes(v))))
            return None
        headers.insert(0, (hkey, Field("longstr", b"binary")))
        return enc.decode()
    if t == "utf8":
        if len(_raw(v)) > 256:
            headers.insert(0, (hkey.replace("-type", ""), Field("longstr", _raw(v))))
            return None
        return _str(v)
    return _str(v) if isinstance(v, (str, bytes)) else str(v)


def to_amqp091(record: bytes, *, stream: str) -> Amqp091Message:
    """A stream record as RabbitMQ 3.10.8 delivers it over AMQP 0-9-1 (without x-stream-offset,
    which the queue adds)."""
    try:
        secs = A.sections(record)
    except A.DecodeError as e:
        raise UnconvertibleError(str(e)) from None
    ma: list[tuple[A.Value, A.Value]] = []
    props_list: list[A.Value] = []
    ap: list[tuple[A.Value, A.Value]] = []
    data: bytes | None = None
    for code, value in secs:
        if code == A.MESSAGE_ANNOTATIONS:
            ma = list(value[1])
        elif code == A.PROPERTIES:
            props_list = list(value[1])
        elif code == A.APPLICATION_PROPERTIES:
            ap = list(value[1])
        elif code == A.DATA:
            data = bytes(value[1])
        else:
            raise UnconvertibleError(f"section {code:#x}")
    if data is None:
        raise UnconvertibleError("no data section")
    exchange, routing_key = "", stream
    for k, v in ma:
        if k is not None and k[0] == "symbol" and _raw(k[1]) in (b"x-exchange", b"x-routing-key"):
            if v is None or v[0] != "utf8":
                raise UnconvertibleError("annotation type")
            if _raw(k[1]) == b"x-exchange":
                exchange = _str(v[1])
            else:
                routing_key = _str(v[1])
    p = dict(zip(A.PROPERTY_FIELDS, props_list + [None] * (13 - len(props_list)), strict=False))
    type_ = _take(ap, ("utf8", "x-basic-type"))
    app_id = _take(ap, ("utf8", "x-basic-app-id"))
    priority = _take(ma, ("symbol", "x-basic-priority"))
    delivery_mode = _take(ma, ("symbol", "x-basic-delivery-mode"))
    expiration = _take(ma, ("symbol", "x-basic-expiration"))
    headers = [_to_091(_str(k[1]) if k is not None else "", v) for k, v in ap]
    msg_id = _message_id(p["message_id"], "x-message-id-type", headers)
    corr_id = _message_id(p["correlation_id"], "x-correlation-id-type", headers)
    out: dict[str, Any] = {}

    def put(name: str, value: Any) -> None:
        if value is not None:
            out[name] = value

    put("content_type", _str(p["content_type"][1]) if p["content_type"] is not None else None)
    put("content_encoding", _str(p["content_encoding"][1]) if p["content_encoding"] is not None else None)
    put("headers", FieldTable(headers) if headers else None)
    put("delivery_mode", delivery_mode)
    put("priority", priority)
    put("correlation_id", corr_id)
    put("reply_to", _str(p["reply_to"][1]) if p["reply_to"] is not None else None)
    put("expiration", _str(expiration) if expiration is not None else None)
    put("message_id", msg_id)
    ct = p["creation_time"]
    put("timestamp", _ms_div(ct[1]) if ct is not None else None)
    put("type", _str(type_) if type_ is not None else None)
    put("user_id", _str(p["user_id"][1]) if p["user_id"] is not None else None)
    put("app_id", _str(app_id) if app_id is not None else None)
    return Amqp091Message(exchange, routing_key, out, data)
