"""broker.store: round trips, binding order, group commit, SIGKILL safety, refusing bad files."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import exchanges
from amqpwire.fields import Field, FieldTable
from broker.store import (
    BindingRecord,
    ExchangeRecord,
    NullStore,
    PolicyRecord,
    QueueRecord,
    Snapshot,
    StoreError,
    UserRecord,
    VHostRecord,
    default_data_dir,
    open_store,
)
from broker.store.sqlite.store import SCHEMA_VERSION, STORE_FILE, SqliteStore

REPO = Path(__file__).resolve().parents[2]
PROPS = bytes.fromhex("9000") + b"\x0atext/plain" + b"\x02"  # content_type + delivery_mode 2, as sent


def started(path: Path) -> SqliteStore:
    """The store at `path`, loaded (the snapshot is not needed) and started."""
    s = open_store(path)
    assert isinstance(s, SqliteStore)
    s.load()
    s.start()
    return s


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    s = started(tmp_path / "data")
    yield s
    await s.close()


async def reopen(path: Path) -> Snapshot:
    """Open the store at `path`, load it and close it again."""
    s = open_store(path)
    try:
        return s.load()
    finally:
        await s.close()


def raw_count(path: Path, table: str) -> int:
    with contextlib.closing(sqlite3.connect(path / STORE_FILE)) as c:
        return int(c.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


# -- round trips ---------------------------------------------------------------------------------------


async def test_round_trip_every_entity_kind(tmp_path: Path) -> None:
    data = tmp_path / "data"
    args = FieldTable(
        [
            ("x-max-length", Field("signedint", 10)),
            ("x-dead-letter-exchange", Field("longstr", b"dlx")),
            ("x-flag", Field("bool", True)),
            ("x-dup", Field("byte", 1)),
            ("x-dup", Field("byte", 2)),  # duplicates and order are kept
        ]
    )
    odd = "q-\udcff-not-utf8"  # a name the broker decoded with surrogateescape
    s = open_store(data)
    assert s.persistent and s.load() == Snapshot()
    s.start()
    vhosts = [VHostRecord("/"), VHostRecord("other", "second", ("tag1",))]
    users = [UserRecord("guest", "hash1", tags=("administrator",)), UserRecord("bob", "hash2")]
    policies = [PolicyRecord("/", "ttl", "^q", '{"message-ttl":1000}', 3, "queues")]
    xs = [
        ExchangeRecord(
            "/", "hash", "x-consistent-hash", arguments=FieldTable([("hash-header", Field("longstr", b"h"))])
        ),
        ExchangeRecord("/", "ae", "fanout", auto_delete=True, internal=True),
        ExchangeRecord("other", "hash", "direct"),
    ]
    qs = [
        QueueRecord("/", "q1", arguments=args),
        QueueRecord("/", odd, auto_delete=True),
        QueueRecord("other", "q1"),
    ]
    bs = [
        BindingRecord("/", "hash", "queue", "q1", "2"),
        BindingRecord(
            "/", "amq.headers", "queue", odd, "", FieldTable([("x-match", Field("longstr", b"any"))])
        ),
        BindingRecord("/", "hash", "exchange", "ae", "1"),
    ]
    for records, put in (
        (vhosts, s.put_vhost),
        (users, s.put_user),
        (policies, s.put_policy),
        (xs, s.put_exchange),
        (qs, s.put_queue),
        (bs, s.add_binding),
    ):
        for record in records:
            put(record)
    await s.persist("/", [("q1", 1), (odd, 7)], PROPS, b"body-1", "hash", "rk\udc80")
    await s.persist("/", [("q1", 2)], b"\x00\x00", b"", "", "q1")
    s.mark_redelivered("/", "q1", [2])
    await s.persist("other", [("q1", 5)], PROPS, b"\x00\xff" * 1000, "", "q1")
    await s.close()

    snap = await reopen(data)
    assert snap.vhosts == vhosts
    assert snap.users == users
    assert snap.policies == policies
    assert snap.exchanges == xs
    assert snap.queues == qs
    assert snap.bindings == bs
    q1 = snap.messages[("/", "q1")]
    assert [(m.seq, m.body, m.properties, m.exchange, m.routing_key, m.redelivered) for m in q1] == [
        (1, b"body-1", PROPS, "hash", "rk\udc80", False),
        (2, b"", b"\x00\x00", "", "q1", True),
    ]
    assert [(m.seq, m.body) for m in snap.messages[("/", odd)]] == [(7, b"body-1")]
    assert snap.messages[("/", odd)][0].body is q1[0].body  # a fanned-out body is loaded once
    assert [m.body for m in snap.messages[("other", "q1")]] == [b"\x00\xff" * 1000]
    assert snap.message_count == 4


async def test_updates_keep_position_and_deletes_cascade(tmp_path: Path) -> None:
    data = tmp_path / "data"
    s = started(data)
    s.put_vhost(VHostRecord("/"))
    s.put_vhost(VHostRecord("v2"))
    s.put_exchange(ExchangeRecord("/", "a", "direct"))
    s.put_exchange(ExchangeRecord("/", "b", "topic"))
    s.put_exchange(
        ExchangeRecord(
            "/", "a", "direct", arguments=FieldTable([("alternate-exchange", Field("longstr", b"b"))])
        )
    )
    s.put_queue(QueueRecord("/", "q"))
    s.put_queue(QueueRecord("/", "keep"))
    s.put_policy(PolicyRecord("/", "p1", ".*", "{}"))
    s.put_policy(PolicyRecord("/", "p2", ".*", "{}"))
    s.put_policy(PolicyRecord("/", "p1", "^a", '{"max-length":1}', 5))
    s.put_user(UserRecord("u1"))
    s.put_user(UserRecord("u2"))
    s.delete_user("u1")
    s.add_binding(BindingRecord("/", "a", "queue", "q", "k"))
    s.add_binding(BindingRecord("/", "b", "exchange", "a", "k"))
    s.add_binding(BindingRecord("/", "b", "queue", "keep", "k"))
    s.add_binding(BindingRecord("/", "a", "queue", "keep", "k"))
    await s.persist("/", [("q", 1), ("keep", 1)], PROPS, b"shared", "a", "k")
    await s.persist("/", [("q", 2)], PROPS, b"only-q", "a", "k")
    s.put_queue(QueueRecord("/", "q", arguments=FieldTable([("x-max-length", Field("signedint", 3))])))
    s.put_queue(QueueRecord("v2", "gone"))
    s.put_exchange(ExchangeRecord("v2", "gone", "fanout"))
    s.add_binding(BindingRecord("v2", "gone", "queue", "gone"))
    s.put_policy(PolicyRecord("v2", "p", ".*", "{}"))
    await s.persist("v2", [("gone", 1)], PROPS, b"v2", "gone", "")
    await s.close()
    snap_before = await reopen(data)
    assert [x.name for x in snap_before.exchanges] == ["a", "b", "gone"]
    assert snap_before.exchanges[0].arguments.get("alternate-exchange") == Field("longstr", b"b")
    assert [q.name for q in snap_before.queues] == ["q", "keep", "gone"]
    assert snap_before.queues[0].arguments.get("x-max-length") == Field("signedint", 3)
    assert [m.body for m in snap_before.messages[("/", "q")]] == [b"shared", b"only-q"]  # update kept them
    assert [(p.name, p.priority) for p in snap_before.policies] == [("p1", 5), ("p2", 0), ("p", 0)]
    assert [u.name for u in snap_before.users] == ["u2"]

    s = started(data)
    s.delete_exchange("/", "a")  # bindings from a and to a go
    s.delete_queue("/", "q")  # its messages go; the shared body stays for "keep"
    s.delete_vhost("v2")
    await s.sync()
    assert raw_count(data, "messages") == 1
    s.delete_policy("/", "p2")
    await s.close()
    snap = await reopen(data)
    assert [v.name for v in snap.vhosts] == ["/"]
    assert [x.name for x in snap.exchanges] == ["b"]
    assert [q.name for q in snap.queues] == ["keep"]
    assert snap.bindings == [BindingRecord("/", "b", "queue", "keep", "k")]
    assert [p.name for p in snap.policies] == ["p1"]
    assert set(snap.messages) == {("/", "keep")}
    assert [m.body for m in snap.messages[("/", "keep")]] == [b"shared"]


async def test_ack_purge_and_shared_bodies_are_removed(store: SqliteStore) -> None:
    data = store.data_dir
    store.put_queue(QueueRecord("/", "a"))
    store.put_queue(QueueRecord("/", "b"))
    futs = [store.persist("/", [("a", i), ("b", i)], PROPS, f"m{i}".encode(), "", "") for i in range(1, 11)]
    await asyncio.gather(*futs)
    assert raw_count(data, "messages") == 10 and raw_count(data, "queue_messages") == 20
    store.remove_messages("/", "a", [1, 2, 3])
    store.remove_messages("/", "a", [3, 99])  # already gone / unknown: ignored
    await store.sync()
    assert raw_count(data, "messages") == 10  # still referenced by b
    store.remove_messages("/", "b", [1, 2])
    await store.sync()
    assert raw_count(data, "messages") == 8  # m1, m2 unreferenced now; m3 still in b
    store.purge_queue("/", "b")
    await store.sync()
    assert raw_count(data, "messages") == 7  # a keeps 4..10
    store.purge_queue("/", "a")
    await store.sync()
    assert raw_count(data, "messages") == 0 and raw_count(data, "queue_messages") == 0
    store.remove_messages("/", "a", [])
    store.mark_redelivered("/", "a", [])


async def test_purged_queue_survives_reopen(tmp_path: Path) -> None:
    data = tmp_path / "d"
    s = started(data)
    s.put_queue(QueueRecord("/", "a"))
    await s.persist("/", [("a", 1)], PROPS, b"x", "", "a")
    s.purge_queue("/", "a")
    await s.close()
    snap = await reopen(data)
    assert [q.name for q in snap.queues] == ["a"] and snap.messages == {}


# -- binding order ---------------------------------------------------------------------------------------


async def test_binding_order_is_preserved_and_rings_match(tmp_path: Path) -> None:
    """Bindings come back in the order they were made, so replaying them rebuilds the same ring."""
    data = tmp_path / "d"
    rng = random.Random(5)
    names = [f"q{i:03d}" for i in range(60)]
    rng.shuffle(names)  # not alphabetical: insertion order must win over any sort
    s = started(data)
    s.put_exchange(ExchangeRecord("/", "ring", "x-consistent-hash"))
    made: list[BindingRecord] = []
    for n in names:
        s.put_queue(QueueRecord("/", n))
        b = BindingRecord("/", "ring", "queue", n, str(rng.randint(1, 5)))
        s.add_binding(b)
        made.append(b)
    s.add_binding(made[3])  # identical re-bind: ignored, keeps its position
    s.remove_binding(made[10])  # unbind then bind again: moves to the end
    s.add_binding(made[10])
    made.append(made.pop(10))
    await s.close()
    snap = await reopen(data)
    assert snap.bindings == made
    keys = [f"key-{i}" for i in range(2000)]
    original = exchanges.predict("x-consistent-hash", [(b.destination, b.key) for b in made], keys)
    restored = exchanges.predict("x-consistent-hash", [(b.destination, b.key) for b in snap.bindings], keys)
    assert restored == original


# -- group commit ----------------------------------------------------------------------------------------


async def test_group_commit_resolves_only_after_commit(store: SqliteStore) -> None:
    path = store.path
    store.put_queue(QueueRecord("/", "q"))
    await store.sync()
    base = store.stats.transactions
    seen_uncommitted: list[int] = []

    def check_visible(seq: int) -> None:
        # A fresh connection sees only committed data: the row must be there when the future is done.
        with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as c:
            row = c.execute("SELECT 1 FROM queue_messages WHERE seq = ?", (seq,)).fetchone()
        if row is None:
            seen_uncommitted.append(seq)

    n = 2000
    futs = []
    for seq in range(1, n + 1):
        fut = store.persist("/", [("q", seq)], PROPS, b"x" * 32, "", "q")
        if seq % 50 == 0:
            fut.add_done_callback(functools.partial(lambda seq, _f: check_visible(seq), seq))
        futs.append(fut)
    await asyncio.gather(*futs)
    transactions = store.stats.transactions - base
    assert seen_uncommitted == []
    assert 1 <= transactions <= 20, transactions  # 2000 writes in a handful of commits
    assert store.stats.messages_persisted == n


async def test_futures_wait_for_a_blocked_commit(store: SqliteStore) -> None:
    gate = threading.Event()

    def hold() -> None:
        gate.wait(10)

    store.writer.commit_hook = hold
    store.put_queue(QueueRecord("/", "q"))
    futs = [store.persist("/", [("q", i)], PROPS, b"x", "", "q") for i in range(1, 101)]
    await asyncio.sleep(0.2)
    assert not any(f.done() for f in futs)  # writes are applied but not committed: no confirm yet
    gate.set()
    await asyncio.wait_for(asyncio.gather(*futs), 10)
    store.writer.commit_hook = None


async def test_failed_commit_fails_its_futures_and_writing_resumes(store: SqliteStore) -> None:
    def boom() -> None:
        raise OSError("disk full (simulated)")

    store.writer.commit_hook = boom
    fut = store.persist("/", [("q", 1)], PROPS, b"x", "", "q")
    with pytest.raises(StoreError, match=r"write failed.*disk full"):
        await fut
    assert store.failure is not None
    store.writer.commit_hook = None
    await store.persist("/", [("q", 2)], PROPS, b"x", "", "q")  # no restart needed
    await store.sync()


# -- crash safety ----------------------------------------------------------------------------------------

CHILD = r"""
import asyncio, random, sys
from broker.store import QueueRecord, open_store

