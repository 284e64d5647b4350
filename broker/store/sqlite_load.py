"""Reading the whole SQLite store back into a `Snapshot` at start."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from amqpwire.fields import FieldDecodeError, FieldTable
from broker.store.base import StoreError
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
from broker.store.sqlite_schema import from_blob


def load_snapshot(c: sqlite3.Connection, path: Path) -> Snapshot:
    """Everything stored, in rebuild order; a body shared by several queues is one bytes object."""
    snap = Snapshot()
    try:
        for name, desc, tags in c.execute("SELECT name, description, tags FROM vhosts ORDER BY id"):
            snap.vhosts.append(VHostRecord(from_blob(name), desc, tuple(json.loads(tags))))
        for name, pw, algo, tags in c.execute(
            "SELECT name, password_hash, hashing_algorithm, tags FROM users ORDER BY id"
        ):
            snap.users.append(UserRecord(name, pw, algo, tuple(json.loads(tags))))
        for vhost, user, conf, write, read in c.execute(
            "SELECT vhost, user, configure, write, read FROM permissions ORDER BY id"
        ):
            snap.permissions.append(PermissionRecord(from_blob(vhost), user, conf, write, read))
        for vhost, name, pattern, definition, priority, apply_to in c.execute(
            "SELECT vhost, name, pattern, definition, priority, apply_to FROM policies ORDER BY id"
        ):
            snap.policies.append(
                PolicyRecord(from_blob(vhost), name, pattern, definition, priority, apply_to)
            )
        where = str(path)
        for vhost, name, type_, durable, auto_delete, internal, args in c.execute(
            "SELECT vhost, name, type, durable, auto_delete, internal, arguments FROM exchanges ORDER BY id"
        ):
            snap.exchanges.append(
                ExchangeRecord(
                    from_blob(vhost),
                    from_blob(name),
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
                    from_blob(vhost),
                    from_blob(name),
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
                BindingRecord(
                    from_blob(vhost),
                    from_blob(source),
                    kind,
                    from_blob(dest),
                    from_blob(key),
                    _table(args, where),
                )
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
                content = shared[msg_id] = (bytes(props), bytes(body), from_blob(exchange), from_blob(rk))
            vq = (from_blob(vhost), from_blob(queue))
            snap.messages.setdefault(vq, []).append(
                MessageRecord(
                    vq[0], vq[1], seq, content[0], content[1], content[2], content[3], bool(redelivered)
                )
            )
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: cannot read the store ({exc})") from None
    return snap


def _table(raw: bytes, where: str) -> FieldTable:
    """Stored arguments; a NaN/Inf a store written before such values were refused stays loadable,
    because refusing to start over a value the broker once accepted would strand the whole store."""
    try:
        return FieldTable.decode(raw, allow_non_finite=True)
    except FieldDecodeError as exc:
        raise StoreError(f"{where}: stored arguments cannot be decoded ({exc})") from None
