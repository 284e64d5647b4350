"""The outbound encoder: every frame the server sends is built here (client methods decode in
`broker.protocol.commands`).

A method goes out as one frame around its payload (`method_frame`), a message as a method frame,
a content header and body frames split to the negotiated frame size (`content_frames`). Payloads
of the per-message methods (deliver, get-ok, return, confirm ack/nack) are packed here by hand
because they run once per message; the synchronous replies are in `broker.protocol.replies`; the
rare handshake methods are encoded with pamqp (`encode_method`).
"""

from __future__ import annotations

import struct
from typing import Any

from broker.protocol.framing import (
    EMPTY_FRAME_SIZE,
    FRAME_BODY,
    FRAME_END,
    FRAME_END_BYTE,
    FRAME_HEADER,
    FRAME_METHOD,
    build_body_frames,
)

_HDR = struct.Struct(">BHI")
#: a content header frame up to its property bytes: frame type, channel, size, class 60, weight 0,
#: body size
_CONTENT_HEADER_FRAME = struct.Struct(">BHIHHQ")
#: the end marker of the frame before, then a body frame's header: one pack between the
#: properties and the body
_END_THEN_BODY = struct.Struct(">BBHI")
#: basic.deliver's delivery tag and redelivered octet
_TAG_REDELIVERED = struct.Struct(">QB")
_CONTENT_HEAD = struct.Struct(">HHQ")
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
    return _HDR.pack(FRAME_METHOD, channel, len(payload)) + payload + FRAME_END_BYTE


def content_frames(
    channel: int, method_payload: bytes, props: bytes, body: bytes, frame_max: int, out: list[bytes]
) -> None:
    """Append a message's frames to `out` as (header, payload, end marker) triples: the method
    (basic.deliver, get-ok or return), the content header with the property bytes as received, and
    the body split so that no frame exceeds `frame_max` (0: unlimited)."""
    out.append(_HDR.pack(FRAME_METHOD, channel, len(method_payload)))
    out.append(method_payload)
    out.append(FRAME_END_BYTE)
    header = _CONTENT_HEAD.pack(60, 0, len(body)) + props
    out.append(_HDR.pack(FRAME_HEADER, channel, len(header)))
    out.append(header)
    out.append(FRAME_END_BYTE)
    build_body_frames(channel, body, frame_max, out)


def deliver_frame_parts(
    channel: int, consumer_tag: bytes, exchange: str, routing_key: str
) -> tuple[bytes, bytes]:
    """A basic.deliver frame's bytes before its delivery tag (frame header, class and method, the
    consumer tag as a shortstr) and after its redelivered octet (exchange, routing key, end
    marker): the same for every delivery of one consumer from one exchange and key."""
    tail = shortstr(exchange) + shortstr(routing_key)
    size = 4 + len(consumer_tag) + _TAG_REDELIVERED.size + len(tail)
    return _HDR.pack(FRAME_METHOD, channel, size) + b"\x00\x3c\x00\x3c" + consumer_tag, tail + FRAME_END_BYTE


def deliver_frames(
    parts: tuple[bytes, bytes],
    channel: int,
    delivery_tag: int,
    redelivered: bool,
    props: bytes,
    body: bytes,
    frame_max: int,
    out: list[bytes],
) -> int:
    """Append a basic.deliver with its message to `out` (`parts` from `deliver_frame_parts`); the
    number of frames. A body that fits one frame, the common case, costs three packs and one
    extend; any other goes through `content_frames`' body splitting."""
    n = len(body)
    if n and (not frame_max or n <= frame_max - EMPTY_FRAME_SIZE):
        out += (
            parts[0],
            _TAG_REDELIVERED.pack(delivery_tag, redelivered),
            parts[1],
            _CONTENT_HEADER_FRAME.pack(FRAME_HEADER, channel, 12 + len(props), 60, 0, n),
            props,
            _END_THEN_BODY.pack(FRAME_END, FRAME_BODY, channel, n),
            body,
            FRAME_END_BYTE,
        )
        return 3
    before = len(out)
    out += (parts[0], _TAG_REDELIVERED.pack(delivery_tag, redelivered), parts[1])
    header = _CONTENT_HEAD.pack(60, 0, n) + props
    out += (_HDR.pack(FRAME_HEADER, channel, len(header)), header, FRAME_END_BYTE)
    build_body_frames(channel, body, frame_max, out)
    return (len(out) - before) // 3


def encode_method(channel: int, method: Any) -> bytes:
    """Frame a pamqp command object (used for the infrequent server methods)."""
    from pamqp import frame as pamqp_frame

    return pamqp_frame.marshal(method, channel)


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
