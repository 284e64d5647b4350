"""A stream's records stored a chunk row per publish frame (broker.store.sqlite.chunks), beside
records stored a row each (AMQP publishes, and every stream written before chunk rows existed):
depths, the index, pages, retention and a full load see one log in position order."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from amqpwire.fields import Field, FieldTable
from broker.store import QueueRecord, VHostRecord, open_store
from broker.store.sqlite.schema import CHUNK_FILE
from broker.store.sqlite.store import SqliteStore

PROPS = bytes.fromhex("1000") + b"\x02"  # delivery_mode 2
STREAM = FieldTable([("x-queue-type", Field("longstr", b"stream"))])


def _body(seq: int) -> bytes:
    return f"m{seq}".encode() + b"x" * (seq % 7)


def _started(path: Path, *, messages: bool = False) -> SqliteStore:
    s = open_store(path)
    assert isinstance(s, SqliteStore)
    s.load(messages=messages)
    s.start()
    return s


def _chunk(first: int, last: int) -> list[tuple[int, bytes, bytes, str, str]]:
    return [(seq, PROPS, _body(seq), "ex\u00e9", f"rk{seq % 2}") for seq in range(first, last + 1)]


async def _write(path: Path) -> None:
    """Positions 1-3 a row each, 4-203 one chunk row, 204 a row, 205-206 a chunk row."""
    s = _started(path)
    s.put_vhost(VHostRecord("/"))
    s.put_queue(QueueRecord("/", "s", arguments=STREAM))
    for seq in (1, 2, 3):
        s.persist("/", [("s", seq)], PROPS, _body(seq), "ex\u00e9", f"rk{seq % 2}")
    s.persist_records("/", "s", _chunk(4, 203))
    s.persist("/", [("s", 204)], PROPS, _body(204), "ex\u00e9", "rk0")
    s.persist_records("/", "s", _chunk(205, 206))
    s.set_timestamps("/", "s", [(1, 1000), (4, 2000), (205, 3000)])
    await s.sync()
    await s.close()


def _chunk_rows(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path / CHUNK_FILE)) as c:
        return int(c.execute("SELECT count(*) FROM stream_chunks").fetchone()[0])


async def test_both_layouts_read_back_as_one_log_in_position_order(tmp_path: Path) -> None:
    await _write(tmp_path)
    assert _chunk_rows(tmp_path) == 2
    s = open_store(tmp_path)
    snap = s.load(messages=False)
    assert snap.depths[("/", "s")] == (206, sum(len(_body(q)) for q in range(1, 207)), 206)
    s.start()
    try:
        index: list[tuple[int, int, int, int, int, int]] = []
        after = 0
        while rows := s.read_stream_index("/", "s", after, 37):  # batches cut chunk rows
            index += rows
            after = rows[-1][0]
        assert [r[0] for r in index] == list(range(1, 207))
        assert {r[0]: r[1] for r in index if r[1]} == {1: 1000, 4: 2000, 205: 3000}
        assert index[9] == (10, 0, len("ex\u00e9".encode()), 3, len(PROPS), len(_body(10)))
        page = s.read_stream_page("/", "s", 150, 100)
        assert [r[0] for r in page] == list(range(150, 207))
        assert page[0] == (150, PROPS, _body(150), "ex\u00e9", "rk0")
        assert s.read_stream_page("/", "s", 2, 3) == [
            (q, PROPS, _body(q), "ex\u00e9", f"rk{q % 2}") for q in (2, 3, 4)
        ]
        s.remove_stream_head("/", "s", 203)  # retention: whole chunk rows and the rows before
        await s.sync()
        assert [r[0] for r in s.read_stream_page("/", "s", 1, 10)] == [204, 205, 206]
        assert [r[0] for r in s.read_stream_index("/", "s", 0, 10)] == [204, 205, 206]
    finally:
        await s.close()
    assert _chunk_rows(tmp_path) == 1
    s = open_store(tmp_path)
    try:
        full = s.load()  # every message eagerly, as tools read a store
        assert [m.seq for m in full.messages[("/", "s")]] == [204, 205, 206]
        assert full.messages[("/", "s")][1].body == _body(205)
        assert full.queue_state[("/", "s")][205] == (0, 0, 3000)
    finally:
        await s.close()


async def test_deleting_the_stream_deletes_its_chunk_rows(tmp_path: Path) -> None:
    await _write(tmp_path)
    s = _started(tmp_path)
    s.delete_queue("/", "s")
    await s.sync()
    await s.close()
    assert _chunk_rows(tmp_path) == 0


async def test_records_at_gaps_are_stored_a_row_each(tmp_path: Path) -> None:
    """A stream keeping persistent messages only leaves gaps: no chunk row spans them."""
    await _write(tmp_path)
    s = _started(tmp_path)
    try:
        s.persist_records("/", "s", [_chunk(300, 300)[0], _chunk(302, 302)[0]])
        await s.sync()
        assert [r[0] for r in s.read_stream_page("/", "s", 206, 10)] == [206, 300, 302]
        assert s.read_stream_page("/", "s", 301, 1) == [(302, PROPS, _body(302), "ex\u00e9", "rk0")]
    finally:
        await s.close()
    assert _chunk_rows(tmp_path) == 2
