"""The store's group-commit writer on an in-memory SQLite database: batching, order, failure."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.store.base import StoreError, StoreStats
from broker.store.sqlite import writer as sqlite_writer
from broker.store.sqlite.writer import GroupCommitWriter, Op, run_grouped

INSERT = "INSERT INTO t (x) VALUES (?)"
GARBAGE = "DELETE FROM t WHERE x < 0"


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    c = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    c.execute("CREATE TABLE t (x INTEGER NOT NULL)")
    yield c
    c.close()


def make_writer(
    conn: sqlite3.Connection, exits: list[int] | None = None, where: str = "test.sqlite3"
) -> GroupCommitWriter:
    return GroupCommitWriter(
        conn,
        where,
        StoreStats(),
        garbage_sql=GARBAGE,
        message_sql=INSERT,
        on_exit=lambda: None if exits is None else exits.append(1),
    )


def rows(conn: sqlite3.Connection) -> list[int]:
    return [r[0] for r in conn.execute("SELECT x FROM t ORDER BY rowid")]


async def until(condition: Callable[[], bool], seconds: float = 10.0) -> bool:
    """Wait for `condition` while the writer's thread and timers run; its last value."""
    for _ in range(int(seconds / 0.025)):
        if condition():
            return True
        await asyncio.sleep(0.025)
    return condition()


async def test_everything_pending_commits_in_one_transaction(conn: sqlite3.Connection) -> None:
    writer = make_writer(conn)
    entered, release = threading.Event(), threading.Event()
    calls = 0

    def hold() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            entered.set()
            assert release.wait(10)

    writer.commit_hook = hold
    writer.start(asyncio.get_running_loop())
    first = writer.new_future()
    writer.submit([(INSERT, (1,))], first)
    assert await asyncio.to_thread(entered.wait, 10)
    # while the first batch is held before COMMIT, three more submissions queue up
    later = [writer.new_future() for _ in range(3)]
    for i, fut in enumerate(later, start=2):
        writer.submit([(INSERT, (i,)), (INSERT, (i * 10,))], fut)
    assert not first.done()
    release.set()
    await asyncio.wait_for(asyncio.gather(first, *later), 10)
    await writer.close()
    stats = writer._stats
    assert stats.transactions == 2  # the three later submissions were one batch
    assert stats.largest_batch == 3
    assert stats.operations == 7
    assert stats.messages_persisted == 7
    assert rows(conn) == [1, 2, 20, 3, 30, 4, 40]


class DiskFull:
    """A commit hook failing like a full disk while `full` is set."""

    def __init__(self) -> None:
        self.full = True

    def __call__(self) -> None:
        if self.full:
            raise sqlite3.OperationalError("database or disk is full")


async def writer_with_one_row(
    conn: sqlite3.Connection, where: str = "test.sqlite3"
) -> tuple[GroupCommitWriter, list[str | None]]:
    """A started writer that has committed the row 1, and the list its fault reports go to."""
    writer = make_writer(conn, where=where)
    reports: list[str | None] = []
    writer.on_fault = reports.append
    writer.start(asyncio.get_running_loop())
    ok = writer.new_future()
    writer.submit([(INSERT, (1,))], ok)
    await asyncio.wait_for(ok, 10)
    return writer, reports


async def full_disk_holding(conn: sqlite3.Connection, value: int) -> tuple[GroupCommitWriter, DiskFull]:
    """A started writer on a full disk that keeps an insert of `value`: the sync after it failed."""
    writer = make_writer(conn)
    writer.start(asyncio.get_running_loop())
    disk = DiskFull()
    writer.commit_hook = disk
    sync = writer.new_future()
    writer.submit([(INSERT, (value,))])
    writer.submit([], sync)
    with pytest.raises(StoreError):
        await asyncio.wait_for(sync, 10)
    return writer, disk


