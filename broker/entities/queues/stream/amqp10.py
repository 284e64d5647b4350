"""AMQP 1.0 types and message sections, encoded byte for byte as RabbitMQ 3.10.8's
`amqp10_binary_generator` does and decoded as its `amqp10_binary_parser` reads them.

Values are `(type, value)` pairs named like Erlang's terms: ("utf8", str), ("symbol", str),
("binary", bytes), ("ubyte" | "ushort" | "uint" | "ulong" | "byte" | "short" | "int" | "long",
int), ("float" | "double", float), ("timestamp", ms), ("uuid", bytes), ("char", bytes),
("boolean", bool), ("list", [values]), ("map", [(key, value)]), ("array", type, [values]),
("described", descriptor, value), and `None` for null. The generator's choices are kept: a uint or
ulong below 256 is small (0 has its own code), an int or long in -128..127 is small, a symbol is
always sym8, a string or binary below 255 bytes is the 8-bit form, a list or map the 8-bit form
while it has fewer than 255 elements and its body with the count fits in 255 bytes.
"""

from __future__ import annotations

import struct
from typing import Any

Value = Any

_B = struct.Struct(">B")
_b = struct.Struct(">b")
_H = struct.Struct(">H")
_h = struct.Struct(">h")
_I = struct.Struct(">I")
_i = struct.Struct(">i")
_Q = struct.Struct(">Q")
_q = struct.Struct(">q")
_f = struct.Struct(">f")
_d = struct.Struct(">d")

#: Section descriptors (ulong codes).
HEADER = 0x70
DELIVERY_ANNOTATIONS = 0x71
MESSAGE_ANNOTATIONS = 0x72
PROPERTIES = 0x73
APPLICATION_PROPERTIES = 0x74
DATA = 0x75
AMQP_SEQUENCE = 0x76
AMQP_VALUE = 0x77
FOOTER = 0x78
_SYMBOLIC = {
    "amqp:header:list": HEADER,
    "amqp:delivery-annotations:map": DELIVERY_ANNOTATIONS,
    "amqp:message-annotations:map": MESSAGE_ANNOTATIONS,
    "amqp:properties:list": PROPERTIES,
    "amqp:application-properties:map": APPLICATION_PROPERTIES,
    "amqp:data:binary": DATA,
    "amqp:amqp-sequence:list": AMQP_SEQUENCE,
    "amqp:amqp-value:*": AMQP_VALUE,
    "amqp:footer:map": FOOTER,
}
#: The properties section's fields, in order.
PROPERTY_FIELDS = (
    "message_id",
    "user_id",
    "to",
    "subject",
    "reply_to",
    "correlation_id",
    "content_type",
    "content_encoding",
    "absolute_expiry_time",
    "creation_time",
    "group_id",
    "group_sequence",
    "reply_to_group_id",
)


class DecodeError(ValueError):
    """Not AMQP 1.0 as RabbitMQ's parser reads it."""


# -- encoding ---------------------------------------------------------------------------------


def _utf(v: str | bytes) -> bytes:
    return v.encode("utf-8") if isinstance(v, str) else bytes(v)


def encode(value: Value) -> bytes:
    out = bytearray()
    _gen(value, out)
    return bytes(out)


def _compound(code8: int, code32: int, count: int, body: bytes, out: bytearray) -> None:
    size = len(body)
    if count >= 255 or size + 1 >= 256:
        out += bytes((code32,)) + _I.pack(size + 4) + _I.pack(count)
    else:
        out += bytes((code8, size + 1, count))
    out += body


def _gen(value: Value, out: bytearray) -> None:
    if value is None:
        out.append(0x40)
        return
    if value is True:
        out.append(0x41)
        return
    if value is False:
        out.append(0x42)
        return
    t = value[0]
    v = value[-1]
    if t == "described":
        out.append(0x00)
        _gen(value[1], out)
        _gen(value[2], out)
    elif t == "boolean":
        out += b"\x56\x01" if v else b"\x56\x00"
    elif t == "ubyte":
        out += b"\x50" + _B.pack(v)
    elif t == "ushort":
        out += b"\x60" + _H.pack(v)
    elif t == "uint":
        out += b"\x43" if v == 0 else b"\x52" + _B.pack(v) if v < 256 else b"\x70" + _I.pack(v)
    elif t == "ulong":
        out += b"\x44" if v == 0 else b"\x53" + _B.pack(v) if v < 256 else b"\x80" + _Q.pack(v)
    elif t == "byte":
        out += b"\x51" + _b.pack(v)
    elif t == "short":
        out += b"\x61" + _h.pack(v)
    elif t == "int":
        out += b"\x54" + _b.pack(v) if -129 < v < 128 else b"\x71" + _i.pack(v)
    elif t == "long":
        out += b"\x55" + _b.pack(v) if -129 < v < 128 else b"\x81" + _q.pack(v)
    elif t == "float":
        out += b"\x72" + _f.pack(v)
    elif t == "double":
        out += b"\x82" + _d.pack(v)
    elif t == "char":
        out += b"\x73" + bytes(v)[:4]
    elif t == "timestamp":
        out += b"\x83" + _q.pack(v)
    elif t == "uuid":
        out += b"\x98" + bytes(v)[:16]
    elif t == "utf8":
        raw = _utf(v)
        out += (b"\xa1" + _B.pack(len(raw)) if len(raw) < 255 else b"\xb1" + _I.pack(len(raw))) + raw
    elif t == "symbol":
        raw = _utf(v)
        out += b"\xa3" + _B.pack(len(raw) & 0xFF) + raw
    elif t == "binary":
        raw = bytes(v)
        out += (b"\xa0" + _B.pack(len(raw)) if len(raw) < 255 else b"\xb0" + _I.pack(len(raw))) + raw
    elif t == "list":
        if not v:
            out.append(0x45)
            return
        body = bytearray()
        for item in v:
            _gen(item, body)
        _compound(0xC0, 0xD0, len(v), bytes(body), out)
    elif t == "map":
        body = bytearray()
        for k, item in v:
            _gen(k, body)
            _gen(item, body)
        _compound(0xC1, 0xD1, 2 * len(v), bytes(body), out)
    else:
        raise ValueError(f"cannot encode {t}")


