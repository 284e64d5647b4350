"""Bytes parameters bind as BLOBs through an adapter that hands them back unchanged (the store
module registers it so binding skips sqlite3's failing `__adapt__` lookup)."""

from __future__ import annotations

import contextlib
import sqlite3

import broker.store.sqlite.store  # noqa: F401  (registers the adapter)


def test_bytes_parameters_are_adapted_to_themselves() -> None:
    adapter = sqlite3.adapters[(bytes, sqlite3.PrepareProtocol)]
    body = b"\x00\xffbody"
    assert adapter(body) is body


def test_bytes_still_bind_as_blobs_and_round_trip() -> None:
    with contextlib.closing(sqlite3.connect(":memory:")) as c:
        c.execute("CREATE TABLE t (b BLOB)")
        c.executemany("INSERT INTO t VALUES (?)", [(b"",), (b"\x00\x01",), (bytes(range(256)),)])
        rows = c.execute("SELECT typeof(b), b FROM t").fetchall()
    assert rows == [("blob", b""), ("blob", b"\x00\x01"), ("blob", bytes(range(256)))]
