"""The store interface's writes keep nothing unless a store overrides them (what `NullStore`, the
`--data-dir :memory:` store, relies on); the persistent store must override every one, or a change
would silently be lost across a restart."""

from __future__ import annotations

import inspect

from broker.store.base import NullStore, Store
from broker.store.records import VHostRecord
from broker.store.sqlite.store import SqliteStore

WRITES = (
    "put_vhost",
    "delete_vhost",
    "put_user",
    "delete_user",
    "put_permission",
    "delete_permission",
    "put_policy",
    "delete_policy",
    "put_exchange",
    "delete_exchange",
    "put_queue",
    "delete_queue",
    "add_binding",
    "remove_binding",
    "write_messages",
    "remove_messages",
    "mark_redelivered",
    "purge_queue",
    "set_delivery_state",
    "set_timestamps",
    "set_dead_letters",
    "put_delayed",
    "remove_delayed",
)


def test_the_sqlite_store_overrides_every_write_of_the_interface() -> None:
    defaults = {n for n, f in vars(Store).items() if inspect.isfunction(f) and not n.startswith("_")}
    assert set(WRITES) <= defaults
    missing = [n for n in WRITES if vars(SqliteStore).get(n) is None]
    assert missing == []


def test_the_null_store_keeps_nothing_and_confirms_at_once() -> None:
    import asyncio

    async def run() -> bool:
        store = NullStore()
        store.start()
        store.put_vhost(VHostRecord("/"))
        fut = store.persist("/", [("q", 1)], b"\x00\x00", b"body", "", "q")
        done = fut.done()
        await store.close()
        return done and store.load().message_count == 0 and not store.load().vhosts

    assert asyncio.run(run())
