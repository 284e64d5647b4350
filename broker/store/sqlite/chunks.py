"""A stream chunk row's encoding: each record's exchange, routing key, properties and body
lengths (`sizes`, little-endian uint32, four per record) and the four concatenated per record
(`data`). The reader takes a record by offsets into `data`, as osiris reads a chunk."""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence

#: One stored message: (seq, properties, body, exchange, routing_key); properties are
#: StoredMessage.props.
Row = tuple[int, bytes, bytes, str, str]

_SWAP = sys.byteorder != "little"


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
