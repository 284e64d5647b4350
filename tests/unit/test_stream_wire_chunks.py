"""A stream-protocol publish frame kept as one osiris chunk (`WireChunk`): the frame parsed into
the entry section a reader is sent, the log's accounting equal to appending its records one by
one, the store row's wire layout read back record by record and as the section."""

from __future__ import annotations

import random
import zlib
from array import array

import pytest

from broker.entities.queues.stream.log import StreamLog, WireChunk
from broker.entities.queues.stream.queue import record_message
from broker.store.sqlite.chunks import decode_chunk, index_sizes, wire_crc, wire_sizes
from broker.streamproto import frames as F


def _section(records: list[bytes]) -> bytes:
    return b"".join(len(r).to_bytes(4, "big") + r for r in records)


@pytest.mark.parametrize(
    "sizes",
    [[1000] * 200, [0, 5, 300, 70000, 1], [100], [], [7] * 3 + [8]],
    ids=["uniform", "mixed", "one", "empty", "last-differs"],
)
def test_a_frame_parses_into_its_entries_and_the_osiris_section(sizes: list[int]) -> None:
    rnd = random.Random(len(sizes))
    records = [rnd.randbytes(n) for n in sizes]
    items: list[tuple[int, F.Entry]] = [(i * 3, r) for i, r in enumerate(records)]
    got = F.Publish.build(0, items).entries()
    assert [(i, bytes(e)) for i, e in got] == items
    assert got.ids == [i for i, _ in items]
    assert got.section == _section(records)
    assert list(got.sizes) == sizes


def test_a_frame_with_a_sub_batch_has_no_section() -> None:
    items: list[tuple[int, F.Entry]] = [(1, b"a"), (2, F.SubBatch(0, 1, 5, b"\x00\x00\x00\x01b"))]
    got = F.Publish.build(0, items).entries()
    assert got.section is None and got.ids == [1, 2]
    with pytest.raises(F.CrashError):
        F.published(F.Publish.build(0, items).messages[:-1])


def test_a_wire_chunk_costs_the_log_what_its_records_appended_one_by_one_cost() -> None:
    rnd = random.Random(7)
    by_chunk, by_record = StreamLog(4000, max_bytes=12000), StreamLog(4000, max_bytes=12000)
    now = 1000
    for _ in range(60):
        records = [rnd.randbytes(rnd.choice((10, 200, 256, 300))) for _ in range(rnd.randint(1, 9))]
        chunk = WireChunk(_section(records), array("I", [len(r) for r in records]))
        dropped = by_chunk.append_chunk(chunk, now)
        first = by_record.append(record_message(records[0]), now)
        by_record.chunk_open = True
        for r in records[1:]:
            assert by_record.append(record_message(r), now) is None
        by_record.chunk_open = False
        assert (dropped is None) == (first is None)
        if dropped is not None and first is not None:
            assert (dropped.seqs, dropped.body_bytes) == (first.seqs, first.body_bytes)
        now += 10
    assert by_chunk.size == by_record.size and by_chunk.next_offset == by_record.next_offset
    assert [(s.size, s.records, s.chunks, s.body_bytes) for s in by_chunk.segments] == [
        (s.size, s.records, s.chunks, s.body_bytes) for s in by_record.segments
    ]
    assert len(by_chunk.segments) > 1 and by_chunk.head > 0  # segments rolled, retention dropped
    for i in range(by_chunk.head, by_chunk.end):
        a, b = by_chunk.record(i), by_record.record(i)
        assert (a.offset, a.timestamp, a.chunk_start) == (b.offset, b.timestamp, b.chunk_start)
        assert a.msg is not None and b.msg is not None and a.msg.body == b.msg.body


def test_a_wire_row_reads_back_as_records_and_as_its_index() -> None:
    records = [b"a" * 300, b"", b"xyz"]
    section = _section(records)
    sizes = array("I", [len(r) for r in records])
    raw = wire_sizes(zlib.crc32(section), sizes)
    assert wire_crc(raw) == zlib.crc32(section)
    assert wire_crc(array("I", [1, 2, 3, 4]).tobytes()) is None
    rows = decode_chunk(10, raw, section, 11)
    assert [(s, body) for s, _p, body, _x, _k in rows] == [(11, records[1]), (12, records[2])]
    assert list(index_sizes(raw)) == [0, 0, 2, 300, 0, 0, 2, 0, 0, 0, 2, 3]
