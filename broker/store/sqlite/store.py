"""`SqliteStore`: durable broker state in one SQLite file (standard library `sqlite3`), group commit.

File: `<data dir>/store.sqlite3`, with `store.lock` next to it so two brokers never share a store.
The parts live beside this module: `sqlite_schema` (tables and statements), `sqlite_open` (lock,
read-only check, connection), `sqlite_load` (snapshot at start), `sqlite_writer` (the group-commit
thread). This module is the `Store` API that turns broker calls into statements.

Why these choices:

* **Group commit on a writer thread** (see `sqlite_writer`): handlers never wait for disk, and the
  busier the broker, the bigger the transactions.
* **WAL, `synchronous=NORMAL` (default).** A commit appends to the `-wal` file with `write()`; once
  `write()` returned, the data is in the kernel's page cache and survives SIGKILL, a Python crash or
  an OOM kill of the broker: every confirmed message is there after restart (tests/test_store.py
  kills a writer 20 times to check it). It does *not* fsync per commit, so an OS crash or power
  loss may lose the last commits (the database stays consistent). `sync="full"`
  (`synchronous=FULL`) fsyncs the WAL on every commit for power-loss durability, as RabbitMQ's
  message store does before confirming; group commit keeps its cost per batch, not per message.
* **Bodies once, positions per queue.** `messages` holds a published message once with a
  reference count; `queue_messages` holds (vhost, queue, seq) -> message, so a fan-out to N durable
  queues writes one body. Removing the last reference deletes the body in the same transaction.
* **Names as BLOBs.** AMQP names are byte strings the broker decodes with `surrogateescape`;
  storing the bytes keeps names that are not valid UTF-8 exact.
* **Refuse, never repair** (see `sqlite_open`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
from array import array
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from broker.store import records as rec
from broker.store.base import Store, StoreError, StoreStats
from broker.store.page_spool import PageDirectory
from broker.store.sqlite import schema as S
from broker.store.sqlite.chunks import encode_chunk, wire_sizes
from broker.store.sqlite.load import QueueReader, load_snapshot
from broker.store.sqlite.opening import Check, Sync, check_existing, connect, lock_directory
from broker.store.sqlite.schema import SCHEMA_VERSION, STORE_FILE, create_schema, to_blob
from broker.store.sqlite.writer import GroupCommitWriter, Op, Remainder, runs

if TYPE_CHECKING:
    from broker.store.sqlite.stream_pages import StreamReader

__all__ = ["SCHEMA_VERSION", "STORE_FILE", "SqliteStore"]

log = logging.getLogger("hashbroker.store")

# Python's sqlite3 binds int, float, str and bytearray directly but sends every other parameter,
# bytes included, through its adaptation protocol first: no adapter found, it looks `__adapt__` up
# on a type, which formats an AttributeError each time. Names and bodies are bytes, several per
# stored message; an adapter that hands a bytes object back unchanged (bytes() of one is the same
# object) makes the lookup a dictionary hit. The binding is unchanged (a BLOB), and every
# connection in the process (the store's readers too) shares it.
sqlite3.register_adapter(bytes, bytes)

DROP_LAST_REF_RUN = (
    "DELETE FROM messages WHERE refs <= 1 AND id IN "
    "(SELECT msg_id FROM queue_messages WHERE vhost = ? AND queue = ? AND seq BETWEEN ? AND ?)"
)
"""The messages of a run of positions (vhost, queue, first seq, last seq) that no other queue holds."""
UNREF_REST_RUN = Remainder(S.UNREF_RUN)
"""One reference less for the messages of the run that `DROP_LAST_REF_RUN` left (others hold them)."""


def _name_blobs(
    records: Sequence[tuple[int, bytes, bytes, str, str]],
) -> list[tuple[int, bytes, bytes, bytes, bytes]]:
    """The records with their exchange and routing key as stored bytes, each distinct name encoded
    once (a chunk's records mostly share them)."""
    names: dict[str, bytes] = {}
    out: list[tuple[int, bytes, bytes, bytes, bytes]] = []
    for seq, props, body, x, rk in records:
        xb = names.get(x)
        if xb is None:
            xb = names[x] = to_blob(x)
        rkb = names.get(rk)
        if rkb is None:
            rkb = names[rk] = to_blob(rk)
        out.append((seq, props, body, xb, rkb))
    return out


class SqliteStore(Store):
    """See the module docstring. Create with `SqliteStore.open(data_dir)`."""

    persistent = True

    def __init__(self, data_dir: Path, conn: sqlite3.Connection, lock_file: IO[bytes] | None) -> None:
        self.data_dir = data_dir
        self.path = data_dir / STORE_FILE
        self.location = str(self.path)
        self.stats = StoreStats()
        self._conn = conn
        self._lock_file = lock_file
        self._closed = False
        self.pages = PageDirectory(data_dir / "paging")
        self._reader = QueueReader(self.path)
        self._stream_reader: StreamReader | None = None
        row = conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()
        self._next_msg_id = int(row[0]) + 1
        self._writer = GroupCommitWriter(
            conn,
            str(self.path),
            self.stats,
            garbage_sql=S.COLLECT_GARBAGE,
            message_sql=S.INSERT_MESSAGE,
            mark_sql=S.MARK_RUN,
            on_exit=self._finish,
        )

    @property
    def writer(self) -> GroupCommitWriter:
        """The group-commit writer (tests hold a batch open through its `commit_hook`)."""
        return self._writer

    @property
    def _commit_hook(self) -> Callable[[], None] | None:
        """Test seam, the writer's `commit_hook` (called before each COMMIT, on the writer thread)."""
        return self._writer.commit_hook

    @_commit_hook.setter
    def _commit_hook(self, hook: Callable[[], None] | None) -> None:
        self._writer.commit_hook = hook

    # -- opening ------------------------------------------------------------------------------------

    @classmethod
    def open(
        cls, data_dir: str | os.PathLike[str], *, sync: Sync = "normal", check: Check = "quick"
    ) -> SqliteStore:
        """Open (or create) the store in `data_dir`, refusing anything it must not write to.

        `check`: "quick" runs `PRAGMA quick_check` on an existing file (linear in its size, skips
        index/table cross-checks), "full" runs `integrity_check`, "none" only checks version/identity.
        """
        if sync not in ("normal", "full"):
            raise StoreError(f"{data_dir}: unknown sync mode {sync!r} (use 'normal' or 'full')")
        directory = Path(data_dir).expanduser().absolute()
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise StoreError(f"{directory}: cannot create data directory ({exc.strerror or exc})") from None
        if not directory.is_dir():
            raise StoreError(f"{directory}: data directory is not a directory")
        lock_file = lock_directory(directory)
        try:
            path = directory / STORE_FILE
            existing = check_existing(path, check)
            conn = connect(path, sync)
            if not existing:
                create_schema(conn, path)
            S.add_later_tables(conn, path)
            S.add_chunk_table(conn, path)
            S.add_later_columns(conn, path)
            S.add_position_sizes(conn, path)
            return cls(directory, conn, lock_file)
        except BaseException:
            if lock_file is not None:
                lock_file.close()
            raise

    # -- loading ------------------------------------------------------------------------------------

    def load(self, *, messages: bool = True) -> rec.Snapshot:
        if self._writer.started:
            raise StoreError(f"{self.path}: load() must be called before start()")
        return load_snapshot(self._conn, self.path, messages=messages)

    def read_queue(
        self, vhost: str, queue: str, after: int, upto: int, limit: int
    ) -> list[tuple[int, bool, str, str, bytes, bytes]]:
        return self._reader.read(vhost, queue, after, upto, limit)

    def queue_seqs(self, vhost: str, queue: str, after: int, upto: int) -> list[int]:
        return self._reader.seqs(vhost, queue, after, upto)

    # -- lifecycle ----------------------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        if self._writer.started:
            return
        if self._closed:
            raise StoreError(f"{self.path}: store is closed")
        self._writer.start(loop or asyncio.get_running_loop())

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._reader.close()
        if self._stream_reader is not None:
            # an open reader would keep the -wal file, and the next start would take the clean
            # stop for a crash and check every page
            self._stream_reader.close()
            self._stream_reader = None
        if self._writer.started:
            await self._writer.close()
        else:
            self._finish()

    def _finish(self) -> None:
        """Fold the WAL into the main file and release everything (writer thread, or no thread)."""
        try:
            if self._writer.failure is None:
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:  # pragma: no cover - a failing disk at shutdown
            log.warning("store checkpoint at close failed: %s", exc)
        finally:
            self._conn.close()
            if self._lock_file is not None:
                self._lock_file.close()
                self._lock_file = None

    @property
    def failure(self) -> StoreError | None:
        """The writer's current fault (see `sqlite_writer`): set while writes fail, None once they settle."""
        return self._writer.failure

    # -- statements ---------------------------------------------------------------------------------

    def put_vhost(self, vhost: rec.VHostRecord) -> None:
        self._writer.submit(
            [(S.PUT_VHOST, (to_blob(vhost.name), vhost.description, json.dumps(list(vhost.tags))))]
        )

    def delete_vhost(self, name: str) -> None:
        v = (to_blob(name),)
        self._writer.submit(
            [
                ("DELETE FROM messages WHERE id IN (SELECT msg_id FROM queue_messages WHERE vhost = ?)", v),
                ("DELETE FROM queue_messages WHERE vhost = ?", v),
                ("DELETE FROM bindings WHERE vhost = ?", v),
                ("DELETE FROM queues WHERE vhost = ?", v),
                ("DELETE FROM exchanges WHERE vhost = ?", v),
                ("DELETE FROM policies WHERE vhost = ?", v),
                ("DELETE FROM permissions WHERE vhost = ?", v),
                ("DELETE FROM delayed_messages WHERE vhost = ?", v),
                ("DELETE FROM stream_tracking WHERE vhost = ?", v),
                ("DELETE FROM stream_chunks WHERE vhost = ?", v),
                ("DELETE FROM vhosts WHERE name = ?", v),
            ]
        )

    def put_user(self, user: rec.UserRecord) -> None:
        self._writer.submit(
            [
                (
                    S.PUT_USER,
                    (user.name, user.password_hash, user.hashing_algorithm, json.dumps(list(user.tags))),
                )
            ]
        )

    def delete_user(self, name: str) -> None:
        self._writer.submit(
            [
                ("DELETE FROM permissions WHERE user = ?", (name,)),
                ("DELETE FROM users WHERE name = ?", (name,)),
            ]
        )

    def put_permission(self, permission: rec.PermissionRecord) -> None:
        p = permission
        self._writer.submit([(S.PUT_PERMISSION, (to_blob(p.vhost), p.user, p.configure, p.write, p.read))])

    def delete_permission(self, vhost: str, user: str) -> None:
        self._writer.submit(
            [("DELETE FROM permissions WHERE vhost = ? AND user = ?", (to_blob(vhost), user))]
        )

    def put_policy(self, policy: rec.PolicyRecord) -> None:
        p = policy
        self._writer.submit(
            [(S.PUT_POLICY, (to_blob(p.vhost), p.name, p.pattern, p.definition, int(p.priority), p.apply_to))]
        )

    def delete_policy(self, vhost: str, name: str) -> None:
        self._writer.submit([("DELETE FROM policies WHERE vhost = ? AND name = ?", (to_blob(vhost), name))])

    def _put_named(self, sql: str, record: rec.NamedInVHost, *values: object) -> None:
        """Insert or update the row of a thing named within a vhost: its key (both names as
        bytes), then `values`."""
        self._writer.submit([(sql, (to_blob(record.vhost), to_blob(record.name), *values))])

    def put_exchange(self, exchange: rec.ExchangeRecord) -> None:
        x = exchange
        flags = (int(x.durable), int(x.auto_delete), int(x.internal))
        self._put_named(S.PUT_EXCHANGE, x, x.type, *flags, x.arguments.encode())

    def delete_exchange(self, vhost: str, name: str) -> None:
        v, n = to_blob(vhost), to_blob(name)
        self._writer.submit(
            [
                ("DELETE FROM bindings WHERE vhost = ? AND source = ?", (v, n)),
                (
                    "DELETE FROM bindings WHERE vhost = ? AND dest_kind = 'exchange' AND destination = ?",
                    (v, n),
                ),
                ("DELETE FROM exchanges WHERE vhost = ? AND name = ?", (v, n)),
                ("DELETE FROM delayed_messages WHERE vhost = ? AND exchange = ?", (v, n)),
            ]
        )

    def put_queue(self, queue: rec.QueueRecord) -> None:
        q = queue
        flags = (int(q.durable), int(q.exclusive), int(q.auto_delete))
        members = json.dumps(list(q.members)) if q.members else ""
        self._put_named(S.PUT_QUEUE, q, *flags, q.arguments.encode(), members, q.leader)

    def delete_queue(self, vhost: str, name: str) -> None:
        v, n = to_blob(vhost), to_blob(name)
        self._writer.submit(
            [
                (S.UNREF_QUEUE, (v, n)),
                (S.DELETE_QUEUE_POSITIONS, (v, n)),
                ("DELETE FROM bindings WHERE vhost = ? AND dest_kind = 'queue' AND destination = ?", (v, n)),
                ("DELETE FROM queues WHERE vhost = ? AND name = ?", (v, n)),
                ("DELETE FROM stream_tracking WHERE vhost = ? AND queue = ?", (v, n)),
                ("DELETE FROM stream_chunks WHERE vhost = ? AND queue = ?", (v, n)),
            ],
            garbage=True,
        )

    @staticmethod
    def _binding_key(b: rec.BindingRecord) -> tuple[Any, ...]:
        return (
            to_blob(b.vhost),
            to_blob(b.source),
            b.destination_kind,
            to_blob(b.destination),
            to_blob(b.key),
            b.arguments.encode(),
        )

    def add_binding(self, binding: rec.BindingRecord) -> None:
        if binding.destination_kind not in ("queue", "exchange"):
            raise ValueError(
                f"destination_kind must be 'queue' or 'exchange', not {binding.destination_kind!r}"
            )
        self._writer.submit([(S.ADD_BINDING, self._binding_key(binding))])

    def remove_binding(self, binding: rec.BindingRecord) -> None:
        self._writer.submit([(S.REMOVE_BINDING, self._binding_key(binding))])

    def write_messages(self, vhost: str, messages: Sequence[rec.MessageWrite]) -> asyncio.Future[None]:
        """The message rows (a reference count each), then the position rows: two statement runs
        (two executemany calls in the writer) and one future, however many messages."""
        fut = self._writer.new_future()
        if fut.done():  # the store has failed: the caller nacks
            return fut
        msg_id = self._next_msg_id
        self._next_msg_id += len(messages)
        v = to_blob(vhost)
        message_sql, position_sql = S.INSERT_MESSAGE, S.INSERT_POSITION
        ops: list[Op] = []
        positions: list[Op] = []
        weight = 0
        for queues, props, body, exchange, routing_key in messages:
            size = len(body)
            ops.append(
                (message_sql, (msg_id, len(queues), to_blob(exchange), to_blob(routing_key), props, body))
            )
            positions.extend((position_sql, (v, to_blob(q), seq, msg_id, size)) for q, seq in queues)
            weight += size + len(props)
            msg_id += 1
        ops += positions
        # the statements' tuples and the future cost about as much again as a small message
        self._writer.submit(ops, fut, weight=weight + 256 * len(ops))
        return fut

    def persist_records(
        self,
        vhost: str,
        queue: str,
        records: Sequence[tuple[int, bytes, bytes, str, str]],
        timestamp: int = 0,
    ) -> asyncio.Future[None]:
        """One chunk row (broker.store.sqlite.chunks) holding all the records: one statement
        and one future for the chunk, as osiris writes a chunk. Records at positions that are not
        consecutive (a stream keeping persistent messages only) are written a row per record."""
        first, last = records[0][0], records[-1][0]
        if last - first + 1 != len(records):
            return super().persist_records(vhost, queue, records, timestamp)
        fut = self._writer.new_future()
        if fut.done():
            return fut
        sizes, data, body_bytes = encode_chunk(_name_blobs(records))
        v, q = to_blob(vhost), to_blob(queue)
        op: Op = (
            (S.INSERT_TIMED_CHUNK, (v, q, first, last, timestamp, body_bytes, sizes, data))
            if timestamp
            else (S.INSERT_CHUNK, (v, q, first, last, body_bytes, sizes, data))
        )
        self._writer.submit([op], fut, weight=len(data) + len(sizes) + 512)
        return fut

    keeps_stream_chunks = True

    def put_stream_chunk(
        self, vhost: str, queue: str, first: int, timestamp: int, crc: int, sizes: array[int], section: bytes
    ) -> asyncio.Future[None]:
        """One chunk row in the wire layout (broker.store.sqlite.chunks), its time included."""
        fut = self._writer.new_future()
        if fut.done():
            return fut
        raw = wire_sizes(crc, sizes)
        body_bytes = len(section) - 4 * len(sizes)
        row = (
            to_blob(vhost),
            to_blob(queue),
            first,
            first + len(sizes) - 1,
            timestamp,
            body_bytes,
            raw,
            section,
        )
        self._writer.submit([(S.INSERT_TIMED_CHUNK, row)], fut, weight=len(section) + len(raw) + 512)
        return fut

    def _streams(self) -> StreamReader:
        """The read-only connection streams read their pages, index and tracking through, opened
        when a stream first reads (the module is imported only then)."""
        if self._stream_reader is None:
            from broker.store.sqlite.stream_pages import StreamReader

            self._stream_reader = StreamReader(self.location)
        return self._stream_reader

    def read_stream_chunk(self, vhost: str, queue: str, first: int) -> tuple[int, int, bytes] | None:
        return self._streams().read_chunk(vhost, queue, first)

    def remove_stream_head(self, vhost: str, queue: str, upto: int) -> None:
        """A stream's retention dropped every position up to `upto`: whole chunk rows, and the
        rows of records written a row each (before chunk rows existed, or a stream's first record
        of a loop turn)."""
        key = (to_blob(vhost), to_blob(queue), upto)
        self._writer.submit(
            [(S.TRUNCATE_CHUNKS, key), (S.UNREF_STREAM_HEAD, key), (S.DELETE_STREAM_HEAD, key)],
            garbage=True,
        )

    def remove_messages(self, vhost: str, queue: str, seqs: Iterable[int]) -> None:
        v, q = to_blob(vhost), to_blob(queue)
        seqs = list(seqs)
        if not seqs:
            return
        # Messages losing their last reference are deleted, then the others (fan-outs that other
        # queues still hold) lose one reference, then the positions go: each a statement per run of
        # consecutive positions (an ack of a prefetch window is one run), the second skipped when
        # the first deleted a message for every position. No reference count reaches zero, so no
        # garbage pass is needed. Their redelivered marks still held are dropped.
        keys = [(v, q, a, b) for a, b in runs(seqs)]
        ops: list[Op] = [(DROP_LAST_REF_RUN, k) for k in keys]
        ops.extend((UNREF_REST_RUN, k) for k in keys)
        ops.extend((S.DELETE_RUN, k) for k in keys)
        self._writer.submit(ops, unmark=((v, q), seqs))

    def mark_redelivered(self, vhost: str, queue: str, seqs: Iterable[int]) -> None:
        """Held by the writer until its next batch, dropped if the positions go first."""
        self._writer.mark((to_blob(vhost), to_blob(queue)), seqs)

    def purge_queue(self, vhost: str, queue: str) -> None:
        v, q = to_blob(vhost), to_blob(queue)
        self._writer.submit([(S.UNREF_QUEUE, (v, q)), (S.DELETE_QUEUE_POSITIONS, (v, q))], garbage=True)

    def read_stream_page(
        self, vhost: str, queue: str, seq: int, limit: int
    ) -> list[tuple[int, bytes, bytes, str, str]]:
        """Up to `limit` committed messages of a stream from position `seq` on, for streams that
        page their bodies out of memory (broker.store.sqlite.stream_pages)."""
        return self._streams().read_from(vhost, queue, seq, limit)

    def read_stream_index(
        self, vhost: str, queue: str, after: int, limit: int
    ) -> list[tuple[int, int, int, int, int, int]]:
        """A stream's index after position `after`, without bodies: (seq, chunk time or 0, exchange,
        routing key, properties and body sizes), so a restart rebuilds the log's offsets, chunks
        and retention and leaves the bodies to `read_stream_page`."""
        return self._streams().read_index(vhost, queue, after, limit)

    def put_stream_tracking(
        self, vhost: str, queue: str, rows: Iterable[tuple[int, str, int]]
    ) -> asyncio.Future[None]:
        v, q = to_blob(vhost), to_blob(queue)
        fut = self._writer.new_future()
        ops: list[Op] = [(S.PUT_TRACKING, (v, q, kind, to_blob(ref), value)) for kind, ref, value in rows]
        if ops and not fut.done():
            self._writer.submit(ops, fut)
        elif not fut.done():
            fut.set_result(None)
        return fut

    def read_stream_tracking(self, vhost: str, queue: str) -> list[tuple[int, str, int]]:
        return self._streams().read_tracking(vhost, queue)

    def sync(self) -> asyncio.Future[None]:
        fut = self._writer.new_future()
        if not fut.done():
            self._writer.submit([], fut)
        return fut

    # -- quorum queues and streams --------------------------------------------------------------------

    def set_delivery_state(
        self, vhost: str, queue: str, states: Iterable[tuple[int, bool, int, int]]
    ) -> None:
        """(seq, checked_out, delivery_count, return_order) of quorum messages: what a restart
        returns, counts and where it puts them."""
        v, q = to_blob(vhost), to_blob(queue)
        ops: list[Op] = [
            (S.SET_DELIVERY_STATE, (int(out), count, order, v, q, seq)) for seq, out, count, order in states
        ]
        if ops:  # a redelivered mark still held would come after these: dropped, these say it all
            self._writer.submit(ops, unmark=((v, q), [op[1][5] for op in ops]))

    def set_timestamps(self, vhost: str, queue: str, stamps: Iterable[tuple[int, int]]) -> None:
        """(seq, ms) of stream messages: the chunk time `x-stream-offset` timestamps resolve against."""
        v, q = to_blob(vhost), to_blob(queue)
        ops: list[Op] = []
        for seq, ts in stamps:  # the chunk's first record is a row of its own or starts a chunk row
            ops += ((S.SET_TIMESTAMP, (ts, v, q, seq)), (S.SET_CHUNK_TIMESTAMP, (ts, v, q, seq)))
        if ops:
            self._writer.submit(ops)

    def set_dead_letters(self, vhost: str, queue: str, held: Iterable[tuple[int, str, int]]) -> None:
        """(seq, reason, order) of quorum messages now held in their queue's dead-letter store: a
        restart holds them again, in that order, instead of putting them back in the queue."""
        v, q = to_blob(vhost), to_blob(queue)
        ops: list[Op] = [(S.SET_DEAD_LETTER, (reason, order, v, q, seq)) for seq, reason, order in held]
        if ops:
            self._writer.submit(ops)

    # -- x-delayed-message ----------------------------------------------------------------------------

    def put_delayed(self, record: rec.DelayedRecord) -> None:
        r = record
        row = (
            to_blob(r.vhost),
            r.key,
            to_blob(r.exchange),
            r.due_ms,
            to_blob(r.routing_key),
            r.properties,
            r.body,
        )
        self._writer.submit([(S.PUT_DELAYED, row)], weight=len(r.body) + len(r.properties) + 256)

    def remove_delayed(self, vhost: str, keys: Iterable[int]) -> None:
        v = to_blob(vhost)
        ops: list[Op] = [(S.REMOVE_DELAYED, (v, key)) for key in keys]
        if ops:
            self._writer.submit(ops)