async def main() -> None:
    store = open_store(sys.argv[1])
    snap = store.load()
    # never a number used before: the last published ones may all be gone (acked, or not
    # committed at the kill), and a number used again would look like a removal undone
    seq = max([m.seq for m in snap.messages.get(("/", "crash"), [])] + [int(sys.argv[3])])
    store.start()
    if not snap.queues:
        store.put_queue(QueueRecord("/", "crash"))
    out = sys.stdout
    rng = random.Random(int(sys.argv[2]))

    async def publisher(window: int) -> None:
        nonlocal seq
        while True:
            batch = []
            for _ in range(window):
                seq += 1
                body = b"m%d" % seq
                batch.append((seq, store.persist("/", [("crash", seq)], b"\x10\x00\x02", body, "", "crash")))
            for s, fut in batch:
                await fut
                out.write(f"+{s}\n")
            out.flush()
            if rng.random() < 0.3:  # acknowledge a confirmed message; report once the removal committed
                victim = batch[0][0]
                out.write(f"~{victim}\n")  # removal requested: may or may not be committed at a kill
                out.flush()
                store.remove_messages("/", "crash", [victim])
                await store.sync()
                out.write(f"-{victim}\n")
                out.flush()

    await asyncio.gather(*(publisher(rng.choice([1, 10, 100])) for _ in range(4)))

