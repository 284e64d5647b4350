"""Typed AMQP field tables, decoded the way RabbitMQ's `rabbit_binary_parser` decodes them.

Routing depends on the wire *type* of header values, not just their value: the headers exchange
compares type classes, and on RabbitMQ 3.10 the consistent-hash exchange hashes the `{Type, Value}`
tuple, so `5` sent as a signed 32-bit int and `5` sent as a byte land in different queues. Python
clients' decoded dicts lose that, hence this module keeps `(type atom, value)` pairs.

Type atoms and value representations (as in rabbit_binary_parser):
  S longstr bytes | I signedint int | D decimal (scale, value) | T timestamp int | F table FieldTable
  A array tuple[Field] | b byte | B unsignedbyte | s short | u unsignedshort | i unsignedint
  l long (also read from py-amqp's L) | f float | d double | x binary bytes | V void None | t bool
"""

from __future__ import annotations

import calendar
import datetime as _dt
import decimal as _decimal
import math
import struct
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

#: Largest table body decoded (bytes): far above any frame_max, it bounds what one value can cost.
MAX_SIZE = 1 << 27


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
        if not isinstance(other, FieldTable):
            return False
        if self is other:
            return True
        try:
            return self._entries == other._entries
        except RecursionError:  # nested deeper than the interpreter's stack: compare flat
            return _flatten(self) == _flatten(other)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(_flatten(self))
        return self._hash

    def __repr__(self) -> str:
        try:
            return f"FieldTable({list(self._entries)!r})"
        except RecursionError:
            return f"FieldTable(<{len(self._entries)} entries, nested too deep to show>)"

    def with_value(self, name: str, value: Field) -> FieldTable:
        """`rabbit_misc:set_table_value`: the first entry named `name` replaced (or one appended),
        then the entries sorted by their names' wire bytes, as Erlang sorts binaries."""
        entries = list(self._entries)
        for i, (key, _old) in enumerate(entries):
            if key == name:
                entries[i] = (name, value)
                break
        else:
            entries.append((name, value))
        entries.sort(key=_name_key)
        return FieldTable(entries)

    def get(self, name: str) -> Field | None:
        """First entry with this name, as `rabbit_misc:table_lookup` returns it."""
        for key, value in self._entries:
            if key == name:
                return value
        return None

    def to_python(self) -> dict[str, Any]:
        """Plain values, for display and for clients' APIs (the last duplicate wins)."""
        result: dict[str, Any] = field_to_python(Field("table", self))
        return result

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
        _encode_container(self, out)
        return bytes(out)

    @classmethod
    def decode(
        cls, data: bytes | bytearray | memoryview, *, allow_non_finite: bool = False, limit: int = MAX_SIZE
    ) -> FieldTable:
        """Decode a table body (without the 32-bit length). Raises `FieldDecodeError` on bad input.

        A NaN or infinite double/float raises `NonFiniteDouble` as RabbitMQ 3.10.8's parser fails on
        them, unless `allow_non_finite`.
        """
        table = _decode_container(data, True, allow_non_finite, limit)
        assert isinstance(table, FieldTable)
        return table


def name_bytes(name: str) -> bytes:
    """A field name's wire bytes. Names are bytes to RabbitMQ; one that is not UTF-8 was decoded with
    `surrogateescape`, so this gives back exactly the bytes received."""
    return name.encode("utf-8", "surrogateescape")


def _name_key(entry: tuple[str, Field]) -> bytes:
    return entry[0].encode("utf-8", "surrogateescape")


def decode_array(
    data: bytes | bytearray | memoryview, *, allow_non_finite: bool = False, limit: int = MAX_SIZE
) -> tuple[Field, ...]:
    """Decode an array body (without the 32-bit length) into its items."""
    items = _decode_container(data, False, allow_non_finite, limit)
    assert isinstance(items, tuple)
    return items


class FieldDecodeError(ValueError):
    """The table bytes are malformed (the broker answers 502 SYNTAX_ERROR / 501 FRAME_ERROR)."""


class NonFiniteDouble(FieldDecodeError):
    """A NaN or infinite float/double: Erlang has no such floats, so RabbitMQ 3.10.8's parser fails and
    the connection closes with 541 INTERNAL_ERROR."""


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
_U32 = struct.Struct(">I")


