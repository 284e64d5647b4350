"""Encoding of server-sent methods (client methods decode in `broker.protocol.commands`).

Rare server methods are encoded with pamqp (see `encode_method`); per-message ones (deliver,
get-ok, return, confirm ack/nack) are packed by hand because they run once per message.
"""

from __future__ import annotations

import struct
from typing import Any

from broker.protocol.framing import FRAME_END_BYTE, FRAME_METHOD

_S16 = struct.Struct(">H")
_S32 = struct.Struct(">I")
_S64 = struct.Struct(">Q")
_CM = struct.Struct(">HH")


def shortstr(value: str | bytes) -> bytes:
    raw = value.encode("utf-8", errors="surrogateescape") if isinstance(value, str) else value
    if len(raw) > 255:
        raw = raw[:255]
    return bytes((len(raw),)) + raw


def method_frame(channel: int, payload: bytes) -> bytes:
    """A complete method frame around an already encoded (class, method, fields) payload."""
    return struct.pack(">BHI", FRAME_METHOD, channel, len(payload)) + payload + FRAME_END_BYTE


def encode_method(channel: int, method: Any) -> bytes:
    """Frame a pamqp command object (used for the infrequent server methods)."""
    from pamqp import frame as pamqp_frame

    return pamqp_frame.marshal(method, channel)


_DELIVER_HEAD = struct.Struct(">HH")


def deliver_payload(
    consumer_tag: bytes, delivery_tag: int, redelivered: bool, exchange: bytes, routing_key: bytes
) -> bytes:
    """basic.deliver fields; tag/exchange/key arrive pre-encoded as shortstr bytes (length included)."""
    return b"".join(
        (
            b"\x00\x3c\x00\x3c",
            consumer_tag,
            _S64.pack(delivery_tag),
            b"\x01" if redelivered else b"\x00",
            exchange,
            routing_key,
        )
    )


def get_ok_payload(
    delivery_tag: int, redelivered: bool, exchange: bytes, routing_key: bytes, message_count: int
) -> bytes:
    return b"".join(
        (
            b"\x00\x3c\x00\x47",
            _S64.pack(delivery_tag),
            b"\x01" if redelivered else b"\x00",
            exchange,
            routing_key,
            _S32.pack(message_count),
        )
    )


def return_payload(reply_code: int, reply_text: str, exchange: bytes, routing_key: bytes) -> bytes:
    return b"".join((b"\x00\x3c\x00\x32", _S16.pack(reply_code), shortstr(reply_text), exchange, routing_key))


def confirm_payload(ack: bool, delivery_tag: int, multiple: bool, requeue: bool = False) -> bytes:
    if ack:
        return b"\x00\x3c\x00\x50" + _S64.pack(delivery_tag) + (b"\x01" if multiple else b"\x00")
    flags = (1 if multiple else 0) | (2 if requeue else 0)
    return b"\x00\x3c\x00\x78" + _S64.pack(delivery_tag) + bytes((flags,))


def close_payload(
    class_id: int, reply_code: int, reply_text: str, failed_class: int, failed_method: int
) -> bytes:
    """connection.close (class 10) or channel.close (class 20)."""
    return b"".join(
        (
            _CM.pack(class_id, 50 if class_id == 10 else 40),
            _S16.pack(reply_code),
            shortstr(reply_text),
            _CM.pack(failed_class, failed_method),
        )
    )


def simple_payload(class_id: int, method_id: int, fields: bytes = b"") -> bytes:
    return _CM.pack(class_id, method_id) + fields
