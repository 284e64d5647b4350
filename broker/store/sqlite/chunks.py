"""A stream chunk row's encoding: each record's exchange, routing key, properties and body
lengths (`sizes`, little-endian uint32, four per record) and the four concatenated per record
(`data`). The reader takes a record by offsets into `data`, as osiris reads a chunk.

A chunk of stream-protocol records (no exchange, routing key or properties: the AMQP 1.0 bytes
are the body) is kept as osiris writes it instead, so a stream-protocol reader is sent `data` as
read: `data` is the entry section (each record as `size:u32` big-endian then its bytes) and
`sizes` is `WIRE` (an exchange length no record can have), the section's CRC32, then each
record's size (little-endian uint32, one per record)."""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Sequence

#: One stored message: (seq, properties, body, exchange, routing_key); properties are
#: StoredMessage.props.
Row = tuple[int, bytes, bytes, str, str]

_SWAP = sys.byteorder != "little"
WIRE = b"\xff\xff\xff\xff"
_CRC = struct.Struct("<I")
#: A wire chunk record's properties as a `Row` gives them: none set.
_NO_PROPS = b"\x00\x00"


def wire_sizes(crc: int, sizes: array[int]) -> bytes:
    """The `sizes` column of a wire chunk row: `WIRE`, the CRC, the record sizes."""
    raw = sizes.tobytes() if not _SWAP else _swapped(sizes)
    return WIRE + _CRC.pack(crc) + raw


def _swapped(sizes: array[int]) -> bytes:
    out = array("I", sizes)
    out.byteswap()
    return out.tobytes()


def wire_crc(raw: bytes) -> int | None:
    """A wire chunk row's CRC (None: a row of the record layout)."""
    if raw[:4] != WIRE:
        return None
    return int(_CRC.unpack_from(raw, 4)[0])


def index_sizes(raw: bytes) -> array[int]:
    """Each record's exchange, routing key, properties and body lengths, four per record, whatever
    the row's layout."""
    if raw[:4] != WIRE:
        return sizes_of(raw)
    bodies = sizes_of(raw[8:])
    out = array("I", (0, 0, len(_NO_PROPS), 0)) * len(bodies)
    out[3::4] = bodies
    return out


def encode_chunk(
    records: Sequence[tuple[int, bytes, bytes, bytes, bytes]],
) -> tuple[bytes, bytes, int]:
    """(sizes, data, body bytes) of a chunk row from (seq, properties, body, exchange, routing key)
    records at consecutive positions."""
    sizes = array("I")
    parts: list[bytes] = []
    body_bytes = 0
    for _seq, props, body, x, rk in records:
        sizes.extend((len(x), len(rk), len(props), len(body)))
        parts += (x, rk, props, body)
        body_bytes += len(body)
    if _SWAP:
        sizes.byteswap()
    return sizes.tobytes(), b"".join(parts), body_bytes


def sizes_of(raw: bytes) -> array[int]:
    sizes = array("I")
    sizes.frombytes(raw)
    if _SWAP:
        sizes.byteswap()
    return sizes


def decode_chunk(first: int, raw_sizes: bytes, data: bytes, seq: int) -> list[Row]:
    """The records of a chunk row at position `seq` or later (a chunk's records mostly share their
    exchange and routing key: each distinct one is decoded once)."""
    if raw_sizes[:4] == WIRE:
        return _decode_wire(first, raw_sizes, data, seq)
    sizes = sizes_of(raw_sizes)
    out: list[Row] = []
    names: dict[bytes, str] = {}
    at = 0
    s = first
    it = iter(sizes)
    for nx, nk, np_, nb in zip(it, it, it, it, strict=True):
        if s >= seq:
            a = at + nx
            b = a + nk
            c = b + np_
            e = c + nb
            xb = data[at:a]
            x = names.get(xb)
            if x is None:
                x = names[xb] = xb.decode("utf-8", "surrogateescape")
            kb = data[a:b]
            k = names.get(kb)
            if k is None:
                k = names[kb] = kb.decode("utf-8", "surrogateescape")
            out.append((s, data[b:c], data[c:e], x, k))
            at = e
        else:
            at += nx + nk + np_ + nb
        s += 1
    return out


def _decode_wire(first: int, raw_sizes: bytes, data: bytes, seq: int) -> list[Row]:
    out: list[Row] = []
    at = 0
    s = first
    for size in sizes_of(raw_sizes[8:]):
        if s >= seq:
            out.append((s, _NO_PROPS, data[at + 4 : at + 4 + size], "", ""))
        at += 4 + size
        s += 1
    return out
