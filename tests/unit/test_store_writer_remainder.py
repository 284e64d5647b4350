"""`Remainder` statements: run only when the run before them left rows undone over their ranges."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator

import pytest

from broker.store.sqlite.writer import Op, Remainder, run_grouped

RUN = "(SELECT id FROM p WHERE q = ? AND seq BETWEEN ? AND ?)"
DROP = f"DELETE FROM m WHERE refs <= 1 AND id IN {RUN}"
UNREF = Remainder(f"UPDATE m SET refs = refs - 1 WHERE id IN {RUN}")
FORGET = "DELETE FROM p WHERE q = ? AND seq BETWEEN ? AND ?"


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    """Messages `m` (id, refs) and positions `p` (queue, seq -> id), shaped as the store's."""
    with contextlib.closing(sqlite3.connect(":memory:", isolation_level=None)) as c:
        c.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, refs INTEGER)")
        c.execute("CREATE TABLE p (q TEXT, seq INTEGER, id INTEGER, PRIMARY KEY (q, seq))")
        yield c


class Traced:
    """`conn` with the statements it ran, in order."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.ran: list[str] = []
        conn.set_trace_callback(self.ran.append)

    def updates(self) -> int:
        return sum(1 for sql in self.ran if sql.startswith("UPDATE m"))


def removal(queue: str, ranges: list[tuple[int, int]]) -> list[Op]:
    keys = [(queue, a, b) for a, b in ranges]
    return [(DROP, k) for k in keys] + [(UNREF, k) for k in keys] + [(FORGET, k) for k in keys]


def fill(conn: sqlite3.Connection, rows: list[tuple[str, int, int, int]]) -> None:
    """(queue, seq, id, refs of id) rows."""
    for q, seq, mid, refs in rows:
        conn.execute("INSERT OR REPLACE INTO m VALUES (?, ?)", (mid, refs))
        conn.execute("INSERT INTO p VALUES (?, ?, ?)", (q, seq, mid))


def test_a_remainder_is_skipped_when_every_position_lost_its_message(conn: sqlite3.Connection) -> None:
    fill(conn, [("a", s, s, 1) for s in range(1, 9)])
    traced = Traced(conn)
    run_grouped(conn, removal("a", [(1, 3), (5, 8)]))
    assert traced.updates() == 0
    assert [r for (r,) in conn.execute("SELECT id FROM m")] == [4]
    assert [r for (r,) in conn.execute("SELECT seq FROM p")] == [4]


def test_a_remainder_runs_for_shared_messages_and_gaps(conn: sqlite3.Connection) -> None:
    fill(conn, [("a", 1, 1, 2), ("b", 1, 1, 2), ("a", 2, 2, 1), ("a", 3, 3, 1)])
    traced = Traced(conn)
    run_grouped(conn, removal("a", [(1, 3)]))
    assert traced.updates() == 1  # message 1 is b's too: one reference off
    assert list(conn.execute("SELECT id, refs FROM m")) == [(1, 1)]
    run_grouped(conn, removal("a", [(4, 5)]))  # no such positions: nothing deleted, so it runs
    assert traced.updates() == 2
    run_grouped(conn, removal("b", [(1, 1)]))
    assert traced.updates() == 2 and list(conn.execute("SELECT count(*) FROM m")) == [(0,)]


def test_a_remainder_first_in_a_batch_runs() -> None:
    """With no run before it there is nothing to judge by: it runs."""

    class Spy:
        def __init__(self) -> None:
            self.ran: list[str] = []

        def execute(self, sql: str, params: object) -> None:
            self.ran.append(sql)

        def executemany(self, sql: str, params: object) -> None:
            self.ran.append(sql)

    spy = Spy()
    run_grouped(spy, [(UNREF, ("a", 1, 2)), (FORGET, ("a", 1, 2))])  # type: ignore[arg-type]
    assert spy.ran == [UNREF, FORGET]
