"""A stored wire chunk's entry section is read back through SQLite's blob API: whole and exact
across many pages of the chunk file, from the main file of a store that kept its chunk rows
there, and never once retention removed the row (None, not another row's bytes)."""

from __future__ import annotations

import contextlib
import sqlite3
import zlib
from array import array
from pathlib import Path

from broker.store.sqlite.schema import CHUNK_PAGE_SIZE, STORE_FILE
from tests.integration.test_stream_wire_rows import _started, create_old_chunk_table, declared

#: 300 records of 1 KB with distinct bytes: an entry section of several chunk-file pages.
RECORDS = [bytes([n % 251]) * 1024 for n in range(300)]
SECTION = b"".join(len(r).to_bytes(4, "big") + r for r in RECORDS)
SIZES = array("I", [len(r) for r in RECORDS])


async def test_a_section_of_many_pages_reads_back_exact_and_a_removed_row_reads_none(tmp_path: Path) -> None:
    assert len(SECTION) > 4 * CHUNK_PAGE_SIZE
    await declared(tmp_path, "w")
    s = _started(tmp_path)
    try:
        await s.put_stream_chunk("/", "w", 1, 5000, zlib.crc32(SECTION), SIZES, SECTION)
        other = SECTION[::-1]
        await s.put_stream_chunk("/", "w", 301, 6000, zlib.crc32(other), SIZES, other)
        assert s.read_stream_chunk("/", "w", 1) == (zlib.crc32(SECTION), 300, SECTION)
        assert s.read_stream_chunk("/", "w", 301) == (zlib.crc32(other), 300, other)
        assert s.read_stream_chunk("/", "w", 2) is None
        s.remove_stream_head("/", "w", 300)
        await s.sync()
        assert s.read_stream_chunk("/", "w", 1) is None
        assert s.read_stream_chunk("/", "w", 301) == (zlib.crc32(other), 300, other)
    finally:
        await s.close()


def _older_store_with_a_record_row(path: Path) -> None:
    """The chunk table in the main file holding one row of the record layout (position 1), as a
    store written before the chunk file existed has it."""
    with contextlib.closing(sqlite3.connect(path / STORE_FILE)) as c:
        create_old_chunk_table(c)
        row = (b"/", b"w", 1, 1, 7000, 3, array("I", [0, 0, 2, 3]).tobytes(), b"\x00\x00abc")
        c.execute("INSERT INTO stream_chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
        c.commit()


async def test_a_wire_row_in_the_main_file_reads_back_from_there(tmp_path: Path) -> None:
    await declared(tmp_path, "w")
    _older_store_with_a_record_row(tmp_path)
    s = _started(tmp_path)
    try:
        await s.put_stream_chunk("/", "w", 2, 8000, zlib.crc32(SECTION), SIZES, SECTION)
        assert s.read_stream_chunk("/", "w", 1) is None  # a row of the record layout
        assert s.read_stream_chunk("/", "w", 2) == (zlib.crc32(SECTION), 300, SECTION)
    finally:
        await s.close()
    with contextlib.closing(sqlite3.connect(tmp_path / STORE_FILE)) as c:
        assert c.execute("SELECT count(*) FROM stream_chunks").fetchone()[0] == 2
