"""The store's table of the messages durable x-delayed-message exchanges hold: written, forgotten
when released, gone with their exchange or vhost, read back in key order; and a store made before
the table existed still opens (and gains it)."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from broker.store import DelayedRecord, ExchangeRecord, VHostRecord, open_store
from broker.store.sqlite.store import STORE_FILE


def record(vhost: str, key: int, exchange: str = "dx", due: int = 5_000) -> DelayedRecord:
    return DelayedRecord(vhost, key, exchange, due, "k", b"\x10\x00\x02", f"body {key}".encode())


async def test_held_messages_round_trip_and_leave_with_their_exchange_or_vhost(tmp_path: Path) -> None:
    data = tmp_path / "data"
    s = open_store(data)
    s.load()
    s.start()
    s.put_vhost(VHostRecord("/"))
    s.put_vhost(VHostRecord("other"))
    for vhost in ("/", "other"):
        s.put_exchange(ExchangeRecord(vhost, "dx", "x-delayed-message"))
        s.put_exchange(ExchangeRecord(vhost, "gone", "x-delayed-message"))
    for key in (3, 1, 2):
        s.put_delayed(record("/", key))
    s.put_delayed(record("/", 4, "gone"))
    s.put_delayed(record("other", 1))
    s.remove_delayed("/", [2, 99])  # an unknown key is ignored
    s.delete_exchange("/", "gone")
    await s.close()
    s = open_store(data)
    assert s.load().delayed == [record("/", 1), record("/", 3), record("other", 1)]
    s.start()
    s.delete_vhost("other")
    await s.close()
    s = open_store(data)
    assert s.load(messages=False).delayed == [record("/", 1), record("/", 3)]
    await s.close()


async def test_a_store_made_before_the_table_existed_opens_and_gains_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    s = open_store(data)
    s.load()
    await s.close()
    with contextlib.closing(sqlite3.connect(data / STORE_FILE)) as c:
        c.execute("DROP TABLE delayed_messages")
        c.commit()
    s = open_store(data)
    assert s.load().delayed == []
    s.start()
    s.put_delayed(record("/", 1))
    await s.close()
    s = open_store(data)
    assert s.load().delayed == [record("/", 1)]
    await s.close()
