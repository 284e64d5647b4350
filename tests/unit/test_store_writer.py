"""The store's group-commit writer on an in-memory SQLite database: batching, order, failure."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from broker.store.base import StoreError, StoreStats
from broker.store.sqlite_writer import GroupCommitWriter, Op, run_grouped

INSERT = "INSERT INTO t (x) VALUES (?)"
GARBAGE = "DELETE FROM t WHERE x < 0"


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    c = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    c.execute("CREATE TABLE t (x INTEGER NOT NULL)")
    yield c
    c.close()


def make_writer(conn: sqlite3.Connection, exits: list[int] | None = None) -> GroupCommitWriter:
    return GroupCommitWriter(
        conn,
        "test.sqlite3",
        StoreStats(),
        garbage_sql=GARBAGE,
        message_sql=INSERT,
        on_exit=lambda: None if exits is None else exits.append(1),
    )


def rows(conn: sqlite3.Connection) -> list[int]:
    return [r[0] for r in conn.execute("SELECT x FROM t ORDER BY rowid")]


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


async def test_a_failed_batch_rolls_back_and_stops_the_writer(conn: sqlite3.Connection) -> None:
    writer = make_writer(conn)
    writer.start(asyncio.get_running_loop())
    ok = writer.new_future()
    writer.submit([(INSERT, (1,))], ok)
    await asyncio.wait_for(ok, 10)
    bad = writer.new_future()
    writer.submit([(INSERT, (2,)), ("INSERT INTO missing (x) VALUES (?)", (3,))], bad)
    with pytest.raises(StoreError, match="write failed, store stopped"):
        await asyncio.wait_for(bad, 10)
    assert writer.failure is not None
    assert rows(conn) == [1]  # the failed batch's first statement was rolled back
    # every later write fails with the same error, at once or after the writer saw it
    dead = writer.new_future()
    assert dead.done() and dead.exception() is writer.failure
    after = asyncio.get_running_loop().create_future()
    writer.submit([(INSERT, (4,))], after)
    with pytest.raises(StoreError) as info:
        await asyncio.wait_for(after, 10)
    assert info.value is writer.failure
    await writer.close()
    assert rows(conn) == [1]


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
