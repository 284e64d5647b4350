"""The store's writer thread: group commit of everything pending, futures resolved on the loop.

AMQP handlers run on the event loop and must not wait for disk, and one transaction per message
would cap confirmed throughput at the disk's commit rate. So every change is appended to a pending
list; one thread takes *everything* pending, applies it in one transaction, commits, and then
resolves the futures of that batch on the loop (one `call_soon_threadsafe` per batch). The busier
the broker, the bigger the batches.

The first failed transaction stops the writer for good (it is rolled back, its futures and every
later one fail with the same `StoreError`): confirming into a store that lost a write would promise
what a restart cannot keep.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

from broker.store.base import StoreError, StoreStats

log = logging.getLogger("hashbroker.store")

Op = tuple[str, tuple[Any, ...]]
"""One statement and its parameters."""


class GroupCommitWriter:
    """Applies submitted statements on one thread, a batch per transaction, in submission order.

    `garbage_sql` runs at the end of a batch that asked for it (a removal is pending), and
    `message_sql` is the statement counted in `stats.messages_persisted`. `on_exit` runs on the
    writer thread once the last batch committed after `close`.
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
    ) -> None:
        self._conn = conn
        self._where = where
        self._stats = stats
        self._garbage_sql = garbage_sql
        self._message_sql = message_sql
        self._on_exit = on_exit
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._cond = threading.Condition(threading.Lock())
        self._ops: list[Op] = []
        self._futs: list[asyncio.Future[None]] = []
        self._garbage = False
        self._closing = False
        self._failure: StoreError | None = None
        self.commit_hook: Callable[[], None] | None = None
        """Test seam: called on the writer thread after a batch's statements, before COMMIT."""

    @property
    def started(self) -> bool:
        return self._thread is not None

    @property
    def failure(self) -> StoreError | None:
        """Set once a transaction failed; every later write fails with it."""
        return self._failure

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
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

    def submit(self, ops: list[Op], fut: asyncio.Future[None] | None = None, garbage: bool = False) -> None:
        """Queue `ops` for the next batch; `fut` resolves once they committed (or the batch failed)."""
        if self._thread is None or self._closing:
            raise StoreError(f"{self._where}: store is not started (or closed)")
        with self._cond:
            self._ops.extend(ops)
            if fut is not None:
                self._futs.append(fut)
            if garbage:
                self._garbage = True
            self._cond.notify()

    def new_future(self) -> asyncio.Future[None]:
        """A future on the writer's loop, already failed when the writer has stopped on an error."""
        assert self._loop is not None
        fut: asyncio.Future[None] = self._loop.create_future()
        if self._failure is not None:
            fut.set_exception(self._failure)
        return fut

    # -- on the writer thread -------------------------------------------------------------------------

    def _run(self) -> None:
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
        self._on_exit()

    def _commit(self, ops: list[Op], futs: list[asyncio.Future[None]], garbage: bool) -> None:
        if self._failure is not None:
            self._resolve(futs, self._failure)
            return
        conn = self._conn
        error: StoreError | None = None
        try:
            conn.execute("BEGIN")
            run_grouped(conn, ops)
            if garbage:
                conn.execute(self._garbage_sql)
            if self.commit_hook is not None:
                self.commit_hook()
            conn.execute("COMMIT")
        except Exception as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            error = StoreError(f"{self._where}: write failed, store stopped ({exc})")
            self._failure = error
            log.error("%s", error)
        stats = self._stats
        stats.transactions += 1
        stats.operations += len(ops)
        stats.messages_persisted += sum(1 for sql, _ in ops if sql is self._message_sql)
        stats.largest_batch = max(stats.largest_batch, len(futs))
        self._resolve(futs, error)

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


def run_grouped(conn: sqlite3.Connection, ops: list[Op]) -> None:
    """Run ops in order, turning each run of the same statement (by identity) into one executemany."""
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
