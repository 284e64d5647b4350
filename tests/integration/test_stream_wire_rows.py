"""Wire chunk rows (a stream-protocol publish frame stored as osiris's entry section) in the chunk
file: read back whole, record by record and as the index, across a restart and retention; a
store whose main file already holds chunk rows keeps using them there."""

from __future__ import annotations

import contextlib
import sqlite3
import zlib
from array import array
from pathlib import Path

from amqpwire.fields import Field, FieldTable
from broker.store import QueueRecord, VHostRecord, open_store
from broker.store.sqlite.schema import CHUNK_FILE, CHUNK_PAGE_SIZE, STORE_FILE
from broker.store.sqlite.store import SqliteStore

STREAM = FieldTable([("x-queue-type", Field("longstr", b"stream"))])
RECORDS = [bytes([n]) * (n * 7) for n in range(1, 41)]
SECTION = b"".join(len(r).to_bytes(4, "big") + r for r in RECORDS)
SIZES = array("I", [len(r) for r in RECORDS])


def _started(path: Path) -> SqliteStore:
    s = open_store(path)
    assert isinstance(s, SqliteStore)
    s.load(messages=False)
    s.start()
    return s


async def declared(path: Path, queue: str) -> None:
    """A store at `path` holding vhost "/" and the stream `queue`, closed again."""
    s = _started(path)
    s.put_vhost(VHostRecord("/"))
    s.put_queue(QueueRecord("/", queue, arguments=STREAM))
    await s.close()


def create_old_chunk_table(conn: sqlite3.Connection) -> None:
    """The chunk table in the main file, as a store written before the chunk file has it."""
    conn.execute(
        "CREATE TABLE stream_chunks (vhost BLOB NOT NULL, queue BLOB NOT NULL, first INTEGER NOT NULL, "
        "last INTEGER NOT NULL, timestamp INTEGER NOT NULL DEFAULT 0, body_bytes INTEGER NOT NULL, "
        "sizes BLOB NOT NULL, data BLOB NOT NULL, PRIMARY KEY (vhost, queue, first))"
    )


async def test_a_wire_row_reads_back_whole_by_record_and_as_index_after_a_restart(tmp_path: Path) -> None:
    s = _started(tmp_path)
    s.put_vhost(VHostRecord("/"))
    s.put_queue(QueueRecord("/", "w", arguments=STREAM))
    await s.put_stream_chunk("/", "w", 1, 5000, zlib.crc32(SECTION), SIZES, SECTION)
    await s.put_stream_chunk("/", "w", 41, 6000, zlib.crc32(SECTION), SIZES, SECTION)
    await s.close()
    with contextlib.closing(sqlite3.connect(tmp_path / CHUNK_FILE)) as c:
        assert c.execute("PRAGMA page_size").fetchone()[0] == CHUNK_PAGE_SIZE
        assert c.execute("SELECT count(*) FROM stream_chunks").fetchone()[0] == 2
    s = open_store(tmp_path)
    snap = s.load(messages=False)
    assert snap.depths[("/", "w")] == (80, 2 * sum(SIZES), 80)
    s.start()
    try:
        assert s.read_stream_chunk("/", "w", 41) == (zlib.crc32(SECTION), 40, SECTION)
        assert s.read_stream_chunk("/", "w", 42) is None
        page = s.read_stream_page("/", "w", 39, 4)
        assert [(seq, body) for seq, _p, body, _x, _k in page] == [
            (39, RECORDS[38]),
            (40, RECORDS[39]),
            (41, RECORDS[0]),
            (42, RECORDS[1]),
        ]
        index = s.read_stream_index("/", "w", 0, 100)
        assert [r[0] for r in index] == list(range(1, 81))
        assert {r[0]: r[1] for r in index if r[1]} == {1: 5000, 41: 6000}
        assert index[2] == (3, 0, 0, 0, 2, len(RECORDS[2]))
        s.remove_stream_head("/", "w", 40)
        await s.sync()
        assert [r[0] for r in s.read_stream_index("/", "w", 0, 100)] == list(range(41, 81))
    finally:
        await s.close()


async def test_a_store_with_chunk_rows_in_its_main_file_keeps_them_there(tmp_path: Path) -> None:
    await declared(tmp_path, "w")
    with contextlib.closing(sqlite3.connect(tmp_path / STORE_FILE)) as c:  # as an older store has it
        create_old_chunk_table(c)
        old = (b"/", b"w", 1, 1, 7000, 3, array("I", [0, 0, 2, 3]).tobytes(), b"\x00\x00abc")
        c.execute("INSERT INTO stream_chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?)", old)
        c.commit()
    s = _started(tmp_path)
    try:
        await s.put_stream_chunk("/", "w", 2, 8000, zlib.crc32(SECTION), SIZES, SECTION)
        page = s.read_stream_page("/", "w", 1, 3)
        assert [(seq, body) for seq, _p, body, _x, _k in page] == [
            (1, b"abc"),
            (2, RECORDS[0]),
            (3, RECORDS[1]),
        ]
    finally:
        await s.close()
    with contextlib.closing(sqlite3.connect(tmp_path / STORE_FILE)) as c:
        assert c.execute("SELECT count(*) FROM stream_chunks").fetchone()[0] == 2
