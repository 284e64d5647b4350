"""A stream chunk row's encoding: each record's exchange, routing key, properties and body
lengths (`sizes`, little-endian uint32, four per record) and the four concatenated per record
(`data`). The reader takes a record by offsets into `data`, as osiris reads a chunk."""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterator, Sequence

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


def decode_chunk(first: int, raw_sizes: bytes, data: bytes, seq: int) -> Iterator[Row]:
    """The records of a chunk row at position `seq` or later."""
    sizes = sizes_of(raw_sizes)
    view = memoryview(data)
    at = 0
    s = first
    for i in range(0, len(sizes), 4):
        nx, nk, np_, nb = sizes[i], sizes[i + 1], sizes[i + 2], sizes[i + 3]
        if s >= seq:
            a = at + nx
            b = a + nk
            c = b + np_
            yield (
                s,
                bytes(view[b:c]),
                bytes(view[c : c + nb]),
                bytes(view[at:a]).decode("utf-8", "surrogateescape"),
                bytes(view[a:b]).decode("utf-8", "surrogateescape"),
            )
        at += nx + nk + np_ + nb
        s += 1
