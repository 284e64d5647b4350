"""Typed AMQP field tables, decoded the way RabbitMQ's `rabbit_binary_parser` decodes them.

Routing depends on the wire *type* of header values, not just their value: the headers exchange
compares type classes, and on RabbitMQ 3.10 the consistent-hash exchange hashes the `{Type, Value}`
tuple, so `5` sent as a signed 32-bit int and `5` sent as a byte land in different queues. Python
clients' decoded dicts lose that, hence this module keeps `(type atom, value)` pairs.

Type atoms and value representations (as in rabbit_binary_parser):
  S longstr bytes | I signedint int | D decimal (scale, value) | T timestamp int | F table FieldTable
  A array tuple[Field] | b byte | B unsignedbyte | s short | u unsignedshort | i unsignedint
  l long | f float | d double | x binary bytes | V void None | t bool
"""

from __future__ import annotations

import calendar
import datetime as _dt
import decimal as _decimal
import struct
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple


class Field(NamedTuple):
    """One typed value: `type` is RabbitMQ's type atom name, `value` its Erlang-shaped value."""

    type: str
    value: Any


class FieldTable:
    """An ordered, immutable, hashable AMQP table of `(name, Field)` entries.

    Order and duplicates are kept as received, because RabbitMQ looks headers up with the first
    matching entry and stores tables as lists.
    """

    __slots__ = ("_entries", "_hash")

    def __init__(self, entries: Iterable[tuple[str, Field]] = ()) -> None:
        self._entries: tuple[tuple[str, Field], ...] = tuple(entries)
        self._hash: int | None = None

    def __iter__(self) -> Iterator[tuple[str, Field]]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FieldTable) and self._entries == other._entries

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self._entries)
        return self._hash

    def __repr__(self) -> str:
        return f"FieldTable({list(self._entries)!r})"

    def get(self, name: str) -> Field | None:
        """First entry with this name, as `rabbit_misc:table_lookup` returns it."""
        for key, value in self._entries:
            if key == name:
                return value
        return None

    def to_python(self) -> dict[str, Any]:
        """Plain values, for display and for clients' APIs (the last duplicate wins)."""
        return {key: field_to_python(value) for key, value in self._entries}

    @classmethod
    def from_python(cls, mapping: Mapping[str, Any] | FieldTable | None) -> FieldTable:
        """Type plain Python values as pika encodes them (str -> longstr, int -> signedint/long...).

        A value that is already a `Field` keeps its explicit type; that is how a caller states that a
        client sends e.g. a byte or a short.
        """
        if mapping is None:
            return cls()
        if isinstance(mapping, FieldTable):
            return mapping
        return cls((str(name), infer_field(value)) for name, value in mapping.items())

    def encode(self) -> bytes:
        """Wire form without the leading 32-bit length."""
        out = bytearray()
        for name, value in self._entries:
            raw = name.encode("utf-8")
            out.append(len(raw))
            out += raw
            _encode_field(value, out)
        return bytes(out)

    @classmethod
    def decode(cls, data: bytes | memoryview) -> FieldTable:
        """Decode a table body (without the 32-bit length). Raises `FieldDecodeError` on bad input."""
        view = memoryview(data)
        entries: list[tuple[str, Field]] = []
        pos = 0
        end = len(view)
        while pos < end:
            name_len = view[pos]
            pos += 1
            if pos + name_len > end:
                raise FieldDecodeError("field name runs past the table")
            name = bytes(view[pos : pos + name_len]).decode("utf-8", errors="surrogateescape")
            pos += name_len
            value, pos = _decode_field(view, pos, end)
            entries.append((name, value))
        return cls(entries)


class FieldDecodeError(ValueError):
    """The table bytes are malformed (the broker answers 502 SYNTAX_ERROR / 501 FRAME_ERROR)."""


_INT_TYPES = {
    "byte": ("b", ">b"),
    "unsignedbyte": ("B", ">B"),
    "short": ("s", ">h"),
    "unsignedshort": ("u", ">H"),
    "signedint": ("I", ">i"),
    "unsignedint": ("i", ">I"),
    "long": ("l", ">q"),
    "timestamp": ("T", ">Q"),
}
_FIXED_BY_TAG: dict[int, tuple[str, struct.Struct]] = {
    ord(tag): (atom, struct.Struct(fmt)) for atom, (tag, fmt) in _INT_TYPES.items()
}
_FIXED_BY_TAG[ord("f")] = ("float", struct.Struct(">f"))
_FIXED_BY_TAG[ord("d")] = ("double", struct.Struct(">d"))
_U32 = struct.Struct(">I")


