"""AMQP addresses and the encoding of basic properties, shared by the publisher and the consumer.

`field_table` imports pamqp when first called, so this module can be imported where pamqp is absent
(the worker-environment probe), and the error then comes from the bridge's check instead.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import unquote, urlsplit

from amqpwire.properties import BASIC_PROPERTIES
from amqpwire.properties import FLAG_MESSAGE_ID as FLAG_MESSAGE_ID  # re-exported


@dataclass(frozen=True)
class AmqpAddress:
    """Where and how to connect, parsed from an `amqp://user:pass@host:port/vhost` URI.

    `connect_timeout` is in seconds; in the URI it is the `connection_timeout` query parameter,
    in milliseconds as RabbitMQ's URI query parameters specify (`?connection_timeout=5000`).
    """

    host: str
    port: int
    username: str
    password: str
    vhost: str
    connect_timeout: float = 10.0

    @classmethod
    def parse(cls, uri: str) -> AmqpAddress:
        """Parse an AMQP URI (RabbitMQ's URI spec: empty path means vhost "/", %2F escapes "/")."""
        parts = urlsplit(uri)
        if parts.scheme == "amqps":
            raise ValueError("amqps:// is not supported by spark_bridge yet; use amqp://")
        if parts.scheme != "amqp":
            raise ValueError(f"not an AMQP URI (expected amqp://...): {uri!r}")
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        vhost = unquote(path) if path else "/"
        timeout = 10.0
        for item in parts.query.split("&") if parts.query else []:
            key, _, value = item.partition("=")
            if key == "connection_timeout":
                try:
                    millis = float(value)
                except ValueError:
                    millis = -1.0
                if not millis > 0 or millis == float("inf"):
                    raise ValueError(
                        "URI parameter connection_timeout must be a positive number of "
                        f"milliseconds, got {value!r}"
                    )
                timeout = millis / 1000.0
            elif key == "connect_timeout":
                # Accepted (in seconds) by earlier versions of the bridge, but neither a RabbitMQ
                # nor a pika URI parameter: refuse it rather than silently changing its unit.
                raise ValueError(
                    "URI parameter connect_timeout is not supported; use connection_timeout, "
                    f"in milliseconds (connection_timeout={value}000 for {value} s)"
                )
        return cls(
            host=parts.hostname or "localhost",
            port=parts.port or 5672,
            username=unquote(parts.username) if parts.username is not None else "guest",
            password=unquote(parts.password) if parts.password is not None else "guest",
            vhost=vhost,
            connect_timeout=timeout,
        )

    def display(self) -> str:
        """The address without credentials, for error messages and logs."""
        return f"amqp://{self.host}:{self.port}/{self.vhost if self.vhost != '/' else '%2F'}"


def shortstr(value: str | bytes) -> bytes:
    """AMQP short string: one length byte, then at most 255 bytes."""
    raw = value.encode("utf-8") if isinstance(value, str) else value
    if len(raw) > 255:
        raise ValueError(f"AMQP short string of {len(raw)} bytes, at most 255 allowed: {raw[:40]!r}...")
    return bytes((len(raw),)) + raw


def field_table(value: Mapping[str, Any]) -> bytes:
    """Encode a headers table (pamqp knows every AMQP field type)."""
    from pamqp import encode as pamqp_encode

    return pamqp_encode.field_table(dict(value))


def encode_properties(
    *,
    content_type: str | None = None,
    headers: Mapping[str, Any] | None = None,
    delivery_mode: int | None = None,
    priority: int | None = None,
    correlation_id: str | None = None,
    expiration: str | None = None,
    message_id: str | bytes | None = None,
    timestamp: int | None = None,
    type_: str | None = None,
    app_id: str | None = None,
) -> tuple[int, bytes]:
    """Encode basic properties as (flags, bytes) in the order the spec fixes (`BASIC_PROPERTIES`)."""
    values: dict[str, Any] = {
        "content_type": content_type,
        "headers": headers,
        "delivery_mode": delivery_mode,
        "priority": priority,
        "correlation_id": correlation_id,
        "expiration": expiration,
        "message_id": message_id,
        "timestamp": timestamp,
        "type": type_,
        "app_id": app_id,
    }
    flags = 0
    parts: list[bytes] = []
    for bit, name, kind in BASIC_PROPERTIES:
        value = values.get(name)
        if value is None:
            continue
        if name == "priority" and not 0 <= value <= 255:
            raise ValueError(f"priority must be between 0 and 255 (an AMQP octet), got {value}")
        if kind == "L" and not 0 <= value < 1 << 64:
            raise ValueError(f"timestamp must be between 0 and 2**64 - 1 seconds, got {value}")
        flags |= 1 << bit
        parts.append(_ENCODE[kind](value))
    return flags, b"".join(parts)


@dataclass(slots=True)
class Properties:
    """Decoded basic properties of a delivery (the attribute names are pamqp's)."""

    content_type: str | None = None
    content_encoding: str | None = None
    headers: dict[str, Any] | None = None
    delivery_mode: int | None = None
    priority: int | None = None
    correlation_id: str | None = None
    reply_to: str | None = None
    expiration: str | None = None
    message_id: str | None = None
    timestamp: dt.datetime | None = None
    type: str | None = None
    user_id: str | None = None
    app_id: str | None = None
    cluster_id: str | None = None


_U64 = struct.Struct(">Q")
_ENCODE: dict[str, Callable[[Any], bytes]] = {
    "s": shortstr,
    "o": lambda value: bytes((value,)),
    "t": field_table,
    "L": _U64.pack,
}
"""How a value of each kind of `BASIC_PROPERTIES` is written."""


def decode_properties(flags: int, data: bytes | bytearray, pos: int) -> Properties:
    """Decode the property list of a content header that starts at `data[pos]`.

    Done by hand because a consumer decodes one per message and pamqp's generic decoder costs
    several times more; field tables (headers) still go through pamqp.
    """
    props = Properties()
    if not flags:
        return props
    for bit, name, kind in BASIC_PROPERTIES:
        if not flags & (1 << bit):
            continue
        if kind == "s":
            size = data[pos]
            setattr(props, name, bytes(data[pos + 1 : pos + 1 + size]).decode("utf-8", "replace"))
            pos += 1 + size
        elif kind == "o":
            setattr(props, name, data[pos])
            pos += 1
        elif kind == "L":
            props.timestamp = dt.datetime.fromtimestamp(_U64.unpack_from(data, pos)[0], tz=dt.UTC)
            pos += 8
        else:
            from pamqp import decode

            size = struct.unpack_from(">I", data, pos)[0]
            _, props.headers = decode.field_table(bytes(data[pos : pos + 4 + size]))
            pos += 4 + size
    return props


_DELIVERY_TAG = struct.Struct(">QB")


class Deliver(NamedTuple):
    """The fields of basic.deliver a consumer uses."""

    delivery_tag: int
    redelivered: bool
    exchange: str
    routing_key: str


def parse_deliver(buf: bytearray, pos: int) -> Deliver:
    """basic.deliver's arguments (consumer tag, delivery tag, redelivered, exchange, routing key),
    decoded by hand: a consumer sees one per message."""
    pos += 1 + buf[pos]  # consumer tag
    tag, bits = _DELIVERY_TAG.unpack_from(buf, pos)
    pos += 9
    size = buf[pos]
    exchange = bytes(buf[pos + 1 : pos + 1 + size]).decode("utf-8", "replace")
    pos += 1 + size
    size = buf[pos]
    routing_key = bytes(buf[pos + 1 : pos + 1 + size]).decode("utf-8", "replace")
    return Deliver(tag, bool(bits & 1), exchange, routing_key)
