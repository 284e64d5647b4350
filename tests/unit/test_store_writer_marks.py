"""The writer's held redelivered marks: written by runs, after what was submitted before them, and
dropped when the positions' removal comes first."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sqlite3
import threading
from collections.abc import Iterator

import pytest

from broker.store.base import StoreStats
from broker.store.sqlite.writer import GroupCommitWriter, runs

MARK = "UPDATE qm SET redelivered = 1 WHERE v = ? AND q = ? AND seq BETWEEN ? AND ?"
INSERT = "INSERT INTO qm (v, q, seq, redelivered) VALUES (?, ?, ?, 0)"
WHERE = (b"/", b"q1")


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    """A position table shaped as the store's queue_messages, in memory."""
    with contextlib.closing(sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)) as c:
        c.execute(
            "CREATE TABLE qm (v BLOB, q BLOB, seq INTEGER, redelivered INTEGER, PRIMARY KEY (v, q, seq))"
        )
        yield c


def _signal_then_wait(inside: threading.Event, gate: threading.Event) -> None:
    """Holds the writer inside a commit until the test opens the gate."""
    inside.set()
    assert gate.wait(10)


def test_runs_of_consecutive_positions() -> None:
    assert runs([]) == []
    assert runs([5]) == [(5, 5)]
    assert runs([3, 1, 2, 7, 9, 8, 11]) == [(1, 3), (7, 9), (11, 11)]
    assert runs([4, 4, 5, 5, 0]) == [(0, 0), (4, 5)]


async def test_marks_held_until_the_next_batch_and_dropped_by_a_removal(conn: sqlite3.Connection) -> None:
    writer = GroupCommitWriter(
        conn,
        "t",
        StoreStats(),
        garbage_sql="SELECT 1",
        message_sql=INSERT,
        on_exit=lambda: None,
        mark_sql=MARK,
    )
    gate, inside = threading.Event(), threading.Event()
    writer.commit_hook = functools.partial(_signal_then_wait, inside, gate)
    writer.start(asyncio.get_running_loop())
    try:
        first = writer.new_future()
        writer.submit([(INSERT, (*WHERE, seq)) for seq in range(1, 11)], first)
        assert await asyncio.to_thread(inside.wait, 10)  # the inserts' batch is being committed
        writer.mark(WHERE, range(1, 11))  # held: the writer is busy
        writer.mark((b"/", b"other"), [1])
        writer.submit([], unmark=(WHERE, [2, 3, 4, 9]))  # settled before the writer took the marks
        gate.set()
        await first
        done = writer.new_future()
        writer.submit([], done)
        await done
        marked = [seq for seq, r in conn.execute("SELECT seq, redelivered FROM qm ORDER BY seq") if r]
        assert marked == [1, 5, 6, 7, 8, 10]
        # a mark for a position inserted in the same batch comes after the insert
        writer.commit_hook = None
        writer.submit([(INSERT, (*WHERE, 11))])
        writer.mark(WHERE, [11])
        done = writer.new_future()
        writer.submit([], done)
        await done
        assert conn.execute("SELECT redelivered FROM qm WHERE seq = 11").fetchone() == (1,)
    finally:
        gate.set()
        await writer.close()
