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

The index is columnar (machine-integer arrays of offsets, chunk times and chunk starts, and one
list of the bodies still in memory): about 32 bytes per record, so a stream of millions of
messages whose bodies were paged out to the store keeps only that much in RAM per message.
"""

from __future__ import annotations

import bisect
import zlib
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

from broker.entities.message import StoredMessage
from broker.entities.queues.stream.arguments import OffsetSpec

SEGMENT_HEADER = 8
TRACKING_CHUNK = 60
#: osiris's `max_segment_size_chunks`: a segment also rolls once it holds this many chunks (its
#: tracking snapshot chunk included), whatever its size
MAX_SEGMENT_CHUNKS = 256_000
_CHUNK_BASE = 138
CHUNK_HEADER = 48
#: Retained index entries before the dropped prefix of the columns is cut away.
_COMPACT_AT = 4096


#: Memory a message held in the log costs beyond its body: the message object, its property bytes,
#: routing key and the header offsets a delivery caches (tracemalloc: 270-700 B for a 100-byte
#: body). Counting it keeps the resident budget a bound on memory, not on body bytes alone.
MESSAGE_OVERHEAD = 512


#: A stream-protocol record's AMQP 0-9-1 view: no properties, exchange or routing key, the AMQP 1.0
#: bytes as its body (`broker.entities.queues.stream.queue.record_message`).
NO_PROPS = b"\x00\x00"


class WireChunk:
    """A stream-protocol publish frame's records as one chunk, kept as osiris stores it: the entry
    section (`section`, each record as `size:u32` then its bytes), each record's size and the
    section's CRC32, computed once. A stream-protocol reader is sent `section` as it is; a record
    is sliced out only when an AMQP 0-9-1 consumer reads it (`record`). The log holds the chunk
    once per record it spans (one list slot each), so paging and retention work per record."""

    __slots__ = ("_starts", "crc", "section", "sizes", "unit")

    def __init__(self, section: bytes, sizes: array[int], crc: int | None = None) -> None:
        self.section = section
        self.sizes = sizes
        self.crc = zlib.crc32(section) if crc is None else crc
        n = max(len(sizes), 1)
        #: the resident cost of each record: the chunk's bytes, its sizes and the object, shared out
        self.unit = -(-(len(section) + 4 * n + _WIRE_OVERHEAD) // n)
        self._starts: array[int] | None = None

    @property
    def count(self) -> int:
        return len(self.sizes)

    @property
    def body_bytes(self) -> int:
        return len(self.section) - 4 * len(self.sizes)

    def log_size(self) -> int:
        """The chunk's size in its segment: its records' `record_size`, one chunk header."""
        sizes = self.sizes
        big = sum(map((255).__lt__, sizes))
        return _CHUNK_BASE * len(sizes) + self.body_bytes + 3 * big - CHUNK_HEADER * (len(sizes) - 1)

    def record(self, j: int) -> bytes:
        """The `j`-th record's bytes."""
        starts = self._starts
        if starts is None:
            starts = self._starts = array("q")
            at = 4
            for size in self.sizes:
                starts.append(at)
                at += size + 4
        at = starts[j]
        return self.section[at : at + self.sizes[j]]


_WIRE_OVERHEAD = 192


def resident_cost(msg: StoredMessage | WireChunk) -> int:
    """What holding `msg` (one record of a `WireChunk`) in memory costs, for the stream's resident
    budget."""
    if isinstance(msg, WireChunk):
        return msg.unit
    return len(msg.body) + MESSAGE_OVERHEAD


def record_size(exchange: int, routing_key: int, props: int, body: int) -> int:
    """A record's chunk size from the byte lengths of its parts (see the module docstring)."""
    size = _CHUNK_BASE + exchange + routing_key + body
    if body > 255:
        size += 3
    if props > 2:  # some property is set
        size += props - 2
    return size


def chunk_size(msg: StoredMessage) -> int:
    return record_size(
        len(msg.exchange.encode()), len(msg.routing_key.encode()), len(msg.props), len(msg.body)
    )


@dataclass(slots=True, frozen=True)
class Record:
    """One record as read from the columns (built on demand, never stored)."""

    offset: int
    timestamp: int  # the chunk's wall-clock time, ms
    msg: StoredMessage | None  # None: the body was dropped from memory, the store has it
    chunk_start: int  # the offset of the chunk's first record

    @property
    def seq(self) -> int:
        """The store's position of the message: its offset plus one."""
        return self.offset + 1


