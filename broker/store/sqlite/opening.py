"""Opening the SQLite store safely: the directory lock, the read-only check of an existing file, and
the connection in WAL mode.

Refuse, never repair: an existing file is inspected read-only first, so a file that is not SQLite,
not ours, from a newer schema or failing its integrity check is left byte for byte untouched.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import IO, Literal

from broker.store.base import StoreError
from broker.store.sqlite.schema import (
    APPLICATION_ID,
    CHUNK_FILE,
    CHUNK_PAGE_SIZE,
    LOCK_FILE,
    SCHEMA_VERSION,
    SQLITE_MAGIC,
    TABLES,
)

Sync = Literal["normal", "full"]
Check = Literal["quick", "full", "none"]


def lock_directory(directory: Path) -> IO[bytes] | None:
    """Hold an exclusive lock on `store.lock` for the store's lifetime (released even on SIGKILL)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: SQLite's own locking is all we get
        return None
    lock_path = directory / LOCK_FILE
    try:
        f = open(lock_path, "ab")  # noqa: SIM115 - kept open until close()
    except OSError as exc:
        raise StoreError(f"{lock_path}: cannot create lock file ({exc.strerror or exc})") from None
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise StoreError(
            f"{directory}: data directory is in use by another hashbroker ({lock_path} is locked)"
        ) from None
    return f


def check_existing(path: Path, check: Check) -> bool:
    """Read-only inspection of an existing store; True when it exists and is usable.

    Nothing here writes: the header is read with open(), SQLite is opened with `mode=ro`, so a
    corrupt, foreign or newer file is refused exactly as it was found.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StoreError(f"{path}: cannot stat store ({exc.strerror or exc})") from None
    if size == 0 and not Path(f"{path}-wal").exists():
        return False  # created but never written (SQLite itself treats this as an empty database)
    try:
        with open(path, "rb") as f:
            header = f.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise StoreError(f"{path}: cannot read store ({exc.strerror or exc})") from None
    if header != SQLITE_MAGIC:
        raise StoreError(f"{path}: not a SQLite database (corrupt or foreign file); refusing to use it")
    # Without a -wal file the main file is the whole database: `immutable=1` reads it without
    # creating -wal/-shm files (plain `mode=ro` would create both for a WAL-mode file). With a -wal
    # left by a crash, `mode=ro` reads the committed transactions in it; the sidecars exist already.
    wal_left = Path(f"{path}-wal").exists()
    try:
        conn = sqlite3.connect(f"{path.as_uri()}?{'mode=ro' if wal_left else 'immutable=1'}", uri=True)
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot open store read-only ({exc})") from None
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if app_id != APPLICATION_ID:
            if not tables and not version:
                return False  # an empty SQLite database: safe to initialise
            raise StoreError(f"{path}: not a hashbroker store (SQLite application_id {app_id:#x})")
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{path}: written by a newer hashbroker (store schema version {version}, "
                f"this version reads up to {SCHEMA_VERSION}); refusing to use it"
            )
        if version < 1:
            raise StoreError(f"{path}: unknown store schema version {version}")
        # "quick" checks a store a crash left (its -wal is still there); a cleanly closed store
        # (SQLite checkpoints and removes the -wal on the last close) opens without reading every
        # page, so a restart serves in the same time whatever the stored depth
        if check == "full" or (check == "quick" and wal_left):
            pragma = "quick_check" if check == "quick" else "integrity_check"
            rows = conn.execute(f"PRAGMA {pragma}(1)").fetchall()
            if rows != [("ok",)]:
                problem = str(rows[0][0]).replace("\n", " ") if rows else "no answer"
                raise StoreError(f"{path}: SQLite integrity check failed ({problem}); refusing to use it")
        missing = TABLES - tables
        if missing:
            raise StoreError(f"{path}: store is missing tables {', '.join(sorted(missing))}")
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: corrupt SQLite database ({exc}); refusing to use it") from None
    finally:
        conn.close()
    return True


def connect(path: Path, sync: Sync) -> sqlite3.Connection:
    try:
        # isolation_level=None: we issue BEGIN/COMMIT ourselves (one transaction per batch).
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            conn.close()
            raise StoreError(f"{path}: cannot switch the store to WAL mode (got {mode})")
        conn.execute(f"PRAGMA synchronous = {sync.upper()}")
        conn.execute("PRAGMA foreign_keys = OFF")
        attach_chunks(conn, path, sync)
        return conn
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot open store ({exc})") from None


def attach_chunks(conn: sqlite3.Connection, path: Path, sync: Sync) -> None:
    """Attach the stream chunk file (`CHUNK_FILE`) as `chunks`, in WAL mode with large pages (the
    page size takes effect when the file is created)."""
    conn.execute("ATTACH DATABASE ? AS chunks", (str(path.with_name(CHUNK_FILE)),))
    conn.execute(f"PRAGMA chunks.page_size = {CHUNK_PAGE_SIZE}")
    mode = conn.execute("PRAGMA chunks.journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise sqlite3.OperationalError(f"cannot switch {CHUNK_FILE} to WAL mode (got {mode})")
    conn.execute(f"PRAGMA chunks.synchronous = {sync.upper()}")
