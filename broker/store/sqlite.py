"""`SqliteStore`: durable broker state in one SQLite file (standard library `sqlite3`), group commit.

File: `<data dir>/store.sqlite3`, with `store.lock` next to it so two brokers never share a store.

Why these choices:

* **Group commit on a writer thread.** AMQP handlers run on the event loop and must not wait for
  disk, and one transaction per message would cap confirmed throughput at the disk's commit rate.
  Every change is appended to a pending list; one thread takes *everything* pending, applies it in
  one transaction, commits, and then resolves the futures of that batch on the loop (one
  `call_soon_threadsafe` per batch). The busier the broker, the bigger the batches.
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
* **Refuse, never repair.** An existing file is first opened read-only: a file that is not SQLite,
  not ours, from a newer schema, or failing `PRAGMA quick_check` raises `StoreError` and is left
  byte for byte untouched (opened `immutable=1` when no `-wal` exists, so no `-wal`/`-shm` files
  appear next to it either).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any, Literal

from amqpwire.fields import FieldDecodeError, FieldTable
from broker.store.base import Store, StoreError, StoreStats
from broker.store.records import (
    BindingRecord,
    ExchangeRecord,
    MessageRecord,
    PermissionRecord,
    PolicyRecord,
    QueueRecord,
    Snapshot,
    UserRecord,
    VHostRecord,
)

log = logging.getLogger("hashbroker.store")

STORE_FILE = "store.sqlite3"
LOCK_FILE = "store.lock"
SCHEMA_VERSION = 1
APPLICATION_ID = 0x48425354  # "HBST": marks the file as a hashbroker store (PRAGMA application_id)
SQLITE_MAGIC = b"SQLite format 3\x00"

Sync = Literal["normal", "full"]
Check = Literal["quick", "full", "none"]
Op = tuple[str, tuple[Any, ...]]

PERMISSIONS_TABLE = """CREATE TABLE IF NOT EXISTS permissions (
    id INTEGER PRIMARY KEY, vhost BLOB NOT NULL, user TEXT NOT NULL, configure TEXT NOT NULL,
    write TEXT NOT NULL, read TEXT NOT NULL, UNIQUE (vhost, user))"""
"""Added after schema version 1 shipped: created on open when an older store lacks it."""

SCHEMA = """
CREATE TABLE vhosts (
    id INTEGER PRIMARY KEY, name BLOB NOT NULL UNIQUE, description TEXT NOT NULL, tags TEXT NOT NULL);
CREATE TABLE users (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, password_hash TEXT NOT NULL,
    hashing_algorithm TEXT NOT NULL, tags TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS permissions (
    id INTEGER PRIMARY KEY, vhost BLOB NOT NULL, user TEXT NOT NULL, configure TEXT NOT NULL,
    write TEXT NOT NULL, read TEXT NOT NULL, UNIQUE (vhost, user));
CREATE TABLE policies (
    id INTEGER PRIMARY KEY, vhost BLOB NOT NULL, name TEXT NOT NULL, pattern TEXT NOT NULL,
    definition TEXT NOT NULL, priority INTEGER NOT NULL, apply_to TEXT NOT NULL, UNIQUE (vhost, name));
CREATE TABLE exchanges (
    id INTEGER PRIMARY KEY, vhost BLOB NOT NULL, name BLOB NOT NULL, type TEXT NOT NULL,
    durable INTEGER NOT NULL, auto_delete INTEGER NOT NULL, internal INTEGER NOT NULL,
    arguments BLOB NOT NULL, UNIQUE (vhost, name));
CREATE TABLE queues (
    id INTEGER PRIMARY KEY, vhost BLOB NOT NULL, name BLOB NOT NULL, durable INTEGER NOT NULL,
    exclusive INTEGER NOT NULL, auto_delete INTEGER NOT NULL, arguments BLOB NOT NULL,
    UNIQUE (vhost, name));
CREATE TABLE bindings (
    id INTEGER PRIMARY KEY, vhost BLOB NOT NULL, source BLOB NOT NULL, dest_kind TEXT NOT NULL,
    destination BLOB NOT NULL, key BLOB NOT NULL, arguments BLOB NOT NULL,
    UNIQUE (vhost, source, dest_kind, destination, key, arguments));
CREATE INDEX bindings_by_destination ON bindings (vhost, dest_kind, destination);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY, refs INTEGER NOT NULL, exchange BLOB NOT NULL, routing_key BLOB NOT NULL,
    properties BLOB NOT NULL, body BLOB NOT NULL);
