"""A stream's tracking rows (named writers' last publishing ids, consumers' stored offsets) live in
the same file as its chunk rows, so that one commit covers a chunk and the publishing id it ends
with: SQLite commits two WAL files one after the other, and a kill between them must never leave a
publisher's id stored without the chunk it names (the retry of that unconfirmed chunk would be
dropped as a duplicate and lost). An older store's tracking rows move to the chunk file on open; a
store that keeps its chunk rows in the main file keeps its tracking rows there too."""

from __future__ import annotations

import contextlib
import sqlite3
import zlib
from array import array
from pathlib import Path

from broker.store import QueueRecord, VHostRecord
from broker.store.sqlite.schema import CHUNK_FILE, STORE_FILE
from tests.integration.test_stream_wire_rows import STREAM, _started, create_old_chunk_table, declared

SECTION = (3).to_bytes(4, "big") + b"abc"


def _tables(path: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(path)) as c:
        return {name for (name,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


async def test_tracking_rows_are_written_in_the_chunk_file(tmp_path: Path) -> None:
    s = _started(tmp_path)
    s.put_vhost(VHostRecord("/"))
    s.put_queue(QueueRecord("/", "t", arguments=STREAM))
    await s.put_stream_chunk("/", "t", 0, 5000, zlib.crc32(SECTION), array("I", [3]), SECTION)
    await s.put_stream_tracking("/", "t", [(0, "writer", 7), (1, "reader", 0)])
    await s.close()
    assert "stream_tracking" in _tables(tmp_path / CHUNK_FILE)
    assert "stream_tracking" not in _tables(tmp_path / STORE_FILE)
    with contextlib.closing(sqlite3.connect(tmp_path / CHUNK_FILE)) as c:
        assert c.execute("SELECT count(*) FROM stream_tracking").fetchone()[0] == 2
    s = _started(tmp_path)
    try:
        assert sorted(s.read_stream_tracking("/", "t")) == [(0, "writer", 7), (1, "reader", 0)]
    finally:
        await s.close()


async def test_an_older_stores_tracking_rows_move_to_the_chunk_file(tmp_path: Path) -> None:
    await declared(tmp_path, "t")
    # the layout before the chunk file held them: the table (and a row) in the main file only
    with contextlib.closing(sqlite3.connect(tmp_path / CHUNK_FILE)) as c:
        c.execute("DROP TABLE stream_tracking")
        c.commit()
    with contextlib.closing(sqlite3.connect(tmp_path / STORE_FILE)) as c:
        c.execute(
            "CREATE TABLE stream_tracking (vhost BLOB NOT NULL, queue BLOB NOT NULL, kind INTEGER NOT "
            "NULL, reference BLOB NOT NULL, value INTEGER NOT NULL, PRIMARY KEY (vhost, queue, kind, "
            "reference)) WITHOUT ROWID"
        )
        c.execute("INSERT INTO stream_tracking VALUES (?, ?, 0, ?, 41)", (b"/", b"t", b"writer"))
        c.commit()
    s = _started(tmp_path)
    try:
        assert s.read_stream_tracking("/", "t") == [(0, "writer", 41)]
    finally:
        await s.close()
    assert "stream_tracking" not in _tables(tmp_path / STORE_FILE)
    assert "stream_tracking" in _tables(tmp_path / CHUNK_FILE)


async def test_chunk_rows_kept_in_the_main_file_keep_their_tracking_rows_beside_them(tmp_path: Path) -> None:
    s = _started(tmp_path)
    await s.close()
    (tmp_path / CHUNK_FILE).unlink()
    with contextlib.closing(sqlite3.connect(tmp_path / STORE_FILE)) as c:
        create_old_chunk_table(c)
        c.execute("INSERT INTO stream_chunks VALUES (?, ?, 0, 0, 0, 0, ?, ?)", (b"/", b"old", b"", b""))
        c.commit()
    s = _started(tmp_path)
    try:
        await s.put_stream_tracking("/", "old", [(0, "writer", 3)])
        assert s.read_stream_tracking("/", "old") == [(0, "writer", 3)]
    finally:
        await s.close()
    assert "stream_tracking" in _tables(tmp_path / STORE_FILE)
    assert "stream_tracking" not in _tables(tmp_path / CHUNK_FILE)
