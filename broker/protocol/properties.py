"""Basic-class content properties kept as the raw bytes the publisher sent.

A stored message keeps `props` = property flags + property list exactly as received, so consumers
get byte-identical properties and we never decode what routing does not need. `PropertyView`
locates fields lazily; `rewrite` re-encodes only when the broker must change something (x-death
headers, reply-to rewriting, expiration removal on dead-lettering).
"""

from __future__ import annotations

import struct
from typing import Any

from amqpwire.fields import FieldTable
from amqpwire.properties import BASIC_PROPERTIES as PROPERTIES

_BY_NAME = {name: (bit, kind) for bit, name, kind in PROPERTIES}
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")


class PropertyError(ValueError):
    """Property bytes are malformed."""


def locate(props: bytes) -> dict[str, tuple[int, int]]:
    """Map present property name -> (start, end) of its encoded value (length prefix included).

    Only the first 16-bit flag word is meaningful for the basic class; continuation words are
    skipped like RabbitMQ's parser does.
    """
    if len(props) < 2:
        raise PropertyError("no property flags")
    (flags,) = _U16.unpack_from(props, 0)
    pos = 2
    word = flags
    while word & 1:  # continuation flag words
        (word,) = _U16.unpack_from(props, pos)
        pos += 2
    out: dict[str, tuple[int, int]] = {}
    n = len(props)
    for bit, name, kind in PROPERTIES:
        if not flags & (1 << bit):
            continue
        start = pos
        if kind == "s":
            if pos >= n:
                raise PropertyError(name)
            pos += 1 + props[pos]
        elif kind == "t":
            if pos + 4 > n:
                raise PropertyError(name)
            pos += 4 + _U32.unpack_from(props, pos)[0]
        elif kind == "o":
            pos += 1
        else:
            pos += 8
        if pos > n:
            raise PropertyError(name)
        out[name] = (start, pos)
    return out


def decode_value(props: bytes, name: str, span: tuple[int, int]) -> Any:
    _bit, kind = _BY_NAME[name]
    start, end = span
    if kind == "s":
        return props[start + 1 : end].decode("utf-8", errors="surrogateescape")
    if kind == "t":
        return FieldTable.decode(props[start + 4 : end])
    if kind == "o":
        return props[start]
    return _U64.unpack_from(props, start)[0]


def encode_value(name: str, value: Any) -> bytes:
    _bit, kind = _BY_NAME[name]
    if kind == "s":
        raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        return bytes((len(raw),)) + raw
    if kind == "t":
        body = value.encode()
        return _U32.pack(len(body)) + body
    if kind == "o":
        return bytes((value,))
    return _U64.pack(value)


def delivery_mode(props: bytes) -> int | None:
    """The delivery_mode octet, found by skipping the three properties before it instead of
    locating every property: persistence is asked of every message published and delivered."""
    flags = props[0] << 8 | props[1]
    if not flags & 0x1000:
        return None
    if flags & 1:  # continuation flag words: the general path
        span = locate(props).get("delivery_mode")
        return None if span is None else props[span[0]]
    pos = 2
    if flags & 0x8000:
        pos += 1 + props[pos]
    if flags & 0x4000:
        pos += 1 + props[pos]
    if flags & 0x2000:
        pos += 4 + _U32.unpack_from(props, pos)[0]
    return props[pos]


def append_header(props: bytes, key: bytes, entry: bytes) -> bytes | None:
    """`props` with the encoded table entry `entry` (key included) appended to the headers
    (a headers table made for it when there is none), by splicing bytes instead of decoding and
    re-encoding the table; None when that cannot be done exactly (continuation flag words, or a
    table that may already hold `key`), for `rewrite` to do it.

    Delivery-time headers (a stream's offset) are added to every message a consumer reads, so the
    general path's cost per message would be most of a stream read's."""
    flags = props[0] << 8 | props[1]
    if flags & 1:
        return None
    pos = 2
    if flags & 0x8000:  # content_type, content_encoding: the shortstrs before the headers
        pos += 1 + props[pos]
    if flags & 0x4000:
        pos += 1 + props[pos]
    if not flags & 0x2000:
        flags |= 0x2000
        return bytes((flags >> 8, flags & 0xFF)) + props[2:pos] + _U32.pack(len(entry)) + entry + props[pos:]
    (n,) = _U32.unpack_from(props, pos)
    end = pos + 4 + n
    if key in props[pos + 4 : end]:
        return None
    return props[:pos] + _U32.pack(n + len(entry)) + props[pos + 4 : end] + entry + props[end:]


def rewrite(props: bytes, changes: dict[str, Any]) -> bytes:
    """Return new property bytes with `changes` applied (value None removes the property).

    Untouched properties are copied byte for byte.
    """
    spans = locate(props)
    flags = 0
    parts: list[bytes] = []
    for bit, name, _kind in PROPERTIES:
        if name in changes:
            value = changes[name]
            if value is None:
                continue
            parts.append(encode_value(name, value))
        elif name in spans:
            start, end = spans[name]
            parts.append(props[start:end])
        else:
            continue
        flags |= 1 << bit
    return _U16.pack(flags) + b"".join(parts)


def encode(values: dict[str, Any]) -> bytes:
    """Property bytes from scratch (for messages the broker itself creates)."""
    return rewrite(b"\x00\x00", values)