async def test_a_failed_batch_fails_its_futures_keeps_the_rest_and_resumes(
    conn: sqlite3.Connection, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # another test in the same process (Celery's worker) may have raised the loggers' levels
    caplog.set_level(logging.INFO, logger="hashbroker.store")
    monkeypatch.setattr(sqlite_writer, "SETTLE_SECONDS", 0.0)
    writer, reports = await writer_with_one_row(conn)
    disk = DiskFull()
    writer.commit_hook = disk
    writer.submit([(INSERT, (2,))])  # nobody waits for it: kept and retried
    bad = writer.new_future()
    writer.submit([(INSERT, (3,))], bad)  # a publish: failed and dropped
    with pytest.raises(StoreError, match=r"write failed .*disk is full"):
        await asyncio.wait_for(bad, 10)
    assert writer.fault is not None and "disk is full" in writer.fault
    assert rows(conn) == [1]  # rolled back
    more = [writer.new_future() for _ in range(3)]
    for i, fut in enumerate(more):
        writer.submit([(INSERT, (10 + i,))], fut)
        with pytest.raises(StoreError):
            await asyncio.wait_for(fut, 10)
    assert writer.kept == 1
    disk.full = False  # space is back: the next batch commits, kept statements first
    again = writer.new_future()
    writer.submit([(INSERT, (4,))], again)
    await asyncio.wait_for(again, 10)
    assert writer.fault is None and writer.kept == 0
    assert rows(conn) == [1, 2, 4]
    await asyncio.sleep(0)  # the reports hop to the loop
    assert len(reports) == 2 and reports[0] is not None and reports[1] is None
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1  # one line for the fault, not one per failed batch
    # 4 publishes refused; the failed batches are at least those 4 (the kept statement's retry,
    # once a second, adds one more where the machine is slow enough)
    resumed = [
        m
        for r in caplog.records
        if (m := re.search(r"writes resumed \((\d+) failed batches, 4 writes refused", r.getMessage()))
    ]
    assert len(resumed) == 1 and int(resumed[0].group(1)) >= 4, [r.getMessage() for r in caplog.records]
    await writer.close()


async def test_kept_statements_are_retried_without_new_traffic(
    conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writer, "RETRY_SECONDS", 0.05)
    monkeypatch.setattr(sqlite_writer, "SETTLE_SECONDS", 0.05)
    writer, disk = await full_disk_holding(conn, 7)
    disk.full = False
    assert await until(lambda: writer.fault is None)
    assert rows(conn) == [7]
    await writer.close()


async def test_a_flapping_fault_is_reported_once_and_ends_when_commits_settle(
    conn: sqlite3.Connection, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writer, "SETTLE_SECONDS", 3600.0)
    writer = make_writer(conn)
    reports: list[str | None] = []
    writer.on_fault = reports.append
    writer.start(asyncio.get_running_loop())
    disk = DiskFull()
    writer.commit_hook = disk
    confirmed = 0
    for i in range(6):  # a nearly full disk: every other commit fits
        disk.full = i % 2 == 0
        fut = writer.new_future()
        writer.submit([(INSERT, (i,))], fut)
        with contextlib.suppress(StoreError):
            await asyncio.wait_for(fut, 10)
            confirmed += 1
    assert confirmed == 3  # a commit that succeeds is confirmed, fault or not
    assert writer.fault is not None  # but the fault lasts until commits have settled
    await asyncio.sleep(0)
    assert len(reports) == 1
    assert len([r for r in caplog.records if r.levelname == "ERROR"]) == 1
    monkeypatch.setattr(sqlite_writer, "SETTLE_SECONDS", 0.05)
    fut = writer.new_future()
    writer.submit([(INSERT, (9,))], fut)
    await asyncio.wait_for(fut, 10)
    assert await until(lambda: writer.fault is None)  # the idle timer ends it, no new traffic
    await asyncio.sleep(0)
    assert reports[1:] == [None]
    assert rows(conn) == [1, 3, 5, 9]
    await writer.close()


async def test_a_sync_in_a_fault_waits_for_the_kept_statements(conn: sqlite3.Connection) -> None:
    writer, _disk = await full_disk_holding(conn, 1)
    sync = writer.new_future()
    writer.submit([], sync)  # nothing new, but the kept insert has not committed: not synced
    with pytest.raises(StoreError):
        await asyncio.wait_for(sync, 10)
    await writer.close()


async def test_a_deleted_store_file_stops_the_writer_until_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writer, "WATCH_SECONDS", 0.05)
    path = tmp_path / "store.sqlite3"
    c = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    c.execute("PRAGMA journal_mode = WAL")
    c.execute("CREATE TABLE t (x INTEGER NOT NULL)")
    writer, reports = await writer_with_one_row(c, str(path))
    (tmp_path / "store.sqlite3-wal").unlink()
    # no traffic: the idle check notices, and reports it once
    await until(lambda: bool(reports))
    assert reports and reports[0] is not None and "-wal was deleted" in reports[0]
    dead = writer.new_future()
    assert dead.done() and dead.exception() is not None  # refused at once: restart to recover
    later = writer.new_future()
    writer.submit([(INSERT, (2,))], later)
    assert later.done()
    with pytest.raises(StoreError, match="until a restart"):
        later.result()
    await writer.close()
    c.close()
    assert reports == [reports[0]]


async def test_close_commits_what_is_pending_then_exits_once(conn: sqlite3.Connection) -> None:
    exits: list[int] = []
    writer = make_writer(conn, exits)
    writer.start(asyncio.get_running_loop())
    writer.submit([(INSERT, (5,)), (INSERT, (-1,))])
    writer.submit([(INSERT, (6,))], garbage=True)
    await writer.close()
    assert exits == [1]
    assert rows(conn) == [5, 6]  # the garbage statement ran in the batch that asked for it
    with pytest.raises(StoreError, match="not started"):
        writer.submit([(INSERT, (7,))])


