"""Reading a stream's messages back from the SQLite store, a page at a time.

A stream keeps its whole log, so it cannot keep every body in memory: once the store has
committed a message, the stream may drop the body and read it here when a consumer reaches it.
A store offers this to streams as `store.read_stream_page(vhost, queue, seq, limit)`
(`StreamReader.read_from`, on a reader the store owns and closes with itself); without it,
bodies stay in memory.
Reads go through a read-only connection of their own (WAL lets it read while the writer thread
writes), one range query per page of positions, so a consumer reading a long log from `first`
costs one query per page, not one per message.
"""

from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from broker.store.sqlite.chunks import Row, decode_chunk, index_sizes, wire_crc
from broker.store.sqlite.load import QueueReader
from broker.store.sqlite.schema import CHUNK_FILE, from_blob, to_blob

READ_RANGE = (
    "SELECT qm.seq, m.properties, m.body, m.exchange, m.routing_key FROM queue_messages qm "
    "JOIN messages m ON m.id = qm.msg_id WHERE qm.vhost = ? AND qm.queue = ? AND qm.seq >= ? "
    "AND qm.seq <= ? ORDER BY qm.seq LIMIT ?"
)

#: The index of a stream: per position its chunk time (0: joins the chunk before it) and the sizes
#: its chunk accounting needs. SQLite's length() of a column reads the stored size without loading
#: the value, so this scan reads no body.
READ_INDEX = (
    "SELECT qm.seq, qm.timestamp, length(m.exchange), length(m.routing_key), length(m.properties), "
    "length(m.body) FROM queue_messages qm JOIN messages m ON m.id = qm.msg_id "
    "WHERE qm.vhost = ? AND qm.queue = ? AND qm.seq > ? AND qm.seq <= ? ORDER BY qm.seq LIMIT ?"
)
#: One index row: (seq, chunk time ms or 0, exchange bytes, routing key bytes, properties bytes,
#: body bytes).
IndexRow = tuple[int, int, int, int, int, int]


#: The chunk rows holding positions from `seq` on: the row holding `seq` (the last one starting at
#: or before it) and every later one, in order.
READ_CHUNKS = (
    "SELECT first, sizes, data, timestamp FROM stream_chunks WHERE vhost = ?1 AND queue = ?2 AND first >= "
    "coalesce((SELECT max(first) FROM stream_chunks WHERE vhost = ?1 AND queue = ?2 AND first <= ?3), 0) "
    "ORDER BY first"
)
#: As READ_CHUNKS without `data` (SQLite then reads none of its overflow pages).
READ_CHUNK_SIZES = (
    "SELECT first, sizes, timestamp FROM stream_chunks WHERE vhost = ?1 AND queue = ?2 AND first >= "
    "coalesce((SELECT max(first) FROM stream_chunks WHERE vhost = ?1 AND queue = ?2 AND first <= ?3), 0) "
    "ORDER BY first"
)

#: The chunk row starting at a position.
READ_CHUNK = "SELECT sizes, data FROM stream_chunks WHERE vhost = ? AND queue = ? AND first = ?"
#: As READ_CHUNK with the row's id instead of `data`, which is then read as a blob.
READ_CHUNK_ROW = "SELECT rowid, sizes FROM stream_chunks WHERE vhost = ? AND queue = ? AND first = ?"
#: Whether the main file holds the chunk table (a store that wrote chunk rows before the chunk
#: file existed); `stream_chunks` then names that one.
CHUNKS_IN_MAIN = "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = 'stream_chunks'"

READ_TRACKING = "SELECT kind, reference, value FROM stream_tracking WHERE vhost = ? AND queue = ?"


R = TypeVar("R", Row, IndexRow)

#: Above any stored position (SQLite integers are signed 64-bit).
_LAST_POSITION = (1 << 63) - 1


def _index_rows(first: int, raw: bytes, ts: int, after: int) -> list[IndexRow]:
    """The index rows of one chunk row after position `after` (its time on its first record)."""
    sizes = index_sizes(raw)
    out: list[IndexRow] = []
    s = first
    for i in range(0, len(sizes), 4):
        if s > after:
            out.append((s, ts if s == first else 0, sizes[i], sizes[i + 1], sizes[i + 2], sizes[i + 3]))
        s += 1
    return out


