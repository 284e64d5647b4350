"""A stream's log as osiris lays it out: offsets, chunks, segments and retention.

Each publish is one chunk holding one record and takes one offset. A segment file starts with an
8-byte header; a chunk is written into the current segment unless that segment already reached
the maximum segment size, in which case a new segment is opened first and begins with a tracking
snapshot chunk (60 bytes, one offset): so offsets are not contiguous across segments. Retention is
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
message_id ~23, a one-entry header table ~12).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from broker.entities.stream_args import OffsetSpec
from broker.message import StoredMessage

SEGMENT_HEADER = 8
TRACKING_CHUNK = 60
_CHUNK_BASE = 138


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


@dataclass(slots=True)
class Segment:
    size: int = SEGMENT_HEADER
    records: int = 0
    last_timestamp: int = 0


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

    @property
    def first_offset(self) -> int:
        return self.records[self.head].offset if self.head < len(self.records) else self.next_offset

    def __len__(self) -> int:
        return len(self.records) - self.head

    @property
    def write_offset(self) -> int:
        """The offset the next chunk will take (one more when it must open a new segment)."""
        if self.segments and self.segments[-1].size >= self.segment_bytes:
            return self.next_offset + 1
        return self.next_offset

    def append(self, seq: int, msg: StoredMessage, now_ms: int) -> list[Record]:
        """Write one chunk; returns the records retention dropped."""
        rolled = False
        if not self.segments:
            self.segments.append(Segment())
        elif self.segments[-1].size >= self.segment_bytes:
            self.segments.append(Segment(SEGMENT_HEADER + TRACKING_CHUNK, 0, now_ms))
            self.next_offset += 1
            rolled = True
        self._write(Record(self.next_offset, seq, now_ms, msg, len(msg.body)), msg)
        return self._retain(now_ms) if rolled else []

    def restore(self, offset: int, seq: int, msg: StoredMessage, now_ms: int) -> None:
        """Put back a record read from the store at its offset; a gap before it (a tracking chunk,
        or messages the store did not keep) starts a new segment."""
        if not self.segments or offset > self.next_offset:
            self.segments.append(Segment(SEGMENT_HEADER + (TRACKING_CHUNK if self.segments else 0)))
        self.next_offset = offset
        self._write(Record(offset, seq, now_ms, msg, len(msg.body)), msg)

    def _write(self, record: Record, msg: StoredMessage) -> None:
        seg = self.segments[-1]
        self.next_offset = record.offset + 1
        self.records.append(record)
        self.offsets.append(record.offset)
        seg.size += chunk_size(msg)
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
        if spec.kind == "last":  # the start of the last chunk (one record per chunk)
            return self.records[-1].offset if len(self) else nxt
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