_TAG_S, _TAG_X, _TAG_F, _TAG_A, _TAG_T, _TAG_D, _TAG_V = b"SxFAtDV"
_FLOAT_BY_TAG: dict[int, tuple[str, struct.Struct]] = {
    ord("f"): ("float", struct.Struct(">f")),
    ord("d"): ("double", struct.Struct(">d")),
}
_FIXED_BY_TAG.update(_FLOAT_BY_TAG)
#: 'L' (py-amqp's tag for integers beyond 32 bits) is decoded as a signed 64-bit long, as
#: rabbit_binary_parser does for tables and arrays; re-encoding writes it as 'l'.
_FIXED_BY_TAG[ord("L")] = ("long", struct.Struct(">q"))


def _decode_container(
    data: bytes | bytearray | memoryview, is_table: bool, allow_non_finite: bool, limit: int
) -> FieldTable | tuple[Field, ...]:
    """Decode a table or array body with an explicit stack instead of recursion.

    RabbitMQ accepts nesting 10,000 deep, deeper than Python's recursion limit. Each nested table or
    array pushes its parent's state (entries so far, end offset, kind, entry name) and pops it back
    when its own end is reached; every length is checked against the enclosing container's end.
    """
    if len(data) > limit:
        raise FieldDecodeError(f"field table of {len(data)} bytes exceeds the limit of {limit} bytes")
    if not isinstance(data, bytes):
        data = bytes(data)
    fixed_by_tag = _FIXED_BY_TAG
    u32 = _U32.unpack_from
    stack: list[tuple[list[Any], int, bool, str]] = []
    entries: list[Any] = []
    end = len(data)
    pos = 0
    table = is_table
    name = ""
    while True:
        if pos >= end:
            if not stack:
                break
            done = Field("table", FieldTable(entries)) if table else Field("array", tuple(entries))
            entries, end, table, name = stack.pop()
            entries.append((name, done) if table else done)
            continue
        if table:
            size = data[pos]
            pos += 1 + size
            if pos > end:
                raise FieldDecodeError("field name runs past the table")
            name = data[pos - size : pos].decode("utf-8", "surrogateescape")
            if pos >= end:
                raise FieldDecodeError("missing field type")
        tag = data[pos]
        pos += 1
        if tag in (_TAG_S, _TAG_X, _TAG_F, _TAG_A):
            if pos + 4 > end:
                raise FieldDecodeError("truncated length")
            (size,) = u32(data, pos)
            pos += 4
            if pos + size > end:
                raise FieldDecodeError("value runs past the table")
            if tag in (_TAG_F, _TAG_A):
                stack.append((entries, end, table, name))
                entries = []
                end = pos + size
                table = tag == _TAG_F
                continue
            value = Field("longstr" if tag == _TAG_S else "binary", data[pos : pos + size])
            pos += size
        elif (fixed := fixed_by_tag.get(tag)) is not None:
            atom, st = fixed
            if pos + st.size > end:
                raise FieldDecodeError(f"truncated {atom}")
            number = st.unpack_from(data, pos)[0]
            pos += st.size
            if tag in _FLOAT_BY_TAG and not allow_non_finite and not math.isfinite(number):
                raise NonFiniteDouble(f"{atom} {number} in a field table (Erlang has no such float)")
            value = Field(atom, number)
        elif tag == _TAG_T:
            if pos + 1 > end:
                raise FieldDecodeError("truncated bool")
            value = Field("bool", data[pos] != 0)
            pos += 1
        elif tag == _TAG_D:
            if pos + 5 > end:
                raise FieldDecodeError("truncated decimal")
            value = Field("decimal", (data[pos], u32(data, pos + 1)[0]))
            pos += 5
        elif tag == _TAG_V:
            value = Field("void", None)
        else:
            raise FieldDecodeError(f"unknown field type {chr(tag)!r}")
        entries.append((name, value) if table else value)
    return FieldTable(entries) if is_table else tuple(entries)