class StreamReader(QueueReader):
    """Page reads of one store file, on the queue reader's read-only connection; `location` is
    `Store.location` (":memory:": nothing stored)."""

    def __init__(self, location: str) -> None:
        super().__init__(Path(location))
        self.location = location
        self._attached = False
        self._chunks_db: str | None = None  # the schema holding `stream_chunks`, once looked up

    def _connection(self) -> sqlite3.Connection:
        """The read-only connection, with the chunk file attached when there is one."""
        conn = super()._connection()
        if not self._attached:
            self._attached = True
            chunks = Path(self.location).with_name(CHUNK_FILE)
            if chunks.exists():
                conn.execute("ATTACH DATABASE ? AS chunks", (f"{chunks.resolve().as_uri()}?mode=ro",))
        return conn

    def read_from(self, vhost: str, queue: str, seq: int, limit: int) -> list[Row]:
        """Up to `limit` stored messages of the queue at position `seq` or later, in order."""

        def rows(
            conn: sqlite3.Connection, v: bytes, q: bytes
        ) -> tuple[Callable[[int], list[Row]], Iterator[list[Row]]]:
            def legacy(upto: int) -> list[Row]:
                return [
                    (int(s), bytes(p), bytes(b), bytes(x).decode("utf-8", "surrogateescape"),
                     bytes(k).decode("utf-8", "surrogateescape"))
                    for s, p, b, x, k in conn.execute(READ_RANGE, (v, q, seq, upto, limit))
                ]  # fmt: skip

            chunks = conn.execute(READ_CHUNKS, (v, q, seq))
            return legacy, (decode_chunk(int(first), sizes, data, seq) for first, sizes, data, _ts in chunks)

        return self._merged(vhost, queue, limit, rows)

    def read_index(self, vhost: str, queue: str, after: int, limit: int) -> list[IndexRow]:
        """Up to `limit` index rows of the stream after position `after`, in order."""

        def rows(
            conn: sqlite3.Connection, v: bytes, q: bytes
        ) -> tuple[Callable[[int], list[IndexRow]], Iterator[list[IndexRow]]]:
            def legacy(upto: int) -> list[IndexRow]:
                return [
                    (int(s), int(t), int(x), int(k), int(p), int(b))
                    for s, t, x, k, p, b in conn.execute(READ_INDEX, (v, q, after, upto, limit))
                ]

            chunks = conn.execute(READ_CHUNK_SIZES, (v, q, after + 1))
            return legacy, (_index_rows(int(first), raw, int(ts), after) for first, raw, ts in chunks)

        return self._merged(vhost, queue, limit, rows)

    def _merged(
        self,
        vhost: str,
        queue: str,
        limit: int,
        rows: Callable[
            [sqlite3.Connection, bytes, bytes], tuple[Callable[[int], list[R]], Iterator[list[R]]]
        ],
    ) -> list[R]:
        """Up to `limit` rows by position: those of the chunk rows (`rows`' iterator, a list per
        chunk, read until enough) merged with those stored a row per record (`rows`' function of
        the last position wanted). Once the chunk rows gave `limit` rows, a record row past the
        last of them cannot be among the first `limit`: it is not read (a stream whose records
        alternate between the layouts would otherwise read each record row again per page)."""
        if self.location == ":memory:":
            return []
        legacy, per_chunk = rows(self._connection(), to_blob(vhost), to_blob(queue))
        chunked: list[R] = []
        for part in per_chunk:
            chunked.extend(part)
            if len(chunked) >= limit:
                break
        upto = chunked[limit - 1][0] if len(chunked) >= limit else _LAST_POSITION
        alone = legacy(upto)
        if not alone:
            return chunked[:limit]
        return list(heapq.merge(alone, chunked))[:limit]

    def read_chunk(self, vhost: str, queue: str, first: int) -> tuple[int, int, bytes] | None:
        """The CRC, record count and entry section of the stream's wire chunk row starting at
        position `first` (None: no such row, or one of the record layout)."""
        if self.location == ":memory:":
            return None
        conn = self._connection()
        key = (to_blob(vhost), to_blob(queue), first)
        try:
            return self._read_chunk_blob(conn, key)
        except sqlite3.OperationalError:  # the table moved files under a reader: read it by value
            self._chunks_db = None
            if conn.in_transaction:
                conn.rollback()
        row = conn.execute(READ_CHUNK, key).fetchone()
        if row is None:
            return None
        crc = wire_crc(row[0])
        return None if crc is None else (crc, (len(row[0]) - 8) // 4, row[1])

    def _read_chunk_blob(
        self, conn: sqlite3.Connection, key: tuple[bytes, bytes, int]
    ) -> tuple[int, int, bytes] | None:
        """`read_chunk` with the entry section read through SQLite's blob API, straight into the
        bytes returned (a column value would be assembled from its pages, then copied again); the
        row and its blob are read in one read transaction, so a head removal committed meanwhile
        cannot hand over another row's bytes."""
        db = self._chunks_db
        if db is None:
            db = self._chunks_db = "main" if conn.execute(CHUNKS_IN_MAIN).fetchone() else "chunks"
        conn.execute("BEGIN")
        try:
            row = conn.execute(READ_CHUNK_ROW, key).fetchone()
            if row is None:
                return None
            crc = wire_crc(row[1])
            if crc is None:
                return None
            with conn.blobopen("stream_chunks", "data", row[0], readonly=True, name=db) as blob:
                data = blob.read()
        finally:
            conn.commit()
        return crc, (len(row[1]) - 8) // 4, data

    def read_tracking(self, vhost: str, queue: str) -> list[tuple[int, str, int]]:
        """The stream's committed tracking rows: (kind, reference, value)."""
        if self.location == ":memory:":
            return []
        rows = self._connection().execute(READ_TRACKING, (to_blob(vhost), to_blob(queue)))
        return [(int(k), from_blob(r), int(v)) for k, r, v in rows]
