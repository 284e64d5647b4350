"""Reading the whole SQLite store back into a `Snapshot` at start."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from amqpwire.fields import FieldDecodeError, FieldTable
from broker.store import records as rec
from broker.store.base import StoreError
from broker.store.sqlite.chunks import decode_chunk
from broker.store.sqlite.schema import from_blob, to_blob

#: Per queue: message count, body bytes and last position, from the positions alone (a row
#: written before positions had sizes is measured from its body).
DEPTHS = (
    "SELECT qm.vhost, qm.queue, count(*), "
    "coalesce(sum(coalesce(qm.size, (SELECT length(body) FROM messages WHERE id = qm.msg_id))), 0), "
    "max(qm.seq) FROM queue_messages qm JOIN queues q ON q.vhost = qm.vhost AND q.name = qm.queue "
    "GROUP BY qm.vhost, qm.queue"
)
READ_QUEUE = (
    "SELECT qm.seq, qm.redelivered, m.exchange, m.routing_key, m.properties, m.body "
    "FROM queue_messages qm JOIN messages m ON m.id = qm.msg_id "
    "WHERE qm.vhost = ? AND qm.queue = ? AND qm.seq > ? AND qm.seq <= ? ORDER BY qm.seq LIMIT ?"
)
#: Per stream: the records, body bytes and last position of its chunk rows.
CHUNK_DEPTHS = (
    "SELECT c.vhost, c.queue, sum(c.last - c.first + 1), sum(c.body_bytes), max(c.last) "
    "FROM stream_chunks c JOIN queues q ON q.vhost = c.vhost AND q.name = c.queue "
    "GROUP BY c.vhost, c.queue"
)
QUEUE_SEQS = (
    "SELECT seq FROM queue_messages WHERE vhost = ? AND queue = ? AND seq > ? AND seq <= ? ORDER BY seq"
)


def load_snapshot(c: sqlite3.Connection, path: Path, *, messages: bool = True) -> rec.Snapshot:
    """Everything stored, in rebuild order; a body shared by several queues is one bytes object.
    Without `messages`, each queue's depth instead (`QueueReader` reads the messages later)."""
    snap = rec.Snapshot()
    try:
        for name, desc, tags in c.execute("SELECT name, description, tags FROM vhosts ORDER BY id"):
            snap.vhosts.append(rec.VHostRecord(from_blob(name), desc, tuple(json.loads(tags))))
        for name, pw, algo, tags in c.execute(
            "SELECT name, password_hash, hashing_algorithm, tags FROM users ORDER BY id"
        ):
            snap.users.append(rec.UserRecord(name, pw, algo, tuple(json.loads(tags))))
        for vhost, user, conf, write, read in c.execute(
            "SELECT vhost, user, configure, write, read FROM permissions ORDER BY id"
        ):
            snap.permissions.append(rec.PermissionRecord(from_blob(vhost), user, conf, write, read))
        for vhost, name, pattern, definition, priority, apply_to in c.execute(
            "SELECT vhost, name, pattern, definition, priority, apply_to FROM policies ORDER BY id"
        ):
            snap.policies.append(
                rec.PolicyRecord(from_blob(vhost), name, pattern, definition, priority, apply_to)
            )
        where = str(path)
        for vhost, name, type_, durable, auto_delete, internal, args in c.execute(
            "SELECT vhost, name, type, durable, auto_delete, internal, arguments FROM exchanges ORDER BY id"
        ):
            snap.exchanges.append(
                rec.ExchangeRecord(
                    from_blob(vhost),
                    from_blob(name),
                    type_,
                    bool(durable),
                    bool(auto_delete),
                    bool(internal),
                    _table(args, where),
                )
            )
        for vhost, name, durable, exclusive, auto_delete, args, members, leader in c.execute(
            "SELECT vhost, name, durable, exclusive, auto_delete, arguments, members, leader "
            "FROM queues ORDER BY id"
        ):
            snap.queues.append(
                rec.QueueRecord(
                    from_blob(vhost),
                    from_blob(name),
                    bool(durable),
                    bool(exclusive),
                    bool(auto_delete),
                    _table(args, where),
                    _members(members, where),
                    leader,
                )
            )
        for vhost, source, kind, dest, key, args in c.execute(
            "SELECT vhost, source, dest_kind, destination, key, arguments FROM bindings ORDER BY id"
        ):
            snap.bindings.append(
                rec.BindingRecord(
                    from_blob(vhost),
                    from_blob(source),
                    kind,
                    from_blob(dest),
                    from_blob(key),
                    _table(args, where),
                )
            )
        for vhost, key, exchange, due, rk, props, body in c.execute(
            "SELECT vhost, key, exchange, due, routing_key, properties, body FROM delayed_messages "
            "ORDER BY vhost, key"
        ):
            snap.delayed.append(
                rec.DelayedRecord(
                    from_blob(vhost),
                    int(key),
                    from_blob(exchange),
                    int(due),
                    from_blob(rk),
                    bytes(props),
                    bytes(body),
                )
            )
        eager = ""
        if not messages:
            lazy, others = _queue_ids(c, where)
            for vhost, queue, count, size, last in c.execute(DEPTHS):
                vq = (from_blob(vhost), from_blob(queue))
                if vq in lazy:
                    snap.depths[vq] = (int(count), int(size), int(last))
            for vhost, queue, count, size, last in c.execute(CHUNK_DEPTHS):
                vq = (from_blob(vhost), from_blob(queue))
                n, b, top = snap.depths.get(vq, (0, 0, 0))
                snap.depths[vq] = (n + int(count), b + int(size), max(top, int(last)))
            if not others:
                return snap
            # the others only: with q as the outer loop, the lazy queues' rows are never visited
            eager = f"WHERE q.id IN ({','.join(str(i) for i in others)}) "
        # One bytes object per stored body even when several queues share it.
        shared: dict[int, tuple[bytes, bytes, str, str]] = {}
        for vhost, queue, seq, redelivered, msg_id, exchange, rk, props, body in c.execute(
            "SELECT qm.vhost, qm.queue, qm.seq, qm.redelivered, m.id, m.exchange, m.routing_key, "
            "m.properties, m.body FROM queue_messages qm "
            "JOIN queues q ON q.vhost = qm.vhost AND q.name = qm.queue "
            "JOIN messages m ON m.id = qm.msg_id " + eager + "ORDER BY q.id, qm.seq"
        ):
            content = shared.get(msg_id)
            if content is None:
                content = shared[msg_id] = (bytes(props), bytes(body), from_blob(exchange), from_blob(rk))
            vq = (from_blob(vhost), from_blob(queue))
            snap.messages.setdefault(vq, []).append(
                rec.MessageRecord(
                    vq[0], vq[1], seq, content[0], content[1], content[2], content[3], bool(redelivered)
                )
            )
        if messages:
            _load_chunks(c, snap)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: cannot read the store ({exc})") from None
    snap.queue_state, snap.dead_letters = load_queue_state(c, path, timestamps=messages)
    if messages:
        _chunk_timestamps(c, snap)
    return snap