def _encode_container(root: FieldTable, out: bytearray) -> None:
    """Append a table body to `out`, iteratively (dead-lettering re-encodes tables of any depth).

    A nested table or array gets a 4-byte length placeholder that is filled in once its last item
    has been written.
    """
    u32 = _U32.pack
    stack: list[tuple[Iterator[Any], bool, int]] = [(iter(root), True, -1)]
    while stack:
        items, table, length_at = stack[-1]
        for item in items:
            if table:
                name, (atom, inner) = item
                try:
                    raw = name.encode()
                except UnicodeEncodeError:  # a non-UTF-8 name received from a client goes back as it came
                    raw = name_bytes(name)
                if len(raw) > 255:
                    raise ValueError(f"field name of {len(raw)} bytes (at most 255)")
                out.append(len(raw))
                out += raw
            else:
                atom, inner = item
            if atom == "longstr":
                out.append(_TAG_S)
                out += u32(len(inner))
                out += inner
            elif atom == "table" or atom == "array":
                out.append(_TAG_F if atom == "table" else _TAG_A)
                stack.append((iter(inner), atom == "table", len(out)))
                out += b"\0\0\0\0"
                break
            else:
                _encode_scalar(atom, inner, out)
        else:
            stack.pop()
            if length_at >= 0:
                size = len(out) - length_at - 4
                if size > 0xFFFFFFFF:
                    raise ValueError(f"field table of {size} bytes does not fit its 32-bit length")
                _U32.pack_into(out, length_at, size)


def _encode_scalar(atom: str, raw: Any, out: bytearray) -> None:
    fixed = _INT_TYPES.get(atom)
    if fixed is not None:
        tag, fmt = fixed
        out.append(ord(tag))
        out += struct.pack(fmt, raw)
    elif atom in ("longstr", "binary"):
        out.append(_TAG_S if atom == "longstr" else _TAG_X)
        out += _U32.pack(len(raw))
        out += raw
    elif atom == "bool":
        out.append(_TAG_T)
        out.append(1 if raw else 0)
    elif atom == "float":
        out.append(ord("f"))
        out += struct.pack(">f", raw)
    elif atom == "double":
        out.append(ord("d"))
        out += struct.pack(">d", raw)
    elif atom == "decimal":
        scale, digits = raw
        out.append(_TAG_D)
        out.append(scale)
        out += _U32.pack(digits)
    elif atom == "void":
        out.append(_TAG_V)
    else:
        raise ValueError(f"cannot encode field type {atom!r}")


def _flatten(root: FieldTable) -> tuple[Any, ...]:
    """The table as one flat token sequence (container sizes mark nesting): equal tables, and only
    they, give equal sequences, so equality and hashing need no recursion."""
    tokens: list[Any] = [len(root)]
    stack: list[tuple[Iterator[Any], bool]] = [(iter(root), True)]
    while stack:
        items, table = stack[-1]
        for item in items:
            name, value = item if table else (None, item)
            atom, inner = value
            if atom == "table" or atom == "array":
                tokens.append((name, atom, len(inner)))
                stack.append((iter(inner), atom == "table"))
                break
            tokens.append((name, atom, inner))
        else:
            stack.pop()
    return tuple(tokens)


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
    """The plain Python value (tables -> dict, arrays -> list), built without recursion."""
    atom, raw = value
    if atom != "table" and atom != "array":
        return _scalar_to_python(atom, raw)
    root: Any = {} if atom == "table" else []
    stack: list[tuple[Iterator[Any], Any]] = [(iter(raw), root)]
    while stack:
        items, target = stack[-1]
        for item in items:
            name, (inner_atom, inner) = item if isinstance(target, dict) else (None, item)
            if inner_atom == "table" or inner_atom == "array":
                child: Any = {} if inner_atom == "table" else []
                stack.append((iter(inner), child))
            else:
                child = _scalar_to_python(inner_atom, inner)
            if isinstance(target, dict):
                target[name] = child
            else:
                target.append(child)
            if inner_atom == "table" or inner_atom == "array":
                break
        else:
            stack.pop()
    return root


def _scalar_to_python(atom: str, raw: Any) -> Any:
    if atom == "longstr":
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw
    if atom == "decimal":
        scale, digits = raw
        return _decimal.Decimal(digits).scaleb(-scale)
    return raw
