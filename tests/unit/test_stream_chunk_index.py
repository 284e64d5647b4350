"""The stream log's per-chunk index against a plain per-record model, and the stream frame decoder
against every way TCP could split a byte stream.

The log is driven the way the stream queue drives it (single-record chunks, records joining an
open chunk, tiny segments so that tracking chunks leave offset gaps and retention plus compaction
cut the head); after every step each per-record figure, `index_of` for every offset, `chunk_end`
and the timestamp lookup must equal what the plain model says. A chunk of many small records must
cost memory per chunk, not per record."""

from __future__ import annotations

import bisect
import random
import tracemalloc

from broker.entities.message import StoredMessage
from broker.entities.queues.stream.arguments import OffsetSpec
from broker.entities.queues.stream.log import StreamLog
from broker.streamproto import frames as F


def _msg(n: int) -> StoredMessage:
    return StoredMessage("", "", b"\x00\x00", b"x" * n)


def _check(log: StreamLog, model: list[tuple[int, int, int]]) -> None:
    """`model`: (offset, chunk start offset, chunk time) of every record from index 0."""
    assert len(log.offsets) == len(model)
    assert list(log.offsets) == [m[0] for m in model]
    assert list(log.chunks) == [m[1] for m in model]
    assert list(log.stamps) == [m[2] for m in model]
    assert log.offsets[-1] == model[-1][0] and log.offsets[log.head :] == [m[0] for m in model[log.head :]]
    offsets = [m[0] for m in model]
    for offset in range(max(0, log.first_offset - 2), log.next_offset + 2):
        assert log.index_of(offset) == bisect.bisect_left(offsets, offset, lo=log.head), offset
    for i in range(log.head, len(model)):
        end = i
        while end < len(model) and model[end][1] == model[i][1]:
            end += 1
        assert log.chunk_end(i) == end
    for ts in {m[2] for m in model[log.head :]} | {-1, 10**15}:
        i = next((j for j in range(log.head, len(model)) if model[j][2] >= ts), None)
        want = log.next_offset if i is None else model[i][0]
        assert log.start_offset(OffsetSpec("timestamp", ts)) == want


def test_chunk_index_equals_per_record_columns_through_rolls_retention_and_compaction() -> None:
    rnd = random.Random(7)
    log = StreamLog(700, max_bytes=3000)
    model: list[tuple[int, int, int]] = []
    now = 1_000
    for step in range(3500):
        now += rnd.randint(0, 3)
        size = rnd.randint(1, 3)
        first = True
        for _ in range(size):
            log.chunk_open = not first
            offset, old_head = log.write_offset, log.head
            dropped = log.append(_msg(rnd.randint(0, 120)), now)
            start = offset if first else model[-1][1]
            model.append((offset, start, now if first else model[-1][2]))
            first = False
            if dropped is not None and log.head:  # (not compacted: the model's indexes still hold)
                assert dropped.seqs == [m[0] + 1 for m in model[old_head : log.head]]
        log.chunk_open = False
        if log.head == 0 and len(model) > len(log.msgs):  # compaction moved the indexes down
            del model[: len(model) - len(log.msgs)]
        if step % 150 == 0 or step > 3490:
            _check(log, model)
    assert log.head < len(log.msgs) and model[0][0] > 0  # retention and compaction happened


def test_a_chunk_of_small_records_costs_its_list_slot() -> None:
    body = _msg(100)
    tracemalloc.start()
    try:
        log = StreamLog(500_000_000)
        for c in range(100):
            log.chunk_open = False
            log.append(body, c)
            log.chunk_open = True
            for _ in range(199):
                log.append(body, c)
        log.msgs[:] = [None] * len(log.msgs)
        used, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(log) == 20_000
    assert used / 20_000 < 10, used / 20_000


def test_frame_decoder_gives_the_same_frames_whatever_the_reads() -> None:
    rnd = random.Random(3)
    frames = [F.Heartbeat().to_bytes()]
    frames += [F.Publish.build(1, [(i, b"r" * rnd.randint(0, 3000))]).to_bytes() for i in range(40)]
    frames += [F.Metadata(i, ("a", "b" * i)).to_bytes() for i in range(20)]
    rnd.shuffle(frames)
    stream = b"".join(frames)
    want = [f[4:] for f in frames]
    for _ in range(30):
        dec = F.FrameDecoder(limit=1 << 20)
        got: list[bytes] = []
        pos = 0
        while pos < len(stream):
            n = rnd.choice((1, 2, 3, 5, 100, 4096, 70_000))
            dec.feed(stream[pos : pos + n])
            pos += n
            got.extend(bytes(b) for b in dec.frames())
        assert got == want
        assert dec.buffered == 0