async def test_sync_future_without_statements_resolves(conn: sqlite3.Connection) -> None:
    writer = make_writer(conn)
    writer.start(asyncio.get_running_loop())
    fut = writer.new_future()
    writer.submit([], fut)
    await asyncio.wait_for(fut, 10)
    await writer.close()
    assert writer._stats.transactions == 0


def test_submit_before_start_is_refused(conn: sqlite3.Connection) -> None:
    with pytest.raises(StoreError, match=r"test\.sqlite3: store is not started"):
        make_writer(conn).submit([(INSERT, (1,))])


class Spy:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    def execute(self, sql: str, params: Any) -> None:
        self.calls.append(("execute", sql, params))

    def executemany(self, sql: str, params: Any) -> None:
        self.calls.append(("executemany", sql, list(params)))


def test_runs_of_the_same_statement_become_one_executemany() -> None:
    other = "UPDATE t SET x = ?"
    ops: list[Op] = [
        (INSERT, (1,)),
        (INSERT, (2,)),
        (other, (3,)),
        (INSERT, (4,)),
        (INSERT, (5,)),
        (INSERT, (6,)),
    ]
    spy = Spy()
    run_grouped(spy, ops)  # type: ignore[arg-type]
    assert spy.calls == [
        ("executemany", INSERT, [(1,), (2,)]),
        ("execute", other, (3,)),
        ("executemany", INSERT, [(4,), (5,), (6,)]),
    ]


def flow_writer(
    conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> tuple[GroupCommitWriter, list[bool]]:
    """A writer with flow marks of 1,000 / 300 bytes and the list of its flow reports."""
    monkeypatch.setattr(sqlite_writer, "FLOW_HIGH", 1000)
    monkeypatch.setattr(sqlite_writer, "FLOW_LOW", 300)
    writer = make_writer(conn)
    changes: list[bool] = []
    writer.on_flow = changes.append
    return writer, changes


async def flow_ended(changes: list[bool]) -> None:
    """Wait for the end of flow: the writer's report hops to the loop after its last commit."""
    for _ in range(100):
        if changes == [True, False]:
            return
        await asyncio.sleep(0.01)


async def test_a_backlog_over_the_high_mark_is_flow_until_commits_bring_it_under_the_low_mark(
    conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer, changes = flow_writer(conn, monkeypatch)
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        entered.set()
        assert release.wait(10)

    writer.commit_hook = hold
    writer.start(asyncio.get_running_loop())
    first = writer.new_future()
    writer.submit([(INSERT, (1,))], first, weight=600)
    assert await asyncio.to_thread(entered.wait, 10)  # the first batch (600 bytes) is held
    assert writer.backlog == 600 and not writer.flow
    futs = [writer.new_future() for _ in range(3)]
    writer.submit([(INSERT, (2,))], futs[0], weight=300)
    assert changes == [] and writer.backlog == 900  # 900 is not over 1000
    writer.submit([(INSERT, (3,))], futs[1], weight=200)
    assert changes == [True] and writer.flow  # 1100: publishers must wait
    writer.submit([(INSERT, (4,))], futs[2], weight=200)
    assert changes == [True]  # reported once
    release.set()
    await asyncio.wait_for(asyncio.gather(first, *futs), 10)
    await flow_ended(changes)
    assert changes == [True, False] and not writer.flow and writer.backlog == 0
    await writer.close()
    assert rows(conn) == [1, 2, 3, 4]


async def test_flow_stays_on_while_the_backlog_is_above_the_low_mark(
    conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer, changes = flow_writer(conn, monkeypatch)
    gate = threading.Semaphore(0)
    entered = threading.Semaphore(0)

    def hold() -> None:
        entered.release()
        assert gate.acquire(timeout=10)

    writer.commit_hook = hold
    writer.start(asyncio.get_running_loop())
    first = writer.new_future()
    writer.submit([(INSERT, (1,))], first, weight=1100)  # over the mark at once
    assert changes == [True]
    assert await asyncio.to_thread(entered.acquire, True, 10)
    second = writer.new_future()
    writer.submit([(INSERT, (2,))], second, weight=500)  # waits for the next batch
    gate.release()  # the first batch commits: 500 still held, above the low mark
    await asyncio.wait_for(first, 10)
    assert await asyncio.to_thread(entered.acquire, True, 10)  # the second batch is held now
    await asyncio.sleep(0.05)
    assert changes == [True] and writer.flow
    gate.release()
    await asyncio.wait_for(second, 10)
    await flow_ended(changes)
    assert changes == [True, False]
    await writer.close()