asyncio.run(main())
"""


@pytest.mark.slow
def test_confirmed_messages_survive_sigkill(tmp_path: Path) -> None:
    data = tmp_path / "crash"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    seed = int(os.environ.get("HASHBROKER_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    confirmed: set[int] = set()
    removing: set[int] = set()  # acknowledged, removal not yet reported committed
    removed: set[int] = set()
    highest = 0  # the highest position any child reported: the next child starts above it
    for round_ in range(20):
        proc = subprocess.Popen(
            [sys.executable, str(script), str(data), str(rng.randrange(1 << 30)), str(highest)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert proc.stdout is not None
        first = proc.stdout.readline()  # the child is writing: kill it at a random moment from here
        assert first.startswith(b"+"), (first, proc.stderr.read() if proc.stderr else b"")
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        rest = proc.stdout.read()
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        for line in (first + rest).split(b"\n")[:-1]:  # a torn last line was not a full report
            n = int(line[1:])
            assert not (line[:1] == b"+" and n in removing), f"seed {seed}: position {n} used twice"
            {b"+": confirmed, b"~": removing, b"-": removed}[line[:1]].add(n)
            highest = max(highest, n)

        s = open_store(data)
        try:
            snap = s.load()
        finally:
            asyncio.run(s.close())
        msgs = snap.messages.get(("/", "crash"), [])
        seqs = [m.seq for m in msgs]
        bodies = [m.body for m in msgs]
        assert len(set(bodies)) == len(bodies), f"seed {seed} round {round_}: duplicate messages"
        assert all(m.body == b"m%d" % m.seq for m in msgs)
        missing = confirmed - removing - set(seqs)
        assert not missing, f"seed {seed} round {round_}: confirmed but lost: {sorted(missing)[:10]}"
        resurrected = removed & set(seqs)
        assert not resurrected, f"seed {seed} round {round_}: removal lost: {sorted(resurrected)[:10]}"
        with contextlib.closing(sqlite3.connect(data / STORE_FILE)) as c:
            assert c.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert len(confirmed) > 20 * 10


# -- refusing files --------------------------------------------------------------------------------------


def file_state(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {
        p.name: (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(directory.iterdir())
        if p.name != "store.lock"
    }


def assert_refused(directory: Path, match: str, check: str = "quick") -> None:
    before = file_state(directory)
    time.sleep(0.01)  # mtime granularity: a write now would show up
    with pytest.raises(StoreError, match=match) as info:
        open_store(directory, check=check)
    message = str(info.value)
    assert "\n" not in message and str(directory / STORE_FILE) in message
    assert file_state(directory) == before  # same files, same bytes, same mtimes


def test_random_bytes_are_refused_untouched(tmp_path: Path) -> None:
    data = tmp_path / "d"
    data.mkdir()
    (data / STORE_FILE).write_bytes(random.Random(1).randbytes(64 * 1024))
    assert_refused(data, "not a SQLite database")


async def test_corrupt_pages_are_refused_untouched(tmp_path: Path) -> None:
    data = tmp_path / "d"
    s = started(data)
    s.put_queue(QueueRecord("/", "q"))
    await asyncio.gather(
        *(s.persist("/", [("q", i)], PROPS, os.urandom(500), "", "q") for i in range(1, 400))
    )
    await s.close()
    path = data / STORE_FILE
    raw = bytearray(path.read_bytes())
    page = int.from_bytes(raw[16:18], "big")
    assert len(raw) > 10 * page
    garbage = random.Random(2).randbytes(page)
    for n in range(2, len(raw) // page, 3):  # smash every third page after the header page
        raw[n * page : (n + 1) * page] = garbage
    path.write_bytes(bytes(raw))
    # a cleanly closed store (no -wal) is page-checked only with check="full": the default start
    # skips reading every page so that a restart serves at once whatever the depth
    assert_refused(data, "corrupt|integrity", check="full")


async def test_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    data = tmp_path / "d"
    s = open_store(data)
    s.load()
    await s.close()
    c = sqlite3.connect(data / STORE_FILE)
    c.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    c.close()
    assert not (data / f"{STORE_FILE}-wal").exists()
    assert_refused(data, f"newer hashbroker .*schema version {SCHEMA_VERSION + 1}")


def test_foreign_sqlite_file_is_refused_untouched(tmp_path: Path) -> None:
    data = tmp_path / "d"
    data.mkdir()
    c = sqlite3.connect(data / STORE_FILE)
    c.execute("CREATE TABLE somebody_elses (x)")
    c.commit()
    c.close()
    assert_refused(data, "not a hashbroker store")


async def test_data_directory_is_locked_while_open(tmp_path: Path) -> None:
    s = open_store(tmp_path / "d")
    with pytest.raises(StoreError, match="in use by another hashbroker"):
        open_store(tmp_path / "d")
    await s.close()
    await open_store(tmp_path / "d").close()


async def test_crash_leftover_wal_is_recovered(tmp_path: Path) -> None:
    """A store whose process died (WAL not checkpointed) opens and keeps its committed writes."""
    data = tmp_path / "d"
    code = (
        "import asyncio, os, sys\n"
        "from broker.store import QueueRecord, open_store\n"
        "async def main():\n"
        "    s = open_store(sys.argv[1]); s.load(); s.start()\n"
        "    s.put_queue(QueueRecord('/', 'q'))\n"
        "    await s.persist('/', [('q', 1)], b'\\x00\\x00', b'kept', '', 'q')\n"
        "    os._exit(0)\n"
        "asyncio.run(main())\n"
    )
    subprocess.run([sys.executable, "-c", code, str(data)], check=True, cwd=REPO)
    assert (data / f"{STORE_FILE}-wal").stat().st_size > 0
    snap = await reopen(data)
    assert [m.body for m in snap.messages[("/", "q")]] == [b"kept"]


# -- null store and defaults ---------------------------------------------------------------------------


async def test_memory_keeps_nothing() -> None:
    s = open_store(":memory:")
    assert isinstance(s, NullStore) and not s.persistent
    s.start()
    s.put_queue(QueueRecord("/", "q"))
    s.add_binding(BindingRecord("/", "amq.direct", "queue", "q"))
    fut = s.persist("/", [("q", 1)], PROPS, b"x", "", "q")
    assert fut.done() and fut.result() is None
    await s.sync()
    await s.close()
    again = open_store(":memory:")
    assert again.load() == Snapshot()


def test_default_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if sys.platform in ("win32", "darwin"):
        pytest.skip("XDG rules apply on Linux/Unix")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_data_dir() == tmp_path / "hashbroker"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")
    assert default_data_dir() == Path.home() / ".local" / "share" / "hashbroker"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert default_data_dir() == Path.home() / ".local" / "share" / "hashbroker"


def test_bad_options_are_store_errors(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="sync mode"):
        open_store(tmp_path, sync="sometimes")
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(StoreError, match="data directory"):
        open_store(tmp_path / "file")


def test_stored_arguments_with_a_nan_double_still_load(tmp_path: Path) -> None:
    """Arguments stored before NaN/Inf were refused at the wire must not stop the broker starting."""
    store = SqliteStore.open(tmp_path)
    nan_args = FieldTable([("x-note", Field("double", float("nan")))])
    store._conn.execute(
        "INSERT INTO queues (vhost, name, durable, exclusive, auto_delete, arguments) "
        "VALUES (?, ?, 1, 0, 0, ?)",
        (b"/", b"q-nan", nan_args.encode()),
    )
    snap = store.load()
    (queue,) = snap.queues
    value = queue.arguments.get("x-note")
    assert (
        queue.name == "q-nan" and value is not None and value.type == "double" and value.value != value.value
    )
    asyncio.run(store.close())