@dataclass(slots=True)
class Segment:
    size: int = SEGMENT_HEADER
    records: int = 0
    last_timestamp: int = 0
    chunks: int = 0
    body_bytes: int = 0  # the bodies of its records, for the queue's byte count on retention


@dataclass(slots=True)
class Dropped:
    """What retention removed: the store positions, their body bytes, and what of them memory
    held (`resident_cost`)."""

    seqs: list[int]
    body_bytes: int
    resident_bytes: int


def _column() -> array[int]:
    return array("q")


class ChunkIndex:
    """Where each chunk starts (the index of its first record, its first offset) and its time.

    The records of a chunk take consecutive offsets, so a record's offset, chunk start and time
    follow from its chunk's entry: memory grows per chunk, not per record (a stream of ten million
    small records published in batches holds an index of a few MB). `chunk_of` remembers the last
    chunk it found, so reading along the log costs no search."""

    __slots__ = ("_last", "firsts", "starts", "times")

    def __init__(self) -> None:
        self.starts = _column()  # the record index of each chunk's first record
        self.firsts = _column()  # each chunk's first offset
        self.times = _column()  # each chunk's time, ms
        self._last = 0

    def chunk_of(self, i: int) -> int:
        starts, k = self.starts, self._last
        if k < len(starts) and starts[k] <= i and (k + 1 == len(starts) or i < starts[k + 1]):
            return k
        k = self._last = bisect.bisect_right(starts, i) - 1
        return k

    def add(self, index: int, offset: int, timestamp: int) -> None:
        self.starts.append(index)
        self.firsts.append(offset)
        self.times.append(timestamp)

    def drop_before(self, i: int) -> None:
        """Forget the records before index `i` (the chunk holding `i` then starts there); the
        indexes of the others shift down by `i`."""
        if not len(self.starts):
            return
        k = max(self.chunk_of(i), 0)
        if self.starts[k] < i:
            self.firsts[k] += i - self.starts[k]
            self.starts[k] = i
        del self.firsts[:k], self.times[:k]
        self.starts = array("q", (s - i for s in self.starts[k:]))
        self._last = 0

    def clear(self) -> None:
        for column in (self.starts, self.firsts, self.times):
            del column[:]
        self._last = 0


class RecordColumn(Sequence[int]):
    """One per-record figure (offset, chunk start offset or chunk time) read from the chunk index,
    for the readers that index records: `column[i]`, slices, iteration, `bisect`."""

    __slots__ = ("_index", "_kind", "_log")

    def __init__(self, log: StreamLog, index: ChunkIndex, kind: str) -> None:
        self._log, self._index, self._kind = log, index, kind

    def __len__(self) -> int:
        return len(self._log.msgs)

    @overload
    def __getitem__(self, i: int) -> int: ...
    @overload
    def __getitem__(self, i: slice) -> list[int]: ...
    def __getitem__(self, i: int | slice) -> int | list[int]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("record index out of range")
        index = self._index
        k = index.chunk_of(i)
        if self._kind == "offset":
            return index.firsts[k] + i - index.starts[k]
        if self._kind == "chunk":
            return index.firsts[k]
        return index.times[k]

    def __iter__(self) -> Iterator[int]:
        return (self[j] for j in range(len(self)))


