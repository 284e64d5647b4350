"""The osiris chunk: how a stream's log holds records and how a Deliver frame carries them.

Layout (osiris 1.3.1, the version RabbitMQ 3.10.8 ships), all big-endian, a 48-byte header:

    magic:4 = 5 | version:4 = 0 | chunk type:8 | entries:16 | records:32 | timestamp:i64 |
    epoch:64 | first offset (chunk id):64 | data CRC32:32 | data length:32 | trailer length:32 |
    reserved:32

then the entries (`data length` bytes) and the trailer. An entry is simple (`0:1 size:31` then the
record) or a sub-batch (`1:1 compression:3 reserved:4 records:16 uncompressed:32 size:32` then the
batch as the publisher sent it). The CRC is zlib's CRC32 of the entry data only (`erlang:crc32`).

Chunk types: 0 user data, 1 tracking delta (a consumer offset stored with store-offset; it takes
an offset in the stream), 2 tracking snapshot (opens each segment). The trailer of a user chunk
holds the publisher sequences of the named publishers that wrote it. A subscriber with the default
chunk selector (`user_data`) is sent user chunks only, without their trailer (the header still
states its length); with `chunk_selector=all` every chunk, trailer included.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from broker.streamproto.frames import Reader, SubBatch

HEADER = struct.Struct(">BBHIqQQIIII")
HEADER_SIZE = HEADER.size  # 48
MAGIC_VERSION = 0x50
USER = 0
TRACKING_DELTA = 1
TRACKING_SNAPSHOT = 2
_SIMPLE = struct.Struct(">I")
_BATCH = struct.Struct(">BHII")
TRACK_SEQUENCE = 0
TRACK_OFFSET = 1

Entry = bytes | SubBatch


def encode_entries(entries: Iterable[Entry]) -> tuple[bytes, int, int]:
    """The data section: (bytes, number of entries, number of records)."""
    parts: list[bytes] = []
    n_entries = n_records = 0
    for e in entries:
        n_entries += 1
        if isinstance(e, SubBatch):
            parts.append(_BATCH.pack(0x80 | (e.compression << 4), e.count, e.uncompressed_size, len(e.data)))
            parts.append(e.data)
            n_records += e.count
        else:
            parts.append(_SIMPLE.pack(len(e)))
            parts.append(e)
            n_records += 1
    return b"".join(parts), n_entries, n_records


def encode_header(
    *,
    chunk_type: int,
    num_entries: int,
    num_records: int,
    timestamp: int,
    epoch: int,
    first_offset: int,
    data: bytes,
    trailer_length: int,
) -> bytes:
    return HEADER.pack(
        MAGIC_VERSION,
        chunk_type,
        num_entries,
        num_records,
        timestamp,
        epoch,
        first_offset,
        zlib.crc32(data),
        len(data),
        trailer_length,
        0,
    )


def tracking_entries(items: Sequence[tuple[int, str, int]]) -> bytes:
    """Tracking records: (type, id, value) as `type:8 id size:8 id value:64` each."""
    out = []
    for kind, ident, value in items:
        raw = ident.encode()
        out.append(struct.pack(">BB", kind, len(raw)) + raw + struct.pack(">Q", value))
    return b"".join(out)


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk as the log keeps it. `data` is the encoded entry section (`encode_entries`)."""

    chunk_type: int
    first_offset: int
    timestamp: int
    epoch: int
    num_entries: int
    num_records: int
    data: bytes
    trailer: bytes = b""
    crc: int | None = None  # the CRC32 of `data` when known (computed from it otherwise)

    @classmethod
    def of(
        cls,
        entries: Iterable[Entry],
        *,
        first_offset: int,
        timestamp: int,
        epoch: int = 1,
        chunk_type: int = USER,
        trailer: bytes = b"",
    ) -> Chunk:
        data, n_entries, n_records = encode_entries(entries)
        return cls(chunk_type, first_offset, timestamp, epoch, n_entries, n_records, data, trailer)

    def header(self) -> bytes:
        data = self.data
        return HEADER.pack(
            MAGIC_VERSION,
            self.chunk_type,
            self.num_entries,
            self.num_records,
            self.timestamp,
            self.epoch,
            self.first_offset,
            zlib.crc32(data) if self.crc is None else self.crc,
            len(data),
            len(self.trailer),
            0,
        )

    def wire(self, *, with_trailer: bool) -> bytes:
        """The bytes a Deliver frame carries."""
        out = self.header() + self.data
        return out + self.trailer if with_trailer else out

    @property
    def next_offset(self) -> int:
        return self.first_offset + self.num_records


@dataclass(frozen=True, slots=True)
class DecodedChunk:
    chunk_type: int
    num_entries: int
    num_records: int
    timestamp: int
    epoch: int
    first_offset: int
    crc: int
    data_length: int
    trailer_length: int
    entries: tuple[Entry, ...]
    trailer: bytes

    @property
    def crc_ok(self) -> bool:
        return zlib.crc32(self.data) == self.crc

    @property
    def data(self) -> bytes:
        return encode_entries(self.entries)[0]

    def records(self) -> list[tuple[int, bytes]]:
        """(offset, record) for each record of an uncompressed chunk, in order."""
        out = []
        offset = self.first_offset
        for e in self.entries:
            if isinstance(e, SubBatch):
                for rec in e.records():
                    out.append((offset, rec))
                    offset += 1
            else:
                out.append((offset, e))
                offset += 1
        return out


def decode(chunk: bytes) -> DecodedChunk:
    """A chunk as a Deliver frame carries it (the trailer may be absent)."""
    if len(chunk) < HEADER_SIZE:
        raise ValueError("short chunk")
    mv, ctype, n_entries, n_records, ts, epoch, first, crc, dlen, tlen, _ = HEADER.unpack_from(chunk)
    if mv != MAGIC_VERSION:
        raise ValueError(f"magic/version {mv:#x}")
    r = Reader(chunk[HEADER_SIZE : HEADER_SIZE + dlen])
    entries: list[Entry] = []
    for _ in range(n_entries):
        first_byte = r.data[r.pos]
        if first_byte & 0x80:
            b, count, uncompressed, size = _BATCH.unpack(r.raw(_BATCH.size))
            entries.append(SubBatch((b >> 4) & 0x7, count, uncompressed, r.raw(size)))
        else:
            entries.append(r.raw(r.u32() & 0x7FFFFFFF))
    trailer = bytes(chunk[HEADER_SIZE + dlen : HEADER_SIZE + dlen + tlen])
    return DecodedChunk(
        ctype, n_entries, n_records, ts, epoch, first, crc, dlen, tlen, tuple(entries), trailer
    )