def _load_chunks(c: sqlite3.Connection, snap: rec.Snapshot) -> None:
    """The records of streams' chunk rows, among the queue's other stored records by position."""
    grown: set[tuple[str, str]] = set()
    for vhost, queue, first, sizes, data in c.execute(
        "SELECT c.vhost, c.queue, c.first, c.sizes, c.data FROM stream_chunks c "
        "JOIN queues q ON q.vhost = c.vhost AND q.name = c.queue ORDER BY q.id, c.first"
    ):
        vq = (from_blob(vhost), from_blob(queue))
        into = snap.messages.setdefault(vq, [])
        for seq, props, body, x, rk in decode_chunk(int(first), sizes, data, 0):
            into.append(rec.MessageRecord(vq[0], vq[1], seq, props, body, x, rk, False))
        grown.add(vq)
    for vq in grown:
        snap.messages[vq].sort(key=lambda m: m.seq)


def _chunk_timestamps(c: sqlite3.Connection, snap: rec.Snapshot) -> None:
    """Chunk rows' times, as `load_queue_state` gives those of records stored a row each."""
    try:
        for vhost, queue, first, ts in c.execute(
            "SELECT vhost, queue, first, timestamp FROM stream_chunks WHERE timestamp != 0"
        ):
            key = (from_blob(vhost), from_blob(queue))
            snap.queue_state.setdefault(key, {})[int(first)] = (0, 0, int(ts))
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"cannot read the store ({exc})") from None


