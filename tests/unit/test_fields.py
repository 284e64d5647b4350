"""The field-table codec on hostile input: deep nesting, non-finite floats, broken lengths, raw keys."""

from __future__ import annotations

import struct

import pytest

from amqpwire.fields import (
    MAX_SIZE,
    Field,
    FieldDecodeError,
    FieldTable,
    NonFiniteDouble,
    decode_array,
    field_to_python,
)

DEPTH = 10_000


def deep_table(depth: int) -> FieldTable:
    """{"k": {"k": ... {"leaf": "x"}}} nested `depth` tables deep, built without recursion."""
    table = FieldTable([("leaf", Field("longstr", b"x"))])
    for _ in range(depth):
        table = FieldTable([("k", Field("table", table))])
    return table


def deep_table_bytes(depth: int) -> bytes:
    """The wire form built independently of the encoder (inside out, lengths by hand)."""
    body = b"\x04leafS" + struct.pack(">I", 1) + b"x"
    for _ in range(depth):
        body = b"\x01kF" + struct.pack(">I", len(body)) + body
    return body


def deep_array_bytes(depth: int) -> bytes:
    body = b"I" + struct.pack(">i", 7)
    for _ in range(depth):
        body = b"A" + struct.pack(">I", len(body)) + body
    return body


def test_10000_deep_table_round_trips() -> None:
    raw = deep_table_bytes(DEPTH)
    table = FieldTable.decode(raw)
    assert table.encode() == raw
    assert table == deep_table(DEPTH)
    assert hash(table) == hash(deep_table(DEPTH))
    node = table
    for _ in range(DEPTH):
        inner = node.get("k")
        assert inner is not None and inner.type == "table"
        node = inner.value
    assert node.get("leaf") == Field("longstr", b"x")


def test_10000_deep_array_round_trips() -> None:
    raw = b"\x01aA" + struct.pack(">I", len(deep_array_bytes(DEPTH))) + deep_array_bytes(DEPTH)
    table = FieldTable.decode(raw)
    assert table.encode() == raw
    items = decode_array(deep_array_bytes(DEPTH))
    for _ in range(DEPTH):
        assert len(items) == 1 and items[0].type == "array"
        items = items[0].value
    assert items == (Field("signedint", 7),)


def test_deep_table_converts_to_python_and_repr_does_not_crash() -> None:
    value = deep_table(DEPTH).to_python()
    for _ in range(DEPTH):
        value = value["k"]
    assert value == {"leaf": "x"}
    assert "FieldTable(" in repr(deep_table(DEPTH))


def test_deep_tables_that_differ_at_the_bottom_are_unequal() -> None:
    other = FieldTable.decode(
        deep_table_bytes(DEPTH).replace(b"leafS\x00\x00\x00\x01x", b"leafS\x00\x00\x00\x01y")
    )
    assert other != deep_table(DEPTH)


@pytest.mark.parametrize(
    ("tag", "fmt", "value"),
    [
        (b"d", ">d", float("nan")),
        (b"d", ">d", float("inf")),
        (b"d", ">d", float("-inf")),
        (b"f", ">f", float("nan")),
        (b"f", ">f", float("inf")),
        (b"f", ">f", float("-inf")),
    ],
)
def test_non_finite_floats_raise(tag: bytes, fmt: str, value: float) -> None:
    raw = b"\x01v" + tag + struct.pack(fmt, value)
    with pytest.raises(NonFiniteDouble):
        FieldTable.decode(raw)
    nested = b"\x01tF" + struct.pack(">I", len(raw)) + raw
    with pytest.raises(NonFiniteDouble):
        FieldTable.decode(nested)
    in_array = b"\x01aA" + struct.pack(">I", len(raw) - 2) + raw[2:]
    with pytest.raises(NonFiniteDouble):
        FieldTable.decode(in_array)
    assert issubclass(NonFiniteDouble, FieldDecodeError)
    kept = FieldTable.decode(raw, allow_non_finite=True).get("v")
    assert kept is not None and kept.type == ("double" if tag == b"d" else "float")


def test_finite_floats_decode() -> None:
    raw = b"\x01dd" + struct.pack(">d", 1.5) + b"\x01ff" + struct.pack(">f", -2.0)
    assert FieldTable.decode(raw) == FieldTable([("d", Field("double", 1.5)), ("f", Field("float", -2.0))])


@pytest.mark.parametrize(
    "raw",
    [
        b"\x05ab",  # name runs past the table
        b"\x01a",  # no type after the name
        b"\x01aS\x00\x00",  # truncated length
        b"\x01aS\x00\x00\x00\x05abc",  # string runs past the table
        b"\x01aI\x00\x00",  # truncated int
        b"\x01aD\x01\x00",  # truncated decimal
        b"\x01at",  # truncated bool
        b"\x01aZ",  # unknown type
        # an inner table whose length claims more than the outer table holds
        b"\x01oF\x00\x00\x00\x08\x01iF\x00\x00\x00\x10\x00",
        # an inner table whose own entry runs past the inner length (but not past the outer)
        b"\x01oF\x00\x00\x00\x04\x01aS\x00\x00\x00\x01x",
        # an array item runs past the array
        b"\x01aA\x00\x00\x00\x03I\x00\x00\x00\x01",
    ],
)
def test_broken_lengths_raise_field_decode_error(raw: bytes) -> None:
    with pytest.raises(FieldDecodeError):
        FieldTable.decode(raw)


def test_size_limit() -> None:
    raw = b"\x01aS" + struct.pack(">I", 100) + b"x" * 100
    assert FieldTable.decode(raw, limit=len(raw)).get("a") == Field("longstr", b"x" * 100)
    with pytest.raises(FieldDecodeError, match="limit"):
        FieldTable.decode(raw, limit=len(raw) - 1)
    assert MAX_SIZE >= 1 << 20


def test_non_utf8_key_round_trips() -> None:
    raw = b"\x03\xff\xfeaS\x00\x00\x00\x01v"
    table = FieldTable.decode(raw)
    ((name, value),) = list(table)
    assert value == Field("longstr", b"v")
    assert name.encode("utf-8", "surrogateescape") == b"\xff\xfea"
    assert table.encode() == raw
    assert field_to_python(Field("table", table)) == {name: "v"}


def test_every_type_round_trips() -> None:
    table = FieldTable(
        [
            ("b", Field("byte", -3)),
            ("B", Field("unsignedbyte", 250)),
            ("s", Field("short", -300)),
            ("u", Field("unsignedshort", 60000)),
            ("I", Field("signedint", -70000)),
            ("i", Field("unsignedint", 4_000_000_000)),
            ("l", Field("long", -(2**40))),
            ("T", Field("timestamp", 1_700_000_000)),
            ("f", Field("float", 0.5)),
            ("d", Field("double", -0.25)),
            ("D", Field("decimal", (2, 12345))),
            ("S", Field("longstr", b"text")),
            ("x", Field("binary", b"\x00\x01")),
            ("t", Field("bool", True)),
            ("V", Field("void", None)),
            (
                "A",
                Field(
                    "array",
                    (Field("longstr", b"a"), Field("table", FieldTable([("z", Field("bool", False))]))),
                ),
            ),
            ("F", Field("table", FieldTable([("n", Field("array", ()))]))),
        ]
    )
    assert FieldTable.decode(table.encode()) == table
    assert FieldTable.decode(memoryview(table.encode())) == table


def test_name_longer_than_255_bytes_is_refused_at_encoding() -> None:
    with pytest.raises(ValueError, match="255"):
        FieldTable([("n" * 256, Field("void", None))]).encode()
