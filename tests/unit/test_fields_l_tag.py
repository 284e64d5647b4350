"""The 'L' field tag (py-amqp writes integers beyond 32 bits with it): rabbit_binary_parser reads it
as a signed 64-bit long in tables and arrays, and rabbit_binary_generator writes a long back as 'l'."""

from __future__ import annotations

import struct

import pytest

from amqpwire.fields import Field, FieldDecodeError, FieldTable, decode_array


def entry(name: bytes, tag: bytes, payload: bytes) -> bytes:
    return bytes([len(name)]) + name + tag + payload


def test_L_in_a_table_is_a_signed_long() -> None:
    raw = entry(b"big", b"L", struct.pack(">q", 2**40)) + entry(b"neg", b"L", struct.pack(">q", -(2**40)))
    table = FieldTable.decode(raw)
    assert list(table) == [("big", Field("long", 2**40)), ("neg", Field("long", -(2**40)))]


def test_L_with_the_top_bit_set_is_negative_not_unsigned() -> None:
    table = FieldTable.decode(entry(b"x", b"L", b"\xff" * 8))
    assert table.get("x") == Field("long", -1)


def test_L_in_an_array_and_a_nested_table() -> None:
    arr = b"L" + struct.pack(">q", 7) + b"I" + struct.pack(">i", 1)
    inner = entry(b"n", b"L", struct.pack(">q", 2**33))
    raw = entry(b"a", b"A", struct.pack(">I", len(arr)) + arr) + entry(
        b"t", b"F", struct.pack(">I", len(inner)) + inner
    )
    table = FieldTable.decode(raw)
    assert table.get("a") == Field("array", (Field("long", 7), Field("signedint", 1)))
    assert table.get("t") == Field("table", FieldTable([("n", Field("long", 2**33))]))
    assert decode_array(arr) == (Field("long", 7), Field("signedint", 1))


def test_L_is_written_back_as_l() -> None:
    raw = entry(b"ttl", b"L", struct.pack(">q", 2**33))
    assert FieldTable.decode(raw).encode() == entry(b"ttl", b"l", struct.pack(">q", 2**33))


def test_truncated_L_is_a_decode_error() -> None:
    with pytest.raises(FieldDecodeError):
        FieldTable.decode(entry(b"x", b"L", b"\x00" * 7))
