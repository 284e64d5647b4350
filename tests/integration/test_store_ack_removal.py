"""An ack's removal from the store: messages losing their last reference are deleted at once, the
others lose one reference, and the second statement is not run when nothing is left for it."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker.store import QueueRecord
from broker.store.sqlite.store import STORE_FILE, SqliteStore
from tests.integration.test_store import reopen, started

PROPS = bytes.fromhex("9000") + b"\x0atext/plain" + b"\x02"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    """A started store with queues a and b."""
    s = started(tmp_path / "data")
    for name in ("a", "b"):
        s.put_queue(QueueRecord("/", name))
    yield s
    await s.close()


def refs(store: SqliteStore) -> dict[bytes, int]:
    """Each stored body and its reference count, read from the file as a restart would."""
    with contextlib.closing(sqlite3.connect(store.data_dir / STORE_FILE)) as c:
        return {bytes(body): int(n) for body, n in c.execute("SELECT body, refs FROM messages")}


def positions(store: SqliteStore, queue: str) -> list[int]:
    with contextlib.closing(sqlite3.connect(store.data_dir / STORE_FILE)) as c:
        rows = c.execute("SELECT seq FROM queue_messages WHERE queue = ? ORDER BY seq", (queue.encode(),))
        return [int(seq) for (seq,) in rows]


class Statements:
    """The statements the store's writer runs (its connection's trace callback, on its thread)."""

    def __init__(self, store: SqliteStore) -> None:
        self.seen: list[str] = []
        self._lock = threading.Lock()
        store._conn.set_trace_callback(self._add)

    def _add(self, sql: str) -> None:
        with self._lock:
            self.seen.append(sql)

    def count(self, prefix: str) -> int:
        with self._lock:
            return sum(1 for sql in self.seen if sql.startswith(prefix))


async def test_an_ack_of_messages_no_other_queue_holds_deletes_them_in_one_pass(store: SqliteStore) -> None:
    await asyncio.gather(*(store.persist("/", [("a", i)], PROPS, b"m%d" % i, "", "a") for i in range(1, 11)))
    statements = Statements(store)
    store.remove_messages("/", "a", range(1, 8))
    await store.sync()
    assert refs(store) == {b"m8": 1, b"m9": 1, b"m10": 1}
    assert positions(store, "a") == [8, 9, 10]
    assert statements.count("DELETE FROM messages") == 1
    assert statements.count("UPDATE messages") == 0  # nothing left to unreference: not run


async def test_shared_messages_lose_one_reference_until_the_last_queue_acks(store: SqliteStore) -> None:
    shared = [store.persist("/", [("a", i), ("b", i)], PROPS, b"s%d" % i, "", "") for i in range(1, 4)]
    alone = [store.persist("/", [("a", i)], PROPS, b"a%d" % i, "", "") for i in range(4, 7)]
    await asyncio.gather(*shared, *alone)
    statements = Statements(store)
    store.remove_messages("/", "a", range(1, 7))  # one run: three shared, three held by a alone
    await store.sync()
    assert refs(store) == {b"s1": 1, b"s2": 1, b"s3": 1}
    assert positions(store, "a") == [] and positions(store, "b") == [1, 2, 3]
    assert statements.count("UPDATE messages") == 1  # the shared ones needed it
    store.remove_messages("/", "b", [2, 1, 3])
    await store.sync()
    assert refs(store) == {} and positions(store, "b") == []


async def test_positions_already_gone_or_unknown_leave_the_others_alone(store: SqliteStore) -> None:
    await asyncio.gather(
        store.persist("/", [("a", 1), ("b", 1)], PROPS, b"s1", "", ""),
        store.persist("/", [("a", 2)], PROPS, b"a2", "", ""),
        store.persist("/", [("b", 2)], PROPS, b"b2", "", ""),
    )
    store.remove_messages("/", "a", [2])
    store.remove_messages("/", "a", [1, 2, 3, 99])  # 2 was acked already, 3 and 99 never existed
    await store.sync()
    assert refs(store) == {b"s1": 1, b"b2": 1}
    assert positions(store, "b") == [1, 2]
    store.remove_messages("/", "b", [1, 2])
    await store.sync()
    assert refs(store) == {}


async def test_removals_survive_a_reopen(store: SqliteStore) -> None:
    s = store
    # odd messages are b's too
    queues = {i: [("a", i), ("b", i)] if i % 2 else [("a", i)] for i in range(1, 9)}
    await asyncio.gather(*(s.persist("/", queues[i], PROPS, b"m%d" % i, "", "") for i in range(1, 9)))
    s.remove_messages("/", "a", range(1, 9))
    await s.close()
    snap = await reopen(s.data_dir)
    assert set(snap.messages) == {("/", "b")}
    assert [m.body for m in snap.messages[("/", "b")]] == [b"m1", b"m3", b"m5", b"m7"]