def section(code: int, value: Value) -> bytes:
    return encode(("described", ("ulong", code), value))


# -- decoding ---------------------------------------------------------------------------------

_FIXED: dict[int, tuple[str, struct.Struct]] = {
    0x50: ("ubyte", _B),
    0x51: ("byte", _b),
    0x60: ("ushort", _H),
    0x61: ("short", _h),
    0x70: ("uint", _I),
    0x52: ("uint", _B),
    0x80: ("ulong", _Q),
    0x53: ("ulong", _B),
    0x71: ("int", _i),
    0x54: ("int", _b),
    0x81: ("long", _q),
    0x55: ("long", _b),
    0x72: ("float", _f),
    0x82: ("double", _d),
    0x83: ("timestamp", _q),
}
_VAR = {
    0xA0: ("binary", 1),
    0xB0: ("binary", 4),
    0xA1: ("utf8", 1),
    0xB1: ("utf8", 4),
    0xA3: ("symbol", 1),
    0xB3: ("symbol", 4),
}


class _Cursor:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise DecodeError("truncated")
        out = self.data[self.pos : end]
        self.pos = end
        return out

    def byte(self) -> int:
        return self.take(1)[0]


def _size(c: _Cursor, width: int) -> int:
    return c.byte() if width == 1 else int(_I.unpack(c.take(4))[0])


def _value(c: _Cursor) -> Value:
    code = c.byte()
    if code == 0x00:
        descriptor = _value(c)
        return ("described", descriptor, _value(c))
    if code == 0x40:
        return None
    if code == 0x41:
        return ("boolean", True)
    if code == 0x42:
        return ("boolean", False)
    if code == 0x56:
        return ("boolean", c.byte() != 0)
    if code == 0x43:
        return ("uint", 0)
    if code == 0x44:
        return ("ulong", 0)
    if code == 0x45:
        return ("list", [])
    fixed = _FIXED.get(code)
    if fixed is not None:
        name, s = fixed
        return (name, s.unpack(c.take(s.size))[0])
    var = _VAR.get(code)
    if var is not None:
        name, width = var
        raw = c.take(_size(c, width))
        if name == "binary":
            return ("binary", raw)
        try:
            return (name, raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise DecodeError("invalid utf-8") from e
    if code == 0x73:
        return ("char", c.take(4))
    if code == 0x98:
        return ("uuid", c.take(16))
    if code in (0x74, 0x84, 0x94):
        return ("decimal", c.take({0x74: 4, 0x84: 8, 0x94: 16}[code]))
    if code in (0xC0, 0xD0, 0xC1, 0xD1):
        width = 1 if code in (0xC0, 0xC1) else 4
        size = _size(c, width)
        body = _Cursor(c.take(size))
        count = _size(body, width)
        items = [_value(body) for _ in range(count)]
        if code in (0xC0, 0xD0):
            return ("list", items)
        if count % 2:
            raise DecodeError("odd map")
        return ("map", list(zip(items[::2], items[1::2], strict=True)))
    if code in (0xE0, 0xF0):
        width = 1 if code == 0xE0 else 4
        size = _size(c, width)
        body = _Cursor(c.take(size))
        count = _size(body, width)
        ctor = body.byte()
        items = _array_items(body, ctor, count)
        return ("array", _FIXED.get(ctor, (f"{ctor:#x}",))[0], items)
    raise DecodeError(f"constructor {code:#x}")


def _array_items(body: _Cursor, ctor: int, count: int) -> list[Value]:
    out = []
    for _ in range(count):
        sub = _Cursor(bytes((ctor,)) + body.data[body.pos :])
        out.append(_value(sub))
        body.pos += sub.pos - 1
    return out


def decode_all(data: bytes) -> list[Value]:
    c = _Cursor(bytes(data))
    out = []
    while c.pos < len(c.data):
        out.append(_value(c))
    return out


def descriptor_code(descriptor: Value) -> int | None:
    if descriptor is None:
        return None
    if descriptor[0] == "ulong":
        return int(descriptor[1])
    if descriptor[0] == "symbol":
        return _SYMBOLIC.get(descriptor[1])
    return None


def sections(data: bytes) -> list[tuple[int, Value]]:
    """A message as (section code, section value) pairs; anything else is a DecodeError."""
    out = []
    for v in decode_all(data):
        if v is None or v[0] != "described":
            raise DecodeError("not a section")
        code = descriptor_code(v[1])
        if code is None:
            raise DecodeError(f"descriptor {v[1]!r}")
        out.append((code, v[2]))
    return out
