"""The stream log rebuilt from the store's index (sizes and chunk times, no bodies) is the log
that was written; timestamp offsets found by binary search are those a scan finds; the kept total
of segment sizes stays the sum retention used to compute."""

from __future__ import annotations

import random

from broker.entities.message import StoredMessage
from broker.entities.queues.stream.arguments import OffsetSpec
from broker.entities.queues.stream.log import StreamLog, chunk_size


def _written(seed: int) -> tuple[StreamLog, list[tuple[int, int, int, int]]]:
    """A log with small segments, chunks of 1-4 records and retention by size; and the index rows
    (offset, chunk time or None-as-0, size, body bytes) a store would hold for what it kept."""
    rnd = random.Random(seed)
    log = StreamLog(segment_bytes=2_000, max_bytes=6_000)
    now = 1_000
    rows: list[tuple[int, int, int, int]] = []
    for _ in range(400):
        now += rnd.randint(0, 3)
        n = rnd.randint(1, 4)
        for k in range(n):
            msg = StoredMessage("x", "key", b"\x00\x00", bytes(rnd.randint(0, 400)))
            offset = log.write_offset
            log.append(msg, now)
            rows.append((offset, now if k == 0 else 0, chunk_size(msg), len(msg.body)))
            log.chunk_open = True
        log.chunk_open = False
    first = log.first_offset
    return log, [r for r in rows if r[0] >= first]


def test_index_restore_rebuilds_the_written_log() -> None:
    for seed in range(5):
        log, rows = _written(seed)
        again = StreamLog(segment_bytes=2_000, max_bytes=6_000)
        for offset, ts, size, body in rows:
            again.restore_index(offset, size, body, ts or None)
        assert list(again.offsets) == list(log.offsets[log.head :])
        assert list(again.stamps) == list(log.stamps[log.head :])
        assert list(again.chunks) == list(log.chunks[log.head :])
        assert again.next_offset == log.next_offset
        assert all(m is None for m in again.msgs)


def test_timestamp_lookup_matches_a_scan() -> None:
    log, _rows = _written(7)
    stamps, offsets = log.stamps, log.offsets
    for ts in range(900, max(stamps) + 3):
        want = next((offsets[i] for i in range(log.head, len(stamps)) if stamps[i] >= ts), log.next_offset)
        assert log.start_offset(OffsetSpec("timestamp", ts)) == want


def test_kept_size_is_the_segments_sum() -> None:
    for seed in range(5):
        log, _rows = _written(seed)
        assert log.size == sum(s.size for s in log.segments)