CREATE INDEX messages_unreferenced ON messages (id) WHERE refs <= 0;
CREATE TABLE queue_messages (
    vhost BLOB NOT NULL, queue BLOB NOT NULL, seq INTEGER NOT NULL, msg_id INTEGER NOT NULL,
    redelivered INTEGER NOT NULL, PRIMARY KEY (vhost, queue, seq)) WITHOUT ROWID;
"""
TABLES = frozenset(
    {"vhosts", "users", "policies", "exchanges", "queues", "bindings", "messages", "queue_messages"}
)

# -- statements (module constants so consecutive identical statements batch into executemany) --------

_PUT_VHOST = (
    "INSERT INTO vhosts (name, description, tags) VALUES (?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET description = excluded.description, tags = excluded.tags"
)
_PUT_PERMISSION = (
    "INSERT INTO permissions (vhost, user, configure, write, read) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (vhost, user) DO UPDATE SET configure = excluded.configure, write = excluded.write, "
    "read = excluded.read"
)
_PUT_USER = (
    "INSERT INTO users (name, password_hash, hashing_algorithm, tags) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET password_hash = excluded.password_hash, "
    "hashing_algorithm = excluded.hashing_algorithm, tags = excluded.tags"
)
_PUT_POLICY = (
    "INSERT INTO policies (vhost, name, pattern, definition, priority, apply_to) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (vhost, name) DO UPDATE SET pattern = excluded.pattern, definition = excluded.definition, "
    "priority = excluded.priority, apply_to = excluded.apply_to"
)
_PUT_EXCHANGE = (
    "INSERT INTO exchanges (vhost, name, type, durable, auto_delete, internal, arguments) "
    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (vhost, name) DO UPDATE SET type = excluded.type, "
    "durable = excluded.durable, auto_delete = excluded.auto_delete, internal = excluded.internal, "
    "arguments = excluded.arguments"
)
_PUT_QUEUE = (
    "INSERT INTO queues (vhost, name, durable, exclusive, auto_delete, arguments) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (vhost, name) DO UPDATE SET durable = excluded.durable, exclusive = excluded.exclusive, "
    "auto_delete = excluded.auto_delete, arguments = excluded.arguments"
)
_ADD_BINDING = (
    "INSERT OR IGNORE INTO bindings (vhost, source, dest_kind, destination, key, arguments) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
_REMOVE_BINDING = (
    "DELETE FROM bindings WHERE vhost = ? AND source = ? AND dest_kind = ? AND destination = ? "
    "AND key = ? AND arguments = ?"
)
_INSERT_MESSAGE = (
    "INSERT INTO messages (id, refs, exchange, routing_key, properties, body) VALUES (?, ?, ?, ?, ?, ?)"
)
_INSERT_POSITION = (
    "INSERT OR REPLACE INTO queue_messages (vhost, queue, seq, msg_id, redelivered) VALUES (?, ?, ?, ?, 0)"
)
_UNREF_POSITION = (
    "UPDATE messages SET refs = refs - 1 WHERE id = "
    "(SELECT msg_id FROM queue_messages WHERE vhost = ? AND queue = ? AND seq = ?)"
)
_DELETE_POSITION = "DELETE FROM queue_messages WHERE vhost = ? AND queue = ? AND seq = ?"
_MARK_REDELIVERED = "UPDATE queue_messages SET redelivered = 1 WHERE vhost = ? AND queue = ? AND seq = ?"
_UNREF_QUEUE = (
    "UPDATE messages SET refs = refs - 1 WHERE id IN "
    "(SELECT msg_id FROM queue_messages WHERE vhost = ? AND queue = ?)"
)
_DELETE_QUEUE_POSITIONS = "DELETE FROM queue_messages WHERE vhost = ? AND queue = ?"
_COLLECT_GARBAGE = "DELETE FROM messages WHERE refs <= 0"


def _b(name: str) -> bytes:
    """An AMQP name as the bytes the client sent (the broker decodes them with surrogateescape)."""
    return name.encode("utf-8", errors="surrogateescape")


def _s(raw: bytes) -> str:
    return bytes(raw).decode("utf-8", errors="surrogateescape")


def _table(raw: bytes, where: str) -> FieldTable:
    try:
        return FieldTable.decode(raw)
    except FieldDecodeError as exc:
        raise StoreError(f"{where}: stored arguments cannot be decoded ({exc})") from None


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
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._cond = threading.Condition(threading.Lock())
        self._ops: list[Op] = []
        self._futs: list[asyncio.Future[None]] = []
        self._garbage = False  # a removal is pending: collect unreferenced bodies in that transaction
        self._closing = False
        self._closed = False
        self._failure: StoreError | None = None
        row = conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()
        self._next_msg_id = int(row[0]) + 1
        self._commit_hook: Callable[[], None] | None = None
        """Test seam: called on the writer thread after a batch's statements, before COMMIT."""

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
        lock_file = _lock_directory(directory)
        try:
            path = directory / STORE_FILE
            existing = _check_existing(path, check)
            conn = _connect(path, sync)
            if not existing:
                _create_schema(conn, path)
            else:
                try:
                    conn.execute(PERMISSIONS_TABLE)
                except sqlite3.Error as exc:
                    conn.close()
                    raise StoreError(f"{path}: cannot add the permissions table ({exc})") from None
            return cls(directory, conn, lock_file)
        except BaseException:
            if lock_file is not None:
                lock_file.close()
            raise

    # -- loading ------------------------------------------------------------------------------------

    def load(self) -> Snapshot:
        if self._thread is not None:
            raise StoreError(f"{self.path}: load() must be called before start()")
        c = self._conn
        snap = Snapshot()
        try:
            for name, desc, tags in c.execute("SELECT name, description, tags FROM vhosts ORDER BY id"):
                snap.vhosts.append(VHostRecord(_s(name), desc, tuple(json.loads(tags))))
            for name, pw, algo, tags in c.execute(
                "SELECT name, password_hash, hashing_algorithm, tags FROM users ORDER BY id"
            ):
                snap.users.append(UserRecord(name, pw, algo, tuple(json.loads(tags))))
            for vhost, user, conf, write, read in c.execute(
                "SELECT vhost, user, configure, write, read FROM permissions ORDER BY id"
            ):
                snap.permissions.append(PermissionRecord(_s(vhost), user, conf, write, read))
            for vhost, name, pattern, definition, priority, apply_to in c.execute(
                "SELECT vhost, name, pattern, definition, priority, apply_to FROM policies ORDER BY id"
            ):
                snap.policies.append(PolicyRecord(_s(vhost), name, pattern, definition, priority, apply_to))
            where = str(self.path)
            for vhost, name, type_, durable, auto_delete, internal, args in c.execute(
                "SELECT vhost, name, type, durable, auto_delete, internal, arguments "
                "FROM exchanges ORDER BY id"
            ):
                snap.exchanges.append(
                    ExchangeRecord(
                        _s(vhost),
                        _s(name),
                        type_,
                        bool(durable),
                        bool(auto_delete),
                        bool(internal),
                        _table(args, where),
                    )
                )
            for vhost, name, durable, exclusive, auto_delete, args in c.execute(
                "SELECT vhost, name, durable, exclusive, auto_delete, arguments FROM queues ORDER BY id"
            ):
                snap.queues.append(
                    QueueRecord(
                        _s(vhost),
                        _s(name),
                        bool(durable),
                        bool(exclusive),
                        bool(auto_delete),
                        _table(args, where),
                    )
                )
            for vhost, source, kind, dest, key, args in c.execute(
                "SELECT vhost, source, dest_kind, destination, key, arguments FROM bindings ORDER BY id"
            ):
                snap.bindings.append(
                    BindingRecord(_s(vhost), _s(source), kind, _s(dest), _s(key), _table(args, where))
                )
            # One bytes object per stored body even when several queues share it.
            shared: dict[int, tuple[bytes, bytes, str, str]] = {}
            for vhost, queue, seq, redelivered, msg_id, exchange, rk, props, body in c.execute(
                "SELECT qm.vhost, qm.queue, qm.seq, qm.redelivered, m.id, m.exchange, m.routing_key, "
                "m.properties, m.body FROM queue_messages qm "
                "JOIN queues q ON q.vhost = qm.vhost AND q.name = qm.queue "
                "JOIN messages m ON m.id = qm.msg_id ORDER BY q.id, qm.seq"
            ):
                content = shared.get(msg_id)
                if content is None:
                    content = shared[msg_id] = (bytes(props), bytes(body), _s(exchange), _s(rk))
                vq = (_s(vhost), _s(queue))
                snap.messages.setdefault(vq, []).append(
                    MessageRecord(
                        vq[0], vq[1], seq, content[0], content[1], content[2], content[3], bool(redelivered)
                    )
                )
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: cannot read the store ({exc})") from None
        return snap

    # -- lifecycle ----------------------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        if self._thread is not None:
            return
        if self._closed:
            raise StoreError(f"{self.path}: store is closed")
        self._loop = loop or asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._writer, name="hashbroker-store", daemon=True)
        self._thread.start()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        thread = self._thread
        if thread is not None:
            with self._cond:
                self._closing = True
                self._cond.notify()
            await asyncio.to_thread(thread.join)
        else:
            self._finish()

    def _finish(self) -> None:
        """Fold the WAL into the main file and release everything (writer thread, or no thread)."""
        try:
            if self._failure is None:
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
        """Set once a transaction failed; every later write fails with it (restart the broker)."""
        return self._failure

    # -- enqueueing ---------------------------------------------------------------------------------

    def _submit(self, ops: list[Op], fut: asyncio.Future[None] | None = None, garbage: bool = False) -> None:
        if self._thread is None or self._closing or self._closed:
            raise StoreError(f"{self.path}: store is not started (or closed)")
        with self._cond:
            self._ops.extend(ops)
            if fut is not None:
                self._futs.append(fut)
            if garbage:
                self._garbage = True
            self._cond.notify()

    def _new_future(self) -> asyncio.Future[None]:
        assert self._loop is not None
        fut: asyncio.Future[None] = self._loop.create_future()
        if self._failure is not None:
            fut.set_exception(self._failure)
        return fut

    def put_vhost(self, vhost: VHostRecord) -> None:
        self._submit([(_PUT_VHOST, (_b(vhost.name), vhost.description, json.dumps(list(vhost.tags))))])

    def delete_vhost(self, name: str) -> None:
        v = (_b(name),)
        self._submit(
            [
                ("DELETE FROM messages WHERE id IN (SELECT msg_id FROM queue_messages WHERE vhost = ?)", v),
                ("DELETE FROM queue_messages WHERE vhost = ?", v),
                ("DELETE FROM bindings WHERE vhost = ?", v),
                ("DELETE FROM queues WHERE vhost = ?", v),
                ("DELETE FROM exchanges WHERE vhost = ?", v),
                ("DELETE FROM policies WHERE vhost = ?", v),
                ("DELETE FROM permissions WHERE vhost = ?", v),
                ("DELETE FROM vhosts WHERE name = ?", v),
            ]
        )

    def put_user(self, user: UserRecord) -> None:
        self._submit(
            [
                (
                    _PUT_USER,
                    (user.name, user.password_hash, user.hashing_algorithm, json.dumps(list(user.tags))),
                )
            ]
        )

    def delete_user(self, name: str) -> None:
        self._submit(
            [
                ("DELETE FROM permissions WHERE user = ?", (name,)),
                ("DELETE FROM users WHERE name = ?", (name,)),
            ]
        )

    def put_permission(self, permission: PermissionRecord) -> None:
        p = permission
        self._submit([(_PUT_PERMISSION, (_b(p.vhost), p.user, p.configure, p.write, p.read))])

    def delete_permission(self, vhost: str, user: str) -> None:
        self._submit([("DELETE FROM permissions WHERE vhost = ? AND user = ?", (_b(vhost), user))])

    def put_policy(self, policy: PolicyRecord) -> None:
        p = policy
        self._submit(
            [(_PUT_POLICY, (_b(p.vhost), p.name, p.pattern, p.definition, int(p.priority), p.apply_to))]
        )

    def delete_policy(self, vhost: str, name: str) -> None:
        self._submit([("DELETE FROM policies WHERE vhost = ? AND name = ?", (_b(vhost), name))])

    def put_exchange(self, exchange: ExchangeRecord) -> None:
        x = exchange
        self._submit(
            [
                (
                    _PUT_EXCHANGE,
                    (
                        _b(x.vhost),
                        _b(x.name),
                        x.type,
                        int(x.durable),
                        int(x.auto_delete),
                        int(x.internal),
                        x.arguments.encode(),
                    ),
                )
            ]
        )

    def delete_exchange(self, vhost: str, name: str) -> None:
        v, n = _b(vhost), _b(name)
        self._submit(
            [
                ("DELETE FROM bindings WHERE vhost = ? AND source = ?", (v, n)),
                (
                    "DELETE FROM bindings WHERE vhost = ? AND dest_kind = 'exchange' AND destination = ?",
                    (v, n),
                ),
                ("DELETE FROM exchanges WHERE vhost = ? AND name = ?", (v, n)),
            ]
        )

    def put_queue(self, queue: QueueRecord) -> None:
        q = queue
        self._submit(
            [
                (
                    _PUT_QUEUE,
                    (
                        _b(q.vhost),
                        _b(q.name),
                        int(q.durable),
                        int(q.exclusive),
                        int(q.auto_delete),
                        q.arguments.encode(),
                    ),
                )
            ]
        )

    def delete_queue(self, vhost: str, name: str) -> None:
        v, n = _b(vhost), _b(name)
        self._submit(
            [
                (_UNREF_QUEUE, (v, n)),
                (_DELETE_QUEUE_POSITIONS, (v, n)),
                ("DELETE FROM bindings WHERE vhost = ? AND dest_kind = 'queue' AND destination = ?", (v, n)),
                ("DELETE FROM queues WHERE vhost = ? AND name = ?", (v, n)),
            ],
            garbage=True,
        )

    @staticmethod
    def _binding_key(b: BindingRecord) -> tuple[Any, ...]:
        return (
            _b(b.vhost),
            _b(b.source),
            b.destination_kind,
            _b(b.destination),
            _b(b.key),
            b.arguments.encode(),
        )

    def add_binding(self, binding: BindingRecord) -> None:
        if binding.destination_kind not in ("queue", "exchange"):
            raise ValueError(
                f"destination_kind must be 'queue' or 'exchange', not {binding.destination_kind!r}"
            )
        self._submit([(_ADD_BINDING, self._binding_key(binding))])

    def remove_binding(self, binding: BindingRecord) -> None:
        self._submit([(_REMOVE_BINDING, self._binding_key(binding))])

    def persist(
        self,
        vhost: str,
        queues: Sequence[tuple[str, int]],
        properties: bytes,
        body: bytes,
        exchange: str,
        routing_key: str,
    ) -> asyncio.Future[None]:
        fut = self._new_future()
        if fut.done():  # the store has failed: the caller nacks
            return fut
        msg_id = self._next_msg_id
        self._next_msg_id += 1
        v = _b(vhost)
        ops: list[Op] = [
            (_INSERT_MESSAGE, (msg_id, len(queues), _b(exchange), _b(routing_key), properties, body))
        ]
        ops.extend((_INSERT_POSITION, (v, _b(q), seq, msg_id)) for q, seq in queues)
        self._submit(ops, fut)
        return fut

    def remove_messages(self, vhost: str, queue: str, seqs: Iterable[int]) -> None:
        v, q = _b(vhost), _b(queue)
        keys = [(v, q, seq) for seq in seqs]
        if not keys:
            return
        # All unrefs, then all deletes: two executemany runs instead of 2N statements.
        ops: list[Op] = [(_UNREF_POSITION, k) for k in keys]
        ops.extend((_DELETE_POSITION, k) for k in keys)
        self._submit(ops, garbage=True)

    def mark_redelivered(self, vhost: str, queue: str, seqs: Iterable[int]) -> None:
        v, q = _b(vhost), _b(queue)
        ops: list[Op] = [(_MARK_REDELIVERED, (v, q, seq)) for seq in seqs]
        if ops:
            self._submit(ops)

    def purge_queue(self, vhost: str, queue: str) -> None:
        v, q = _b(vhost), _b(queue)
        self._submit([(_UNREF_QUEUE, (v, q)), (_DELETE_QUEUE_POSITIONS, (v, q))], garbage=True)

    def sync(self) -> asyncio.Future[None]:
        fut = self._new_future()
        if not fut.done():
            self._submit([], fut)
        return fut

    # -- the writer thread --------------------------------------------------------------------------

    def _writer(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._ops and not self._futs and not self._closing:
                    cond.wait()
                ops, futs, garbage = self._ops, self._futs, self._garbage
                self._ops, self._futs, self._garbage = [], [], False
                closing = self._closing
            if ops:
                self._commit(ops, futs, garbage)
            elif futs:
                self._resolve(futs, self._failure)
            if closing and not ops and not futs:
                with cond:
                    if not self._ops and not self._futs:
                        break
        self._finish()

    def _commit(self, ops: list[Op], futs: list[asyncio.Future[None]], garbage: bool) -> None:
        if self._failure is not None:
            self._resolve(futs, self._failure)
            return
        conn = self._conn
        error: StoreError | None = None
        try:
            conn.execute("BEGIN")
            _run_grouped(conn, ops)
            if garbage:
                conn.execute(_COLLECT_GARBAGE)
            if self._commit_hook is not None:
                self._commit_hook()
            conn.execute("COMMIT")
        except Exception as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            error = StoreError(f"{self.path}: write failed, store stopped ({exc})")
            self._failure = error
            log.error("%s", error)
        stats = self.stats
        stats.transactions += 1
        stats.operations += len(ops)
        stats.messages_persisted += sum(1 for sql, _ in ops if sql is _INSERT_MESSAGE)
        stats.largest_batch = max(stats.largest_batch, len(futs))
        self._resolve(futs, error)

    def _resolve(self, futs: list[asyncio.Future[None]], error: StoreError | None) -> None:
        if not futs or self._loop is None:
            return
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
            self._loop.call_soon_threadsafe(_settle, futs, error)


def _settle(futs: list[asyncio.Future[None]], error: StoreError | None) -> None:
    """On the loop: resolve a committed (or failed) batch's futures, in submission order."""
    for fut in futs:
        if fut.done():
            continue
        if error is None:
            fut.set_result(None)
        else:
            fut.set_exception(error)


def _run_grouped(conn: sqlite3.Connection, ops: list[Op]) -> None:
    """Run ops in order, turning each run of the same statement into one executemany."""
    i, n = 0, len(ops)
    while i < n:
        sql = ops[i][0]
        j = i + 1
        while j < n and ops[j][0] is sql:
            j += 1
        if j - i == 1:
            conn.execute(sql, ops[i][1])
        else:
            conn.executemany(sql, [params for _, params in ops[i:j]])
        i = j


# -- opening helpers -----------------------------------------------------------------------------------


def _lock_directory(directory: Path) -> IO[bytes] | None:
    """Hold an exclusive lock on `store.lock` for the store's lifetime (released even on SIGKILL)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: SQLite's own locking is all we get
        return None
    lock_path = directory / LOCK_FILE
    try:
        f = open(lock_path, "ab")  # noqa: SIM115 - kept open until close()
    except OSError as exc:
        raise StoreError(f"{lock_path}: cannot create lock file ({exc.strerror or exc})") from None
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise StoreError(
            f"{directory}: data directory is in use by another hashbroker ({lock_path} is locked)"
        ) from None
    return f


def _check_existing(path: Path, check: Check) -> bool:
    """Read-only inspection of an existing store; True when it exists and is usable.

    Nothing here writes: the header is read with open(), SQLite is opened with `mode=ro`, so a
    corrupt, foreign or newer file is refused exactly as it was found.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StoreError(f"{path}: cannot stat store ({exc.strerror or exc})") from None
    if size == 0 and not Path(f"{path}-wal").exists():
        return False  # created but never written (SQLite itself treats this as an empty database)
    try:
        with open(path, "rb") as f:
            header = f.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise StoreError(f"{path}: cannot read store ({exc.strerror or exc})") from None
    if header != SQLITE_MAGIC:
        raise StoreError(f"{path}: not a SQLite database (corrupt or foreign file); refusing to use it")
    # Without a -wal file the main file is the whole database: `immutable=1` reads it without
    # creating -wal/-shm files (plain `mode=ro` would create both for a WAL-mode file). With a -wal
    # left by a crash, `mode=ro` reads the committed transactions in it; the sidecars exist already.
    wal_left = Path(f"{path}-wal").exists()
    try:
        conn = sqlite3.connect(f"{path.as_uri()}?{'mode=ro' if wal_left else 'immutable=1'}", uri=True)
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot open store read-only ({exc})") from None
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if app_id != APPLICATION_ID:
            if not tables and not version:
                return False  # an empty SQLite database: safe to initialise
            raise StoreError(f"{path}: not a hashbroker store (SQLite application_id {app_id:#x})")
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{path}: written by a newer hashbroker (store schema version {version}, "
                f"this version reads up to {SCHEMA_VERSION}); refusing to use it"
            )
        if version < 1:
            raise StoreError(f"{path}: unknown store schema version {version}")
        if check != "none":
            pragma = "quick_check" if check == "quick" else "integrity_check"
            rows = conn.execute(f"PRAGMA {pragma}(1)").fetchall()
            if rows != [("ok",)]:
                problem = str(rows[0][0]).replace("\n", " ") if rows else "no answer"
                raise StoreError(f"{path}: SQLite integrity check failed ({problem}); refusing to use it")
        missing = TABLES - tables
        if missing:
            raise StoreError(f"{path}: store is missing tables {', '.join(sorted(missing))}")
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: corrupt SQLite database ({exc}); refusing to use it") from None
    finally:
        conn.close()
    return True


def _connect(path: Path, sync: Sync) -> sqlite3.Connection:
    try:
        # isolation_level=None: we issue BEGIN/COMMIT ourselves (one transaction per batch).
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            conn.close()
            raise StoreError(f"{path}: cannot switch the store to WAL mode (got {mode})")
        conn.execute(f"PRAGMA synchronous = {sync.upper()}")
        conn.execute("PRAGMA foreign_keys = OFF")
        return conn
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot open store ({exc})") from None


def _create_schema(conn: sqlite3.Connection, path: Path) -> None:
    try:
        conn.execute("BEGIN")
        for statement in SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        conn.close()
        raise StoreError(f"{path}: cannot create store ({exc})") from None
