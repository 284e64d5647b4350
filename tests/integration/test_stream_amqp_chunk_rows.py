"""AMQP publishes into a durable stream are stored as chunk rows, as osiris writes a chunk of what
its writer's mailbox held: the records one stream takes in one loop turn after the first (which
its log makes a chunk alone, written at once as a row of its own) make one row, cut where the
stream's log starts a chunk. So the store holds the log's own chunks, a restart rebuilds
the same chunks (their first offsets and times) from the rows' sizes, and retention, which drops
whole chunks, drops whole rows."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path

import pika

from amqpwire.fields import Field, FieldTable
from broker.embedded import BrokerThread
from broker.entities.message import StoredMessage
from broker.entities.queues.base import Queue
from broker.entities.queues.stream.queue import StreamQueue
from broker.server import Broker
from broker.store.sqlite.schema import CHUNK_FILE, STORE_FILE
from tests.qs_scenarios import read_stream

PERSISTENT = bytes.fromhex("1000") + bytes([2])  # delivery_mode 2


def _stream_args(**more: int) -> FieldTable:
    args = [("x-queue-type", Field("longstr", b"stream"))]
    args += [(k, Field("long", v)) for k, v in more.items()]
    return FieldTable(args)


def _rows(data: Path, sql: str) -> list[tuple[int, ...]]:
    with contextlib.closing(sqlite3.connect(data / sql.split(":", 1)[0])) as c:
        return [tuple(r) for r in c.execute(sql.split(":", 1)[1])]


def _chunks(q: StreamQueue) -> list[tuple[int, int]]:
    """The log's chunks: (first offset, time ms)."""
    index = q.log.index
    return list(zip(index.firsts, index.times, strict=True))


async def _publish_in_turns(b: Broker, name: str, turns: int, per_turn: int, size: int = 40) -> None:
    vh = b.vhosts["/"]
    x = vh.exchanges[""]
    n = 0
    for _ in range(turns):
        for _ in range(per_turn):
            vh.publish(x, StoredMessage("", name, PERSISTENT, n.to_bytes(4, "big") + bytes(size - 4)))
            n += 1
        await asyncio.sleep(0.003)  # the loop turns (and the chunk times differ)


async def _declared(b: Broker, name: str, args: FieldTable) -> StreamQueue:
    vh = b.vhosts["/"]
    q = Queue(vh, name, durable=True, exclusive_owner=None, auto_delete=False, arguments=args)
    vh.add_queue(q)
    q = vh.queues[name]
    assert isinstance(q, StreamQueue)
    return q


async def test_one_turns_publishes_are_chunk_rows_and_a_restart_has_the_same_chunks(tmp_path: Path) -> None:
    b = Broker(host="127.0.0.1", port=0, data_dir=str(tmp_path))
    await b.start()
    q = await _declared(b, "s", _stream_args())
    await _publish_in_turns(b, "s", turns=6, per_turn=9)
    before, offsets = _chunks(q), list(q.log.offsets)
    await b.stop()

    # each chunk of the log is one row with the chunk's time: a turn's first record (a chunk
    # alone) a row of its own, the rest of the turn a chunk row
    chunk_rows = _rows(tmp_path, f"{CHUNK_FILE}:SELECT first, last, timestamp FROM stream_chunks")
    own_rows = _rows(tmp_path, f"{STORE_FILE}:SELECT seq, seq, timestamp FROM queue_messages")
    starts = [first for first, _ in before]
    ends = [*(s - 1 for s in starts[1:]), offsets[-1]]
    assert sorted((f - 1, last - 1, ts) for f, last, ts in chunk_rows + own_rows) == [
        (s, e, t) for (s, t), e in zip(before, ends, strict=True)
    ]
    assert len(own_rows) == 6 and len(chunk_rows) == 6
    assert all(last - first == 7 for first, last, _ in chunk_rows)

    again = Broker(host="127.0.0.1", port=0, data_dir=str(tmp_path))
    await again.start()
    try:
        q2 = again.vhosts["/"].queues["s"]
        assert isinstance(q2, StreamQueue)
        assert _chunks(q2) == before
        assert list(q2.log.offsets) == offsets
        page = again.store.read_stream_page("/", "s", 1, 100)  # type: ignore[union-attr]
        assert [(seq - 1, int.from_bytes(body[:4], "big")) for seq, _p, body, _x, _k in page] == list(
            zip(offsets, range(54), strict=True)
        )
    finally:
        await again.stop()


async def test_retention_drops_whole_rows_and_a_restart_keeps_what_it_kept(tmp_path: Path) -> None:
    """Small segments and a byte limit: retention drops the oldest segments while turns are
    being written; the restart finds exactly the records the stream kept."""
    args = _stream_args(**{"x-max-length-bytes": 3000, "x-stream-max-segment-size-bytes": 700})
    b = Broker(host="127.0.0.1", port=0, data_dir=str(tmp_path))
    await b.start()
    q = await _declared(b, "r", args)
    await _publish_in_turns(b, "r", turns=20, per_turn=7, size=100)
    kept = [(o, q.log.message(i).body) for i, o in enumerate(q.log.offsets) if i >= q.log.head]
    assert kept and kept[0][0] > 0  # retention dropped something
    await b.stop()

    again = Broker(host="127.0.0.1", port=0, data_dir=str(tmp_path))
    await again.start()
    try:
        q2 = again.vhosts["/"].queues["r"]
        assert isinstance(q2, StreamQueue)
        log = q2.log
        assert [o for i, o in enumerate(log.offsets) if i >= log.head] == [o for o, _ in kept]
        page = again.store.read_stream_page("/", "r", 1, 1000)  # type: ignore[union-attr]
        assert [(seq - 1, body) for seq, _p, body, _x, _k in page] == kept
    finally:
        await again.stop()


def test_a_message_routed_to_a_stream_and_a_classic_queue_is_kept_in_both(tmp_path: Path) -> None:
    """One publish, two writes (the stream's chunk row, the classic queue's message row): the
    confirm waits for both, and a restart finds it in both queues."""
    with BrokerThread(host="127.0.0.1", port=0, data_dir=str(tmp_path)) as b:
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        ch = conn.channel()
        ch.confirm_delivery()
        ch.exchange_declare("both", "fanout", durable=True)
        ch.queue_declare("s", durable=True, arguments={"x-queue-type": "stream"})
        ch.queue_declare("c", durable=True)
        ch.queue_bind("s", "both")
        ch.queue_bind("c", "both")
        for i in range(30):
            ch.basic_publish("both", "", f"m{i}".encode(), pika.BasicProperties(delivery_mode=2))
        conn.close()
    with BrokerThread(host="127.0.0.1", port=0, data_dir=str(tmp_path)) as b:
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        try:
            assert read_stream(conn, "s", "first") == [(i, f"m{i}") for i in range(30)]
            ch = conn.channel()
            got = []
            while (m := ch.basic_get("c", auto_ack=True))[0] is not None:
                got.append(m[2].decode())
            assert got == [f"m{i}" for i in range(30)]
        finally:
            conn.close()
