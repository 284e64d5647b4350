"""The store's writer folds the WAL files into their databases itself, every few megabytes
committed and after the batch's futures were resolved, so no confirm waits for a checkpoint of the
stream chunk file's 64 KB pages: left to SQLite's automatic checkpoint (1,000 pages), that file's
WAL grows to 64 MB and is copied in one go inside a COMMIT."""

from __future__ import annotations

import zlib
from array import array
from pathlib import Path

from broker.store import QueueRecord, VHostRecord
from broker.store.sqlite.schema import CHUNK_FILE
from broker.store.sqlite.writer import CHECKPOINT_BYTES
from tests.integration.test_stream_wire_rows import STREAM, _started

RECORD = b"x" * 1000
SECTION = (len(RECORD)).to_bytes(4, "big") + RECORD
PER_CHUNK = 200


async def test_chunk_file_wal_stays_small(tmp_path: Path) -> None:
    s = _started(tmp_path)
    try:
        s.put_vhost(VHostRecord("/"))
        s.put_queue(QueueRecord("/", "t", arguments=STREAM))
        section = SECTION * PER_CHUNK
        sizes = array("I", [len(RECORD)] * PER_CHUNK)
        crc = zlib.crc32(section)
        written = 0
        first = 0
        while written < 40 << 20:  # ten times the checkpoint interval, under the 64 MB SQLite waits for
            await s.put_stream_chunk("/", "t", first, 5000, crc, sizes, section)
            first += PER_CHUNK
            written += len(section)
        wal = tmp_path / (CHUNK_FILE + "-wal")
        assert wal.exists()
        # the WAL restarts from its beginning after each checkpoint: it never holds much more than
        # one interval plus a batch
        assert wal.stat().st_size < 4 * CHECKPOINT_BYTES, wal.stat().st_size
        assert (tmp_path / CHUNK_FILE).stat().st_size > 30 << 20  # the chunks reached the database
    finally:
        await s.close()