def _queue_ids(c: sqlite3.Connection, where: str) -> tuple[set[tuple[str, str]], list[int]]:
    """(the queues whose messages a restarted broker reads as their head advances: classic queues
    without priorities, and streams, which read their index and page their bodies, see
    broker.runtime.durability.restore_depths; the ids of the others, loaded whole)."""
    lazy: set[tuple[str, str]] = set()
    others: list[int] = []
    for qid, vhost, name, raw in c.execute("SELECT id, vhost, name, arguments FROM queues"):
        args = _table(raw, where)
        qtype = args.get("x-queue-type")
        prio = args.get("x-max-priority")
        stream = qtype is not None and qtype.type == "longstr" and qtype.value == b"stream"
        classic = qtype is None or (qtype.type == "longstr" and qtype.value == b"classic")
        if stream or (classic and (prio is None or (isinstance(prio.value, int) and prio.value == 0))):
            lazy.add((from_blob(vhost), from_blob(name)))
        else:
            others.append(int(qid))
    return lazy, others


def _members(raw: str, where: str) -> tuple[str, ...]:
    """A queue's stored member nodes ('' when none were stored)."""
    if not raw:
        return ()
    try:
        nodes = json.loads(raw)
    except ValueError:
        nodes = None
    if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
        raise StoreError(f"{where}: stored queue members cannot be decoded ({raw[:60]!r})")
    return tuple(nodes)


def _table(raw: bytes, where: str) -> FieldTable:
    """Stored arguments; a NaN/Inf a store written before such values were refused stays loadable,
    because refusing to start over a value the broker once accepted would strand the whole store."""
    try:
        return FieldTable.decode(raw, allow_non_finite=True)
    except FieldDecodeError as exc:
        raise StoreError(f"{where}: stored arguments cannot be decoded ({exc})") from None


QueueState = dict[tuple[str, str], dict[int, tuple[int, int, int]]]
"""(vhost, queue) -> seq -> (delivery_count, return_order, timestamp ms), as `Snapshot.queue_state`."""
DeadLetters = dict[tuple[str, str], dict[int, tuple[str, int]]]
"""(vhost, queue) -> seq -> (reason, order), as `Snapshot.dead_letters`."""


def load_queue_state(
    c: sqlite3.Connection, path: Path, *, timestamps: bool = True
) -> tuple[QueueState, DeadLetters]:
    """In one pass over the positions, by queue: those with a delivery count, a return order or
    (with `timestamps`) a stream chunk's timestamp, and those held in their quorum queue's
    dead-letter store (reason, order). Without `timestamps` streams read theirs with their index
    (`broker.store.sqlite.stream_pages`), so a long stream costs no entry here."""
    state: QueueState = {}
    held: DeadLetters = {}
    stamped = " OR timestamp != 0" if timestamps else ""
    try:
        for vhost, queue, seq, count, order, ts, reason, dl_order in c.execute(
            "SELECT vhost, queue, seq, delivery_count, return_order, timestamp, dead_letter, "
            "dead_letter_order FROM queue_messages "
            f"WHERE delivery_count != 0 OR return_order != 0{stamped} OR dead_letter != ''"
        ):
            key = (from_blob(vhost), from_blob(queue))
            if reason:
                held.setdefault(key, {})[int(seq)] = (str(reason), int(dl_order))
            if count or order or ts:
                state.setdefault(key, {})[int(seq)] = (int(count), int(order), int(ts))
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: cannot read the store ({exc})") from None
    return state, held


class QueueReader:
    """Reads queues' messages after start, on a read-only connection of its own: WAL lets it read
    the committed state while the writer thread writes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            uri = f"{self.path.resolve().as_uri()}?mode=ro"
            self._conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        return self._conn

    def read(
        self, vhost: str, queue: str, after: int, upto: int, limit: int
    ) -> list[tuple[int, bool, str, str, bytes, bytes]]:
        try:
            rows = self._connection().execute(
                READ_QUEUE, (to_blob(vhost), to_blob(queue), after, upto, limit)
            )
            return [
                (int(seq), bool(redelivered), from_blob(x), from_blob(k), bytes(props), bytes(body))
                for seq, redelivered, x, k, props, body in rows
            ]
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: cannot read queue {queue!r} ({exc})") from None

    def seqs(self, vhost: str, queue: str, after: int, upto: int) -> list[int]:
        try:
            rows = self._connection().execute(QUEUE_SEQS, (to_blob(vhost), to_blob(queue), after, upto))
            return [int(seq) for (seq,) in rows]
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: cannot read queue {queue!r} ({exc})") from None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
