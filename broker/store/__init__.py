"""Durable broker state: definitions and persistent messages in SQLite under a data directory.

    store = open_store(settings.data_dir)      # StoreError: one line naming the file and the problem
    snapshot = store.load()                    # rebuild vhosts, users, policies, exchanges, queues,
                                               # bindings (in binding order) and messages from it
    store.start()                              # on the broker's running loop
    fut = store.persist(vhost, [(queue, seq)], props, body, exchange, routing_key)
    fut.add_done_callback(...)                 # confirm only now: the write has committed
    await store.close()

`open_store(":memory:")` gives a `NullStore` that keeps nothing (`store.persistent` is False).
The store never imports broker runtime modules: it takes and returns plain records.
"""

from __future__ import annotations

import os

from broker.store.base import NullStore, Store, StoreError, StoreStats
from broker.store.paths import NULL_DATA_DIR, default_data_dir
from broker.store.records import (
    BindingRecord,
    DelayedRecord,
    ExchangeRecord,
    MessageRecord,
    PermissionRecord,
    PolicyRecord,
    QueueRecord,
    Snapshot,
    UserRecord,
    VHostRecord,
)

__all__ = [
    "NULL_DATA_DIR",
    "BindingRecord",
    "DelayedRecord",
    "ExchangeRecord",
    "MessageRecord",
    "NullStore",
    "PermissionRecord",
    "PolicyRecord",
    "QueueRecord",
    "Snapshot",
    "Store",
    "StoreError",
    "StoreStats",
    "UserRecord",
    "VHostRecord",
    "default_data_dir",
    "open_store",
]


def open_store(
    data_dir: str | os.PathLike[str] | None,
    *,
    sync: str = "normal",
    check: str = "quick",
) -> Store:
    """The store for a `data_dir` setting: None = the per-user default directory, ":memory:" = none.

    `sync` is "normal" (durable against a killed process) or "full" (also against power loss);
    `check` is "quick" (SQLite's quick_check of a store a crash left), "full" (integrity_check,
    always) or "none" (how an existing file is verified before use).
    """
    if data_dir is not None and os.fspath(data_dir) == NULL_DATA_DIR:
        return NullStore()
    from broker.store.sqlite.store import SqliteStore  # sqlite3 only when a store is actually used

    if sync not in ("normal", "full"):
        raise StoreError(f"{data_dir}: unknown sync mode {sync!r} (use 'normal' or 'full')")
    if check not in ("quick", "full", "none"):
        raise StoreError(f"{data_dir}: unknown check {check!r} (use 'quick', 'full' or 'none')")
    directory = default_data_dir() if data_dir is None else data_dir
    return SqliteStore.open(directory, sync=sync, check=check)  # type: ignore[arg-type]