@dataclass
class StreamLog:
    segment_bytes: int
    max_bytes: int | None = None
    max_age_ms: int | None = None
    next_offset: int = 0
    index: ChunkIndex = field(default_factory=ChunkIndex)
    msgs: list[StoredMessage | WireChunk | None] = field(default_factory=list)  # None: paged out
    segments: list[Segment] = field(default_factory=list)
    head: int = 0  # index of the first retained record
    size: int = 0  # the segments' total size, kept as they change (retention reads no segment list)
    chunk_open: bool = False  # the next record joins the last chunk (its owner batches writes)
    segment_chunks: int = MAX_SEGMENT_CHUNKS

    @property
    def offsets(self) -> RecordColumn:
        """Each record's offset."""
        return RecordColumn(self, self.index, "offset")

    @property
    def stamps(self) -> RecordColumn:
        """Each record's chunk time, ms."""
        return RecordColumn(self, self.index, "stamp")

    @property
    def chunks(self) -> RecordColumn:
        """Each record's chunk start offset."""
        return RecordColumn(self, self.index, "chunk")

    def chunk_end(self, i: int) -> int:
        """One past the index of the last record of the chunk holding record `i`."""
        index = self.index
        k = index.chunk_of(i)
        return index.starts[k + 1] if k + 1 < len(index.starts) else len(self.msgs)

    def _full(self) -> bool:
        """osiris's max_segment_size_reached: the current segment takes no further chunk."""
        seg = self.segments[-1]
        return seg.size >= self.segment_bytes or seg.chunks >= self.segment_chunks

    @property
    def first_offset(self) -> int:
        return self.offsets[self.head] if self.head < len(self.msgs) else self.next_offset

    def __len__(self) -> int:
        return len(self.msgs) - self.head

    @property
    def end(self) -> int:
        """One past the index of the newest record."""
        return len(self.msgs)

    @property
    def write_offset(self) -> int:
        """The offset the next record will take (one more when it must open a new segment)."""
        if self.chunk_open and len(self.msgs) > self.head:
            return self.next_offset
        if self.segments and self._full():
            return self.next_offset + 1
        return self.next_offset

    def chunk_start(self, i: int) -> int:
        """The index of the first record of the chunk holding record `i`."""
        index = self.index
        return index.starts[index.chunk_of(i)]

    def message(self, i: int) -> StoredMessage | None:
        """Record `i`'s message (None: paged out); a `WireChunk`'s record is sliced out of it."""
        m = self.msgs[i]
        if isinstance(m, WireChunk):
            return StoredMessage("", "", NO_PROPS, m.record(i - self.chunk_start(i)))
        return m

    def record(self, i: int) -> Record:
        return Record(self.offsets[i], self.stamps[i], self.message(i), self.chunks[i])

    def retained(self) -> list[Record]:
        """The retained records, oldest first (for inspection: the hot paths read the columns)."""
        return [self.record(i) for i in range(self.head, len(self.offsets))]

    def append(self, msg: StoredMessage, now_ms: int) -> Dropped | None:
        """Write one record at `write_offset`, into the last chunk while it is open
        (`chunk_open`), else as a new chunk; returns what retention dropped, if any."""
        size, body_bytes = chunk_size(msg), len(msg.body)
        if self.chunk_open and len(self.msgs) > self.head:
            index = self.index
            self._write(self.next_offset, index.times[-1], index.firsts[-1], msg, size, body_bytes)
            return None
        rolled = self._new_chunk(now_ms)
        offset = self.next_offset
        self._write(offset, now_ms, offset, msg, size, body_bytes)
        return self._retain(now_ms) if rolled else None

    def _new_chunk(self, now_ms: int) -> bool:
        """A chunk starts: open the first segment, or roll a full one (True: retention is due)."""
        if not self.segments:
            self._open_segment(Segment())
            return False
        if not self._full():
            return False
        self._open_segment(Segment(SEGMENT_HEADER + TRACKING_CHUNK, 0, now_ms, 1))
        self.next_offset += 1
        return True

    def append_chunk(self, chunk: WireChunk, now_ms: int) -> Dropped | None:
        """Write `chunk` as a new chunk at `write_offset` (the last one must not be open): what
        `append` of its records, the first starting the chunk, would do, once per chunk."""
        rolled = self._new_chunk(now_ms)
        offset, n = self.next_offset, chunk.count
        self.index.add(len(self.msgs), offset, now_ms)
        self.msgs += [chunk] * n
        self.next_offset = offset + n
        seg = self.segments[-1]
        seg.chunks += 1
        seg.records += n
        seg.body_bytes += chunk.body_bytes
        seg.last_timestamp = now_ms
        # retention sees the segments once the chunk's first record is written, as when the
        # records are appended one by one; the others join the chunk after it
        first = record_size(0, 0, len(NO_PROPS), chunk.sizes[0])
        seg.size += first
        self.size += first
        dropped = self._retain(now_ms) if rolled else None
        rest = chunk.log_size() - first
        seg.size += rest
        self.size += rest
        return dropped

    def restore(self, offset: int, msg: StoredMessage, timestamp: int | None) -> None:
        """Put back a record read from the store at its offset, starting a chunk at `timestamp`
        or (None) joining the chunk before it; a gap before it (a tracking chunk, or messages the
        store did not keep) starts a new segment and chunk."""
        self._restore(offset, msg, chunk_size(msg), len(msg.body), timestamp)

    def restore_index(self, offset: int, size: int, body_bytes: int, timestamp: int | None) -> None:
        """`restore` from the store's index alone: the body stays in the store (paged out)."""
        self._restore(offset, None, size, body_bytes, timestamp)

    def _restore(
        self, offset: int, msg: StoredMessage | None, size: int, body_bytes: int, timestamp: int | None
    ) -> None:
        gap = not self.segments or offset > self.next_offset
        if gap:
            tracked = bool(self.segments)
            opening = SEGMENT_HEADER + (TRACKING_CHUNK if tracked else 0)
            self._open_segment(Segment(opening, chunks=int(tracked)))
        self.next_offset = offset
        has_last = len(self.msgs) > self.head
        index = self.index
        if timestamp is None and has_last and not gap:
            self._write(offset, index.times[-1], index.firsts[-1], msg, size, body_bytes)
        else:
            ts = timestamp if timestamp is not None else index.times[-1] if has_last else 0
            self._write(offset, ts, offset, msg, size, body_bytes)

    def _open_segment(self, seg: Segment) -> None:
        self.segments.append(seg)
        self.size += seg.size

    def _write(
        self,
        offset: int,
        timestamp: int,
        chunk: int,
        msg: StoredMessage | None,
        size: int,
        body_bytes: int,
    ) -> None:
        seg = self.segments[-1]
        self.next_offset = offset + 1
        joins = chunk != offset
        if not joins:
            self.index.add(len(self.msgs), offset, timestamp)
        self.msgs.append(msg)
        grown = size - (CHUNK_HEADER if joins else 0)
        seg.size += grown
        self.size += grown
        seg.chunks += not joins
        seg.records += 1
        seg.body_bytes += body_bytes
        seg.last_timestamp = timestamp

    def _retain(self, now_ms: int) -> Dropped | None:
        segs = self.segments
        drop = 0
        if self.max_bytes is not None:
            total = self.size
            while len(segs) - drop > 1 and total > self.max_bytes:
                total -= segs[drop].size
                drop += 1
        if self.max_age_ms is not None:
            limit = now_ms - self.max_age_ms
            while len(segs) - drop > 1 and segs[drop].last_timestamp < limit:
                drop += 1
        if not drop:
            return None
        n = sum(s.records for s in segs[:drop])
        body_bytes = sum(s.body_bytes for s in segs[:drop])
        self.size -= sum(s.size for s in segs[:drop])
        del segs[:drop]
        start, stop = self.head, self.head + n
        offsets = self.offsets
        seqs = [offsets[i] + 1 for i in range(start, stop)]
        resident = 0
        msgs = self.msgs
        for i in range(start, stop):
            m = msgs[i]
            if m is not None:
                resident += resident_cost(m)
                msgs[i] = None
        self.head = stop
        if self.head > _COMPACT_AT and self.head * 2 > len(self.msgs):
            self.index.drop_before(self.head)
            del self.msgs[: self.head]
            self.head = 0
        return Dropped(seqs, body_bytes, resident)

    def index_of(self, offset: int) -> int:
        """The index of the first retained record at `offset` or later (`end` if none). Offsets
        are contiguous but for a tracking chunk per segment: the guess is nearly always right."""
        head, end = self.head, len(self.msgs)
        if head >= end:
            return end
        index = self.index
        k0 = index.chunk_of(head)
        k = bisect.bisect_right(index.firsts, offset, lo=k0) - 1
        if k < k0:
            return head
        i = index.starts[k] + offset - index.firsts[k]
        chunk_end = index.starts[k + 1] if k + 1 < len(index.starts) else end
        if i < chunk_end:
            return max(i, head)
        return chunk_end

    def start_offset(self, spec: OffsetSpec) -> int:
        """Where a consumer with `spec` starts reading (osiris's offset spec resolution)."""
        first, nxt = self.first_offset, self.next_offset
        if spec.kind == "first":
            return first
        if spec.kind == "next":
            return nxt
        if spec.kind == "last":  # the start of the last chunk
            return self.chunks[-1] if len(self) else nxt
        if spec.kind == "offset":  # past the end: the consumer waits for that offset
            return max(spec.value, first)
        # timestamp: the first chunk at or after it; chunk times only grow along the log, so a
        # binary search over the column finds it without a scan
        if self.head >= len(self.msgs):
            return nxt
        index = self.index
        k = bisect.bisect_left(index.times, spec.value, lo=index.chunk_of(self.head))
        return self.offsets[max(index.starts[k], self.head)] if k < len(index.times) else nxt

    def clear(self) -> None:
        self.index.clear()
        del self.msgs[:]
        self.segments.clear()
        self.size = 0
        self.head = 0
        self.chunk_open = False
