"""The SQLite store's schema, its identity marks and the statements the writer runs.

Statements are module constants so that consecutive identical statements are recognised by identity
and batched into one `executemany`.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from broker.store.base import StoreError

STORE_FILE = "store.sqlite3"
LOCK_FILE = "store.lock"
SCHEMA_VERSION = 1
APPLICATION_ID = 0x48425354  # "HBST": marks the file as a hashbroker store (PRAGMA application_id)
SQLITE_MAGIC = b"SQLite format 3\x00"

PERMISSIONS_TABLE = """CREATE TABLE IF NOT EXISTS permissions (
    id INTEGER PRIMARY KEY, vhost BLOB NOT NULL, user TEXT NOT NULL, configure TEXT NOT NULL,
    write TEXT NOT NULL, read TEXT NOT NULL, UNIQUE (vhost, user))"""
"""Added after schema version 1 shipped: created on open when an older store lacks it."""

DELAYED_TABLE = """CREATE TABLE IF NOT EXISTS delayed_messages (
    id INTEGER PRIMARY KEY, vhost BLOB NOT NULL, key INTEGER NOT NULL, exchange BLOB NOT NULL,
    due INTEGER NOT NULL, routing_key BLOB NOT NULL, properties BLOB NOT NULL, body BLOB NOT NULL,
    UNIQUE (vhost, key))"""
"""Added after schema version 1 shipped: the messages durable x-delayed-message exchanges hold (the
plugin's disc table). Created on open when a store lacks it; an older hashbroker ignores it."""

SCHEMA = """
CREATE TABLE vhosts (
    id INTEGER PRIMARY KEY, name BLOB NOT NULL UNIQUE, description TEXT NOT NULL, tags TEXT NOT NULL);
CREATE TABLE users (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, password_hash TEXT NOT NULL,
    hashing_algorithm TEXT NOT NULL, tags TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS permissions (
    id INTEGER PRIMARY KEY, vhost BLOB NOT NULL, user TEXT NOT NULL, configure TEXT NOT NULL,
    write TEXT NOT NULL, read TEXT NOT NULL, UNIQUE (vhost, user));
CREATE TABLE policies (
    id INTEGER PRIMARY KEY, vhost BLOB NOT NULL, name TEXT NOT NULL, pattern TEXT NOT NULL,
    definition TEXT NOT NULL, priority INTEGER NOT NULL, apply_to TEXT NOT NULL, UNIQUE (vhost, name));
CREATE TABLE exchanges (
    id INTEGER PRIMARY KEY, vhost BLOB NOT NULL, name BLOB NOT NULL, type TEXT NOT NULL,
    durable INTEGER NOT NULL, auto_delete INTEGER NOT NULL, internal INTEGER NOT NULL,
    arguments BLOB NOT NULL, UNIQUE (vhost, name));
CREATE TABLE queues (
    id INTEGER PRIMARY KEY, vhost BLOB NOT NULL, name BLOB NOT NULL, durable INTEGER NOT NULL,
    exclusive INTEGER NOT NULL, auto_delete INTEGER NOT NULL, arguments BLOB NOT NULL,
    UNIQUE (vhost, name));
CREATE TABLE bindings (
    id INTEGER PRIMARY KEY, vhost BLOB NOT NULL, source BLOB NOT NULL, dest_kind TEXT NOT NULL,
    destination BLOB NOT NULL, key BLOB NOT NULL, arguments BLOB NOT NULL,
    UNIQUE (vhost, source, dest_kind, destination, key, arguments));
CREATE INDEX bindings_by_destination ON bindings (vhost, dest_kind, destination);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY, refs INTEGER NOT NULL, exchange BLOB NOT NULL, routing_key BLOB NOT NULL,
    properties BLOB NOT NULL, body BLOB NOT NULL);
CREATE INDEX messages_unreferenced ON messages (id) WHERE refs <= 0;
CREATE TABLE queue_messages (
    vhost BLOB NOT NULL, queue BLOB NOT NULL, seq INTEGER NOT NULL, msg_id INTEGER NOT NULL,
    redelivered INTEGER NOT NULL, PRIMARY KEY (vhost, queue, seq)) WITHOUT ROWID;
"""
TRACKING_TABLE = """CREATE TABLE IF NOT EXISTS {db}.stream_tracking (
    vhost BLOB NOT NULL, queue BLOB NOT NULL, kind INTEGER NOT NULL, reference BLOB NOT NULL,
    value INTEGER NOT NULL, PRIMARY KEY (vhost, queue, kind, reference)) WITHOUT ROWID"""
"""Added after schema version 1 shipped: what a stream tracks beside its records (its named
writers' last publishing ids, its consumers' stored offsets), which osiris keeps in the log.
Created on open when a store lacks it, in the file that holds the chunk rows (`add_chunk_table`);
an older hashbroker ignores it."""
PUT_TRACKING = (
    "INSERT INTO stream_tracking (vhost, queue, kind, reference, value) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (vhost, queue, kind, reference) DO UPDATE SET value = excluded.value"
)
CHUNK_FILE = "streams.sqlite3"
"""The stream chunk rows' own database file, attached as `chunks` beside the store file: large
pages (`CHUNK_PAGE_SIZE`) write a chunk of records in a few WAL frames instead of one per 4 KB,
while the small rows of everything else keep the main file's small pages."""
CHUNK_PAGE_SIZE = 65536
CHUNKS_TABLE = """CREATE TABLE IF NOT EXISTS chunks.stream_chunks (
    vhost BLOB NOT NULL, queue BLOB NOT NULL, first INTEGER NOT NULL, last INTEGER NOT NULL,
    timestamp INTEGER NOT NULL DEFAULT 0, body_bytes INTEGER NOT NULL, sizes BLOB NOT NULL,
    data BLOB NOT NULL, PRIMARY KEY (vhost, queue, first))"""
"""Added after schema version 1 shipped: a stream's records one row per chunk (positions `first`
to `last`), as osiris keeps a chunk: `sizes` holds each record's exchange, routing key,
properties and body lengths (little-endian uint32, four per record), `data` the four
concatenated per record (broker.store.sqlite.stream_pages). One row per publish frame instead of
two per record; the small columns come first so an index scan never reads `data`. A stream
written before this table existed keeps its records in `messages`/`queue_messages`; readers
merge both by position. Created on open when a store lacks it; an older hashbroker ignores it."""
INSERT_CHUNK = (
    "INSERT OR REPLACE INTO stream_chunks (vhost, queue, first, last, body_bytes, sizes, data) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
#: A chunk row with its time (a stream-protocol publish frame: one chunk, written once).
INSERT_TIMED_CHUNK = (
    "INSERT OR REPLACE INTO stream_chunks (vhost, queue, first, last, timestamp, body_bytes, sizes, data) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
SET_CHUNK_TIMESTAMP = "UPDATE stream_chunks SET timestamp = ? WHERE vhost = ? AND queue = ? AND first = ?"
TRUNCATE_CHUNKS = "DELETE FROM stream_chunks WHERE vhost = ? AND queue = ? AND last <= ?"
UNREF_STREAM_HEAD = (
    "UPDATE messages SET refs = refs - 1 WHERE id IN "
    "(SELECT msg_id FROM queue_messages WHERE vhost = ? AND queue = ? AND seq <= ?)"
)
DELETE_STREAM_HEAD = "DELETE FROM queue_messages WHERE vhost = ? AND queue = ? AND seq <= ?"
LATER_TABLES = (PERMISSIONS_TABLE, DELAYED_TABLE)
"""Tables added after schema version 1 shipped (`CREATE TABLE IF NOT EXISTS`): every store gets
them on open."""
TABLES = frozenset(
    {"vhosts", "users", "policies", "exchanges", "queues", "bindings", "messages", "queue_messages"}
)

PUT_VHOST = (
    "INSERT INTO vhosts (name, description, tags) VALUES (?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET description = excluded.description, tags = excluded.tags"
)
PUT_PERMISSION = (
    "INSERT INTO permissions (vhost, user, configure, write, read) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (vhost, user) DO UPDATE SET configure = excluded.configure, write = excluded.write, "
    "read = excluded.read"
)
PUT_USER = (
    "INSERT INTO users (name, password_hash, hashing_algorithm, tags) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET password_hash = excluded.password_hash, "
    "hashing_algorithm = excluded.hashing_algorithm, tags = excluded.tags"
)
PUT_POLICY = (
    "INSERT INTO policies (vhost, name, pattern, definition, priority, apply_to) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (vhost, name) DO UPDATE SET pattern = excluded.pattern, definition = excluded.definition, "
    "priority = excluded.priority, apply_to = excluded.apply_to"
)
PUT_EXCHANGE = (
    "INSERT INTO exchanges (vhost, name, type, durable, auto_delete, internal, arguments) "
    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (vhost, name) DO UPDATE SET type = excluded.type, "
    "durable = excluded.durable, auto_delete = excluded.auto_delete, internal = excluded.internal, "
    "arguments = excluded.arguments"
)
PUT_QUEUE = (
    "INSERT INTO queues (vhost, name, durable, exclusive, auto_delete, arguments, members, leader) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (vhost, name) DO UPDATE SET durable = excluded.durable, exclusive = excluded.exclusive, "
    "auto_delete = excluded.auto_delete, arguments = excluded.arguments, members = excluded.members, "
    "leader = excluded.leader"
)
ADD_BINDING = (
    "INSERT OR IGNORE INTO bindings (vhost, source, dest_kind, destination, key, arguments) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
REMOVE_BINDING = (
    "DELETE FROM bindings WHERE vhost = ? AND source = ? AND dest_kind = ? AND destination = ? "
    "AND key = ? AND arguments = ?"
)
INSERT_MESSAGE = (
    "INSERT INTO messages (id, refs, exchange, routing_key, properties, body) VALUES (?, ?, ?, ?, ?, ?)"
)
INSERT_POSITION = (
    "INSERT OR REPLACE INTO queue_messages (vhost, queue, seq, msg_id, redelivered, size) "
    "VALUES (?, ?, ?, ?, 0, ?)"
)
# Removals and redelivered marks by run of consecutive positions (vhost, queue, first seq, last
# seq): an ack of many deliveries, or a prefetch window's marks, is a few runs, each one range scan.
UNREF_RUN = (
    "UPDATE messages SET refs = refs - 1 WHERE id IN "
    "(SELECT msg_id FROM queue_messages WHERE vhost = ? AND queue = ? AND seq BETWEEN ? AND ?)"
)
DELETE_RUN = "DELETE FROM queue_messages WHERE vhost = ? AND queue = ? AND seq BETWEEN ? AND ?"
MARK_RUN = "UPDATE queue_messages SET redelivered = 1 WHERE vhost = ? AND queue = ? AND seq BETWEEN ? AND ?"
UNREF_QUEUE = (
    "UPDATE messages SET refs = refs - 1 WHERE id IN "
    "(SELECT msg_id FROM queue_messages WHERE vhost = ? AND queue = ?)"
)
DELETE_QUEUE_POSITIONS = "DELETE FROM queue_messages WHERE vhost = ? AND queue = ?"
COLLECT_GARBAGE = "DELETE FROM messages WHERE refs <= 0"
PUT_DELAYED = (
    "INSERT OR REPLACE INTO delayed_messages (vhost, key, exchange, due, routing_key, properties, body) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
REMOVE_DELAYED = "DELETE FROM delayed_messages WHERE vhost = ? AND key = ?"


def to_blob(name: str) -> bytes:
    """An AMQP name as the bytes the client sent (the broker decodes them with surrogateescape)."""
    return name.encode("utf-8", errors="surrogateescape")


def from_blob(raw: bytes) -> str:
    return bytes(raw).decode("utf-8", errors="surrogateescape")


def add_position_sizes(conn: sqlite3.Connection, path: Path) -> None:
    """Each position's body size, so a restart sums a queue's bytes from `queue_messages` alone
    (broker.store.sqlite.load DEPTHS). Added to a store made without it; its rows stay NULL and are
    measured from the body instead."""
    try:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(queue_messages)")}
        if "size" not in columns:
            conn.execute("ALTER TABLE queue_messages ADD COLUMN size INTEGER")
    except sqlite3.Error as exc:
        conn.close()
        raise StoreError(f"{path}: cannot add body sizes to the positions ({exc})") from None


def create_schema(conn: sqlite3.Connection, path: Path) -> None:
    try:
        conn.execute("BEGIN")
        for statement in SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        conn.close()
        raise StoreError(f"{path}: cannot create store ({exc})") from None


# -- per-position state of quorum queues and streams ------------------------------------------------

QUEUE_MESSAGE_COLUMNS = (
    ("delivery_count", "INTEGER NOT NULL DEFAULT 0"),
    ("return_order", "INTEGER NOT NULL DEFAULT 0"),
    ("timestamp", "INTEGER NOT NULL DEFAULT 0"),
    ("dead_letter", "TEXT NOT NULL DEFAULT ''"),
    ("dead_letter_order", "INTEGER NOT NULL DEFAULT 0"),
)
"""Added to `queue_messages` after schema version 1 shipped (every store gets them on open): a
quorum message's returns so far and its place among returned messages, a stream chunk's time (ms,
on the chunk's first message), and for a quorum message held in its queue's dead-letter store
(at-least-once, no queue took it yet) the dead-letter reason ('' for any other message) and its
place in that store. Additive, so an older hashbroker still reads the store."""
QUEUE_COLUMNS = (
    ("members", "TEXT NOT NULL DEFAULT ''"),
    ("leader", "TEXT NOT NULL DEFAULT ''"),
)
"""Added to `queues` after schema version 1 shipped: a replicated queue's member nodes (a JSON
list) and leader as placed at declaration, '' when not placed (classic queues, or a store written
before they were kept: such a queue is placed again at boot, then written)."""
LATER_COLUMNS = (("queue_messages", QUEUE_MESSAGE_COLUMNS), ("queues", QUEUE_COLUMNS))
SET_DELIVERY_STATE = (
    "UPDATE queue_messages SET redelivered = ?, delivery_count = ?, return_order = ? "
    "WHERE vhost = ? AND queue = ? AND seq = ?"
)
SET_TIMESTAMP = "UPDATE queue_messages SET timestamp = ? WHERE vhost = ? AND queue = ? AND seq = ?"
SET_DEAD_LETTER = (
    "UPDATE queue_messages SET dead_letter = ?, dead_letter_order = ? "
    "WHERE vhost = ? AND queue = ? AND seq = ?"
)


def add_later_tables(conn: sqlite3.Connection, path: Path) -> None:
    """Create the `LATER_TABLES` a store lacks (created before they existed)."""
    try:
        for statement in LATER_TABLES:
            conn.execute(statement)
    except sqlite3.Error as exc:
        conn.close()
        raise StoreError(f"{path}: cannot add a table ({exc})") from None


def add_chunk_table(conn: sqlite3.Connection, path: Path) -> None:
    """The chunk rows' table in the attached `CHUNK_FILE`, and the tracking table beside it. A store
    whose main file already holds chunk rows (written before the file existed) keeps both there:
    `stream_chunks` and `stream_tracking` name the main file's tables first, so every statement
    reads and writes those.

    The two belong in one file because a commit spanning two WAL files is atomic per file only: a
    writer's last publishing id committed without its chunk (a kill between the two files'
    commits) would make the publisher's retry of the unconfirmed chunk a "duplicate" and lose it.
    """
    try:
        if _has_table(conn, "stream_chunks"):
            if conn.execute("SELECT 1 FROM main.stream_chunks LIMIT 1").fetchone() is not None:
                conn.execute(TRACKING_TABLE.format(db="main"))
                return
            conn.execute("DROP TABLE main.stream_chunks")
        conn.execute(CHUNKS_TABLE)
        conn.execute(TRACKING_TABLE.format(db="chunks"))
        if _has_table(conn, "stream_tracking"):  # written before the chunk file held it
            conn.execute("INSERT OR IGNORE INTO chunks.stream_tracking SELECT * FROM main.stream_tracking")
            conn.execute("DROP TABLE main.stream_tracking")
    except sqlite3.Error as exc:
        conn.close()
        raise StoreError(f"{path}: cannot add the stream chunk table ({exc})") from None


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    """Whether the main file has the table `name`."""
    found = conn.execute("SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = ?", (name,))
    return found.fetchone() is not None


def add_later_columns(conn: sqlite3.Connection, path: Path) -> None:
    """Add the `LATER_COLUMNS` a store lacks (created before they existed)."""
    name = ""
    try:
        for table, columns in LATER_COLUMNS:
            have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            for name, decl in columns:
                if name not in have:
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")
    except sqlite3.Error as exc:
        conn.close()
        raise StoreError(f"{path}: cannot add the {name} column ({exc})") from None
