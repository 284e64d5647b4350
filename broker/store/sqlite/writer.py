"""The store's writer thread: group commit of everything pending, futures resolved on the loop.

AMQP handlers run on the event loop and must not wait for disk, and one transaction per message
would cap confirmed throughput at the disk's commit rate. So every change is appended to a pending
list; one thread takes *everything* pending, applies it in one transaction, commits, and then
resolves the futures of that batch on the loop (one `call_soon_threadsafe` per batch). The busier
the broker, the bigger the batches.

A failed transaction (disk full, I/O error, a store file not writable) is rolled back and puts the
writer in a *fault*: the batch's futures fail (its publishes are nacked and taken out of their
queues by the caller), while the statements nobody waits for (acks' removals, declarations) are
kept and retried first in the next batch, so the store does not lose them. Every later batch is
tried again, and a retry runs every `RETRY_SECONDS` while only kept statements wait; the first
commit that succeeds ends the fault. No restart is needed when the space comes back.

Store files deleted or replaced under the broker (`broker.store.health`) stop the writer for good:
SQLite would go on committing into unlinked files, so nothing can be confirmed until a restart.
A fault is logged once when it starts and once when it ends, never per batch or per publish, and
`on_fault` reports each change on the loop (for an alarm).

The writer's backlog is bounded as RabbitMQ's credit flow bounds a message store that falls
behind: publishes carry their size (`weight`), and once the bytes submitted but not yet committed
pass `FLOW_HIGH` the writer is in *flow* (`on_flow(True)`, so the broker stops reading publishers'
sockets) until a commit has brought the backlog under `FLOW_LOW` (`on_flow(False)`). Without it a
client publishing persistent messages faster than the disk commits them grows the process by the
whole difference.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from broker.store.base import StoreError, StoreStats
from broker.store.health import FileProblem, StoreFiles
from broker.store.sqlite.schema import CHUNK_FILE

log = logging.getLogger("hashbroker.store")

Op = tuple[str, tuple[Any, ...]]
"""One statement and its parameters."""

RETRY_SECONDS = 1.0
"""In a fault, how often the kept statements are retried when nothing new arrives."""
WATCH_SECONDS = 2.0
"""When idle, how often the store files are checked (a deleted file raises the alarm unprompted)."""
SETTLE_SECONDS = 2.0
"""A fault ends after commits have succeeded, with none failing, for this long. A disk that is
nearly full lets a small commit through now and then (SQLite reuses space in its WAL); without
this the fault would be logged and reported again at every such flap."""
FLOW_HIGH = 8 << 20
"""Bytes submitted and not yet committed above which publishers wait (see the module docstring).
Group commit needs no more: a batch of 8 MB commits in one transaction as fast as a bigger one."""
FLOW_LOW = 2 << 20
"""... and below which they go on: the gap keeps flow from flapping at every batch."""
CHECKPOINT_BYTES = 4 << 20
"""Committed bytes (publishes' weight) after which the writer checkpoints the WAL files itself."""


class OwnStatements(NamedTuple):
    """The statements the writer runs, or counts, of its own accord (see `GroupCommitWriter`)."""

    garbage: str
    message: str
    mark: str


class GroupCommitWriter:
    """Applies submitted statements on one thread, a batch per transaction, in submission order.

    `where` is the store file's path (its files are watched when it exists at `start`).
    `garbage_sql` runs at the end of a batch that asked for it (a purge or a deletion left messages
    nobody references), and `message_sql` is the statement counted in `stats.messages_persisted`.
    `on_exit` runs on the writer thread once the last batch committed after `close`.

    Marks (`mark`: `mark_sql` with (vhost, queue, first, last), runs of deliveries awaiting
    their ack) are held
    apart until the writer takes its next batch and go at its end, after every statement submitted
    before them. A removal of the same positions submitted meanwhile (`submit(..., unmark=)`, the
    ack) drops them: a consumer acking as fast as the writer commits then costs one statement per
    message instead of two. They reach the disk no later than they would have as plain statements.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        where: str,
        stats: StoreStats,
        *,
        garbage_sql: str,
        message_sql: str,
        on_exit: Callable[[], None],
        mark_sql: str = "",
    ) -> None:
        self._conn = conn
        self._where = where
        self._stats = stats
        self._sql = OwnStatements(garbage_sql, message_sql, mark_sql)
        self._marks: dict[tuple[bytes, bytes], set[int]] = {}  # by (vhost, queue), under _cond
        self._on_exit = on_exit
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._cond = threading.Condition(threading.Lock())
        self._ops: list[Op] = []
        self._unowned: list[Op] = []  # the part of _ops submitted without a future
        self._futs: list[asyncio.Future[None]] = []
        self._garbage = False
        self._closing = False
        # flow: bytes submitted (pending) and being committed (batch), under _cond
        self._pending_weight = 0
        self._batch_weight = 0
        self.flow = False
        """Set (on the loop) while the backlog is over FLOW_HIGH and not yet back under FLOW_LOW."""
        self.on_flow: Callable[[bool], None] | None = None
        """Called on the loop when `flow` changes."""
        self._files: StoreFiles | None = None
        # fault state: written on the writer thread, read anywhere (single attribute reads)
        self._fault: StoreError | None = None
        self._fatal = False
        self._kept: list[Op] = []
        self._kept_garbage = False
        self._failed_batches = 0
        self._failed_futures = 0
        self._clean_since: float | None = None  # in a fault: when the commits started succeeding
        self._since_checkpoint = 0  # bytes committed since the last checkpoint
        self.commit_hook: Callable[[], None] | None = None
        """Test seam: called on the writer thread after a batch's statements, before COMMIT."""
        self.on_fault: Callable[[str | None], None] | None = None
        """Called on the loop with the fault's one-line reason when one starts, None when it ends."""

    @property
    def started(self) -> bool:
        return self._thread is not None

    @property
    def failure(self) -> StoreError | None:
        """The current fault: set while writes fail, None again once a commit succeeded."""
        return self._fault

    @property
    def fault(self) -> str | None:
        """The current fault as one line (see `broker.store.health.fault_of`)."""
        fault = self._fault
        return None if fault is None else str(fault)

    @property
    def kept(self) -> int:
        """Statements of failed batches waiting to be retried."""
        return len(self._kept)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        # SQLite maps -shm into memory: should a SIGBUS get past the file checks, the process at
        # least says so on stderr instead of vanishing.
        if not faulthandler.is_enabled():
            faulthandler.enable()
        self._files = StoreFiles.probe(self._where, CHUNK_FILE)
        self._thread = threading.Thread(target=self._run, name="hashbroker-store", daemon=True)
        self._thread.start()

    async def close(self) -> None:
        """Commit what is pending, then stop the thread (which runs `on_exit`)."""
        thread = self._thread
        if thread is None:
            return
        with self._cond:
            self._closing = True
            self._cond.notify()
        await asyncio.to_thread(thread.join)

    def mark(self, where: tuple[bytes, bytes], seqs: Iterable[int]) -> None:
        """Hold `mark_sql` for these positions of queue `where` for the next batch (see the class
        docstring)."""
        if self._thread is None or self._closing:
            raise StoreError(f"{self._where}: store is not started (or closed)")
        with self._cond:
            held = self._marks.get(where)
            if held is None:
                self._marks[where] = set(seqs)
            else:
                held.update(seqs)
            self._cond.notify()

    def submit(
        self,
        ops: list[Op],
        fut: asyncio.Future[None] | None = None,
        garbage: bool = False,
        weight: int = 0,
        unmark: tuple[tuple[bytes, bytes], Iterable[int]] | None = None,
    ) -> None:
        """Queue `ops` for the next batch; `fut` resolves once they committed (or the batch failed).

        With a future, a failed batch drops `ops` (the caller learns it from the future); without
        one, nobody could be told, so they are kept and retried until they commit. `weight` is the
        bytes `ops` hold (a message's body and properties), counted towards flow until committed.
        `unmark`: (vhost, queue) and positions whose held marks `ops` make pointless.
        """
        if self._thread is None or self._closing:
            raise StoreError(f"{self._where}: store is not started (or closed)")
        with self._cond:
            if unmark is not None and self._marks:
                held = self._marks.get(unmark[0])
                if held:
                    held.difference_update(unmark[1])
            self._ops.extend(ops)
            if fut is not None:
                self._futs.append(fut)
            else:
                self._unowned.extend(ops)
            if garbage:
                self._garbage = True
            self._cond.notify()
            if not weight:
                return
            self._pending_weight += weight
            if self.flow or self._pending_weight + self._batch_weight <= FLOW_HIGH:
                return
            self.flow = True
        if self.on_flow is not None:
            self.on_flow(True)

    @property
    def backlog(self) -> int:
        """Bytes of publishes submitted and not yet committed."""
        with self._cond:
            return self._pending_weight + self._batch_weight

    def _flow_check(self) -> None:
        """On the loop, after a commit: leave flow once the backlog is under FLOW_LOW."""
        with self._cond:
            if not self.flow or self._pending_weight + self._batch_weight >= FLOW_LOW:
                return
            self.flow = False
        if self.on_flow is not None:
            self.on_flow(False)

    def new_future(self) -> asyncio.Future[None]:
        """A future on the writer's loop, already failed when the writer has stopped for good."""
        assert self._loop is not None
        fut: asyncio.Future[None] = self._loop.create_future()
        if self._fatal and self._fault is not None:
            fut.set_exception(self._fault)
        return fut

    # -- on the writer thread -------------------------------------------------------------------------

    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                timed_out = False
                while (
                    not self._ops
                    and not self._futs
                    and not self._marks
                    and not self._closing
                    and not timed_out
                ):
                    timed_out = not cond.wait(self._idle_timeout())
                ops, unowned, futs, garbage = self._ops, self._unowned, self._futs, self._garbage
                self._ops, self._unowned, self._futs, self._garbage = [], [], [], False
                marks, self._marks = self._marks, {}
                self._batch_weight, self._pending_weight = self._pending_weight, 0
                closing = self._closing
            if marks:
                held = self._held_marks(marks)
                ops.extend(held)
                unowned.extend(held)
            if ops or (self._kept and not self._fatal and (futs or timed_out or closing)):
                self._commit(ops, unowned, futs, garbage)
            if self._batch_weight:  # committed or failed: either way no longer held
                with cond:
                    self._batch_weight = 0
                    flow = self.flow
                if flow and self._loop is not None:
                    with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting
                        self._loop.call_soon_threadsafe(self._flow_check)
            elif futs:
                self._resolve(futs, self._fault if self._fatal else None)
            elif timed_out:
                self._check_idle()
            if closing and not ops and not futs:
                with cond:
                    if not self._ops and not self._futs and not self._marks:
                        break
        self._on_exit()

    def _held_marks(self, marks: dict[tuple[bytes, bytes], set[int]]) -> list[Op]:
        sql = self._sql.mark
        return [(sql, (v, q, a, b)) for (v, q), seqs in marks.items() for a, b in runs(seqs)]

    def _idle_timeout(self) -> float | None:
        if self._fatal:
            return None
        if self._kept:
            return RETRY_SECONDS
        watch = WATCH_SECONDS if self._files is not None else None
        if self._clean_since is not None:
            return SETTLE_SECONDS if watch is None else min(SETTLE_SECONDS, watch)
        return watch

    def _check_idle(self) -> None:
        if self._fault is not None and not self._fatal:
            self._settle()
        files = self._files
        if files is None or self._fatal:
            return
        try:
            files.check()
        except FileProblem as problem:
            if problem.fatal:
                self._enter_fault(
                    StoreError(f"{self._where}: {problem}; store stopped until a restart"), True
                )

    def _commit(
        self, ops: list[Op], unowned: list[Op], futs: list[asyncio.Future[None]], garbage: bool
    ) -> None:
        if self._fatal:
            self._resolve(futs, self._fault)
            return
        kept, garbage = self._kept, garbage or self._kept_garbage
        batch = kept + ops if kept else ops
        conn = self._conn
        error: StoreError | None = None
        fatal = False
        try:
            if self._files is not None:
                self._files.check()
            conn.execute("BEGIN")
            run_grouped(conn, batch)
            if garbage:
                conn.execute(self._sql.garbage)
            if self.commit_hook is not None:
                self.commit_hook()
            if self._files is not None:
                self._files.check()
            conn.execute("COMMIT")
        except FileProblem as problem:
            fatal = problem.fatal
            self._rollback()
            ending = "store stopped until a restart" if fatal else "writes paused"
            error = StoreError(f"{self._where}: {problem}; {ending}")
        except Exception as exc:
            self._rollback()
            error = StoreError(f"{self._where}: write failed ({exc})")
        stats = self._stats
        stats.transactions += 1
        if error is None:
            stats.operations += len(batch)
            message_sql = self._sql.message
            stats.messages_persisted += sum(1 for sql, _ in ops if sql is message_sql)
            stats.largest_batch = max(stats.largest_batch, len(futs))
            self._kept, self._kept_garbage = [], False
            if self._files is not None:
                self._files.note()
            if self._fault is not None:
                if self._clean_since is None:
                    self._clean_since = time.monotonic()
                self._settle()
        else:
            self._kept = [] if fatal else kept + unowned
            self._kept_garbage = garbage and not fatal
            self._failed_batches += 1
            self._failed_futures += len(futs)
            self._clean_since = None
            self._enter_fault(error, fatal)
        self._resolve(futs, error)
        if error is None:
            self._checkpoint()

    def _checkpoint(self) -> None:
        """Fold the WAL files into their databases once `CHECKPOINT_BYTES` were committed since the
        last time, after the batch's futures were resolved. SQLite's own automatic checkpoint runs
        inside COMMIT, so every confirm of that batch waits for it, and the stream chunk file's
        (64 KB pages, 1,000 of them) copies 64 MB at once: here it is smaller, more frequent and
        after the confirms; passive, so a reader holding an old snapshot only postpones part of it."""
        self._since_checkpoint += self._batch_weight
        if self._since_checkpoint < CHECKPOINT_BYTES:
            return
        self._since_checkpoint = 0
        try:
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as exc:  # the next COMMIT's own checkpoint is still there
            log.debug("store checkpoint failed: %s", exc)

    def _rollback(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._conn.execute("ROLLBACK")

    def _enter_fault(self, error: StoreError, fatal: bool) -> None:
        """Record the fault; log and report it only when it starts (or becomes fatal)."""
        was, was_fatal = self._fault, self._fatal
        self._fault = error
        self._fatal = fatal or was_fatal
        if was is None or (fatal and not was_fatal):
            if fatal:
                self._kept = []
            log.error("%s", error)
            self._report(str(error))

    def _settle(self) -> None:
        """End the fault once commits have been succeeding for `SETTLE_SECONDS`."""
        since = self._clean_since
        if since is not None and not self._kept and time.monotonic() - since >= SETTLE_SECONDS:
            self._leave_fault()

    def _leave_fault(self) -> None:
        log.warning(
            "%s: writes resumed (%d failed batches, %d writes refused during the fault)",
            self._where,
            self._failed_batches,
            self._failed_futures,
        )
        self._fault = None
        self._clean_since = None
        self._failed_batches = self._failed_futures = 0
        self._report(None)

    def _report(self, reason: str | None) -> None:
        callback, loop = self.on_fault, self._loop
        if callback is None or loop is None:
            return
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is listening any more
            loop.call_soon_threadsafe(callback, reason)

    def _resolve(self, futs: list[asyncio.Future[None]], error: StoreError | None) -> None:
        if not futs or self._loop is None:
            return
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
            self._loop.call_soon_threadsafe(settle, futs, error)


def settle(futs: list[asyncio.Future[None]], error: StoreError | None) -> None:
    """On the loop: resolve a committed (or failed) batch's futures, in submission order."""
    for fut in futs:
        if fut.done():
            continue
        if error is None:
            fut.set_result(None)
        else:
            fut.set_exception(error)


def runs(seqs: Iterable[int]) -> list[tuple[int, int]]:
    """The runs of consecutive integers in `seqs` as (first, last), ascending; duplicates count once."""
    out: list[tuple[int, int]] = []
    first = last = -2
    for seq in sorted(seqs):
        if seq == last + 1:
            last = seq
        elif seq != last:
            if first != -2:
                out.append((first, last))
            first = last = seq
    if first != -2:
        out.append((first, last))
    return out


class Remainder(str):
    """A statement over ranges of positions (its last two parameters: first and last) that finishes
    what the statement run just before it, over the same ranges, left undone: `run_grouped` skips
    it when that run changed as many rows as the ranges span, since nothing can be left then.

    An ack's removal deletes the messages whose last reference goes first, then takes one reference
    off those other queues still hold (a fan-out); a consumer's ack of a prefetch window mostly finds
    none of the latter, and the second statement's scan of the same positions is saved."""

    __slots__ = ()


def run_grouped(conn: sqlite3.Connection, ops: list[Op]) -> None:
    """Run ops in order, turning each run of the same statement (by identity) into one executemany;
    a `Remainder` run is skipped when the run before it left nothing to do."""
    i, n = 0, len(ops)
    last: sqlite3.Cursor | None = None
    while i < n:
        sql = ops[i][0]
        j = i + 1
        while j < n and ops[j][0] is sql:
            j += 1
        if type(sql) is Remainder and last is not None:
            span = sum(params[-1] - params[-2] + 1 for _, params in ops[i:j])
            if last.rowcount == span:
                i = j
                continue
        if j - i == 1:
            last = conn.execute(sql, ops[i][1])
        else:
            last = conn.executemany(sql, [params for _, params in ops[i:j]])
        i = j