def _decode_field(view: memoryview, pos: int, end: int) -> tuple[Field, int]:
    if pos >= end:
        raise FieldDecodeError("missing field type")
    tag = view[pos]
    pos += 1
    fixed = _FIXED_BY_TAG.get(tag)
    if fixed is not None:
        atom, st = fixed
        if pos + st.size > end:
            raise FieldDecodeError(f"truncated {atom}")
        return Field(atom, st.unpack_from(view, pos)[0]), pos + st.size
    if tag in (0x53, 0x78, 0x46, 0x41):  # S x F A: 32-bit length prefixed
        if pos + 4 > end:
            raise FieldDecodeError("truncated length")
        (length,) = _U32.unpack_from(view, pos)
        pos += 4
        if pos + length > end:
            raise FieldDecodeError("value runs past the table")
        chunk = view[pos : pos + length]
        pos += length
        if tag == 0x53:
            return Field("longstr", bytes(chunk)), pos
        if tag == 0x78:
            return Field("binary", bytes(chunk)), pos
        if tag == 0x46:
            return Field("table", FieldTable.decode(chunk)), pos
        items: list[Field] = []
        apos = 0
        while apos < length:
            item, apos = _decode_field(chunk, apos, length)
            items.append(item)
        return Field("array", tuple(items)), pos
    if tag == 0x74:  # t
        if pos + 1 > end:
            raise FieldDecodeError("truncated bool")
        return Field("bool", view[pos] != 0), pos + 1
    if tag == 0x44:  # D
        if pos + 5 > end:
            raise FieldDecodeError("truncated decimal")
        scale = view[pos]
        (value,) = _U32.unpack_from(view, pos + 1)
        return Field("decimal", (scale, value)), pos + 5
    if tag == 0x56:  # V
        return Field("void", None), pos
    raise FieldDecodeError(f"unknown field type {chr(tag)!r}")


def _encode_field(value: Field, out: bytearray) -> None:
    atom, raw = value
    fixed = _INT_TYPES.get(atom)
    if fixed is not None:
        tag, fmt = fixed
        out.append(ord(tag))
        out += struct.pack(fmt, raw)
    elif atom in ("longstr", "binary"):
        out.append(ord("S") if atom == "longstr" else ord("x"))
        out += _U32.pack(len(raw))
        out += raw
    elif atom == "table":
        body = raw.encode()
        out.append(ord("F"))
        out += _U32.pack(len(body))
        out += body
    elif atom == "array":
        body_buf = bytearray()
        for item in raw:
            _encode_field(item, body_buf)
        out.append(ord("A"))
        out += _U32.pack(len(body_buf))
        out += body_buf
    elif atom == "bool":
        out.append(ord("t"))
        out.append(1 if raw else 0)
    elif atom == "float":
        out.append(ord("f"))
        out += struct.pack(">f", raw)
    elif atom == "double":
        out.append(ord("d"))
        out += struct.pack(">d", raw)
    elif atom == "decimal":
        scale, digits = raw
        out.append(ord("D"))
        out.append(scale)
        out += _U32.pack(digits)
    elif atom == "void":
        out.append(ord("V"))
    else:
        raise ValueError(f"cannot encode field type {atom!r}")


def infer_field(value: Any) -> Field:
    """The field pika would put on the wire for a plain Python value."""
    if isinstance(value, Field):
        return value
    if isinstance(value, str):
        return Field("longstr", value.encode("utf-8"))
    if isinstance(value, bool):
        return Field("bool", value)
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return Field("signedint", value)
        if -(2**63) <= value < 2**63:
            return Field("long", value)
        raise ValueError(f"integer {value} does not fit an AMQP long")
    if isinstance(value, bytes | bytearray):
        return Field("binary", bytes(value))
    if isinstance(value, float):
        return Field("double", value)
    if isinstance(value, _decimal.Decimal):
        # pika normalises first: Decimal("51.40") goes out as scale 1, value 514
        value = value.normalize()
        exponent = int(value.as_tuple().exponent)
        if exponent < 0:
            return Field("decimal", (-exponent, int(value.scaleb(-exponent))))
        return Field("decimal", (0, int(value)))
    if isinstance(value, _dt.datetime):
        return Field("timestamp", calendar.timegm(value.utctimetuple()))  # as pika encodes it
    if value is None:
        return Field("void", None)
    if isinstance(value, Mapping | FieldTable):
        return Field("table", FieldTable.from_python(value))
    if isinstance(value, list | tuple):
        return Field("array", tuple(infer_field(item) for item in value))
    raise TypeError(f"no AMQP field type for {type(value).__name__}")


def field_to_python(value: Field) -> Any:
    atom, raw = value
    if atom == "table":
        return raw.to_python()
    if atom == "array":
        return [field_to_python(item) for item in raw]
    if atom == "longstr":
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw
    if atom == "decimal":
        scale, digits = raw
        return _decimal.Decimal(digits).scaleb(-scale)
    return raw
