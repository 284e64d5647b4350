"""A stream's log as osiris lays it out: offsets, chunks, segments and retention.

Each record takes one offset; a chunk holds one record or, when the stream batches them (publishes
that arrive together, as osiris's writer batches what waits in its mailbox), several: they share
the chunk's timestamp, and `last` starts at the chunk's first offset. A segment file starts with
an 8-byte header; a new chunk is written into the current segment unless that segment already
reached the maximum segment size, in which case a new segment is opened first and begins with a
tracking snapshot chunk (60 bytes, one offset): so offsets are not contiguous across segments. A
record joining an open chunk always goes where the chunk is. Retention is
evaluated when a segment rolls, on the segments as they are once the rolling chunk is written: the
oldest segments are deleted while the total exceeds max-length-bytes (the newest always stays),
and those whose last chunk is older than max-age.

Chunk sizes were measured on RabbitMQ 3.10.8 (a segment size threshold search): a message
without properties published to exchange E with routing key K and an n-byte body takes
138 + len(E) + len(K) + n bytes (+3 from 256 bytes on: the AMQP 1.0 binary grows a longer size
field). RabbitMQ's own sizes drift by a byte or two between runs (later measurements gave 140 +
...), so offsets and retention with tiny segments can only match to that precision; the default
500 MB segments make it immaterial. Properties add their encoded size here, an estimate: on
RabbitMQ their AMQP 1.0 sections cost more (delivery_mode ~25 bytes, content_type ~30,
message_id ~23, a one-entry header table ~12). Of the base, 48 bytes are the chunk header
(osiris 1.3.1's HEADER_SIZE_B), which a record joining a chunk does not add again.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from broker.entities.stream_args import OffsetSpec
from broker.message import StoredMessage

SEGMENT_HEADER = 8
TRACKING_CHUNK = 60
#: osiris's `max_segment_size_chunks`: a segment also rolls once it holds this many chunks (its
#: tracking snapshot chunk included), whatever its size
MAX_SEGMENT_CHUNKS = 256_000
_CHUNK_BASE = 138
CHUNK_HEADER = 48


def chunk_size(msg: StoredMessage) -> int:
    n = len(msg.body)
    size = _CHUNK_BASE + len(msg.exchange.encode()) + len(msg.routing_key.encode()) + n
    if n > 255:
        size += 3
    if msg.flags:
        size += len(msg.props) - 2
    return size


@dataclass(slots=True)
class Record:
    offset: int
    seq: int  # the store's position of the message
    timestamp: int  # the chunk's wall-clock time, ms
    msg: StoredMessage | None  # None: the body was dropped from memory, the store has it
    body_size: int = 0
    chunk: int = -1  # the offset of the chunk's first record (-1: this one)

    @property
    def chunk_start(self) -> int:
        return self.offset if self.chunk < 0 else self.chunk


@dataclass(slots=True)
class Segment:
    size: int = SEGMENT_HEADER
    records: int = 0
    last_timestamp: int = 0
    chunks: int = 0


@dataclass
class StreamLog:
    segment_bytes: int
    max_bytes: int | None = None
    max_age_ms: int | None = None
    next_offset: int = 0
    records: list[Record] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    head: int = 0  # index of the first retained record
    chunk_open: bool = False  # the next record joins the last chunk (its owner batches writes)
    segment_chunks: int = MAX_SEGMENT_CHUNKS

    def _full(self) -> bool:
        """osiris's max_segment_size_reached: the current segment takes no further chunk."""
        seg = self.segments[-1]
        return seg.size >= self.segment_bytes or seg.chunks >= self.segment_chunks

    @property
    def first_offset(self) -> int:
        return self.records[self.head].offset if self.head < len(self.records) else self.next_offset

    def __len__(self) -> int:
        return len(self.records) - self.head

    @property
    def write_offset(self) -> int:
        """The offset the next record will take (one more when it must open a new segment)."""
        if self.chunk_open and len(self.records) > self.head:
            return self.next_offset
        if self.segments and self._full():
            return self.next_offset + 1
        return self.next_offset

    def append(self, seq: int, msg: StoredMessage, now_ms: int) -> list[Record]:
        """Write one record, into the last chunk while it is open (`chunk_open`), else as a new
        chunk; returns the records retention dropped."""
        if self.chunk_open and len(self.records) > self.head:
            last = self.records[-1]
            self._write(
                Record(self.next_offset, seq, last.timestamp, msg, len(msg.body), last.chunk_start), msg
            )
            return []
        rolled = False
        if not self.segments:
            self.segments.append(Segment())
        elif self._full():
            self.segments.append(Segment(SEGMENT_HEADER + TRACKING_CHUNK, 0, now_ms, 1))
            self.next_offset += 1
            rolled = True
        self._write(Record(self.next_offset, seq, now_ms, msg, len(msg.body)), msg)
        return self._retain(now_ms) if rolled else []

    def restore(self, offset: int, seq: int, msg: StoredMessage, timestamp: int | None) -> None:
        """Put back a record read from the store at its offset, starting a chunk at `timestamp`
        or (None) joining the chunk before it; a gap before it (a tracking chunk, or messages the
        store did not keep) starts a new segment and chunk."""
        gap = not self.segments or offset > self.next_offset
        if gap:
            tracked = bool(self.segments)
            size = SEGMENT_HEADER + (TRACKING_CHUNK if tracked else 0)
            self.segments.append(Segment(size, chunks=int(tracked)))
        self.next_offset = offset
        last = self.records[-1] if len(self.records) > self.head else None
        if timestamp is None and last is not None and not gap:
            record = Record(offset, seq, last.timestamp, msg, len(msg.body), last.chunk_start)
        else:
            ts = timestamp if timestamp is not None else last.timestamp if last is not None else 0
            record = Record(offset, seq, ts, msg, len(msg.body))
        self._write(record, msg)

    def _write(self, record: Record, msg: StoredMessage) -> None:
        seg = self.segments[-1]
        self.next_offset = record.offset + 1
        self.records.append(record)
        self.offsets.append(record.offset)
        seg.size += chunk_size(msg) - (CHUNK_HEADER if record.chunk >= 0 else 0)
        seg.chunks += record.chunk < 0
        seg.records += 1
        seg.last_timestamp = record.timestamp

    def _retain(self, now_ms: int) -> list[Record]:
        segs = self.segments
        drop = 0
        if self.max_bytes is not None:
            total = sum(s.size for s in segs)
            while len(segs) - drop > 1 and total > self.max_bytes:
                total -= segs[drop].size
                drop += 1
        if self.max_age_ms is not None:
            limit = now_ms - self.max_age_ms
            while len(segs) - drop > 1 and segs[drop].last_timestamp < limit:
                drop += 1
        if not drop:
            return []
        n = sum(s.records for s in segs[:drop])
        del segs[:drop]
        dropped = self.records[self.head : self.head + n]
        self.head += n
        if self.head > 4096 and self.head * 2 > len(self.records):
            del self.records[: self.head]
            del self.offsets[: self.head]
            self.head = 0
        return dropped

    def index_of(self, offset: int) -> int:
        """The index in `records` of the first retained record at `offset` or later."""
        return bisect.bisect_left(self.offsets, offset, lo=self.head)

    def at_or_after(self, offset: int) -> Record | None:
        """The first retained record at `offset` or later."""
        i = self.index_of(offset)
        return self.records[i] if i < len(self.records) else None

    def start_offset(self, spec: OffsetSpec) -> int:
        """Where a consumer with `spec` starts reading (osiris's offset spec resolution)."""
        first, nxt = self.first_offset, self.next_offset
        if spec.kind == "first":
            return first
        if spec.kind == "next":
            return nxt
        if spec.kind == "last":  # the start of the last chunk
            return self.records[-1].chunk_start if len(self) else nxt
        if spec.kind == "offset":  # past the end: the consumer waits for that offset
            return max(spec.value, first)
        for record in self.records[self.head :]:  # timestamp: the first chunk at or after it
            if record.timestamp >= spec.value:
                return record.offset
        return nxt

    def clear(self) -> None:
        self.records.clear()
        self.offsets.clear()
        self.segments.clear()
        self.head = 0
        self.chunk_open = False
