"""Flow: a store that commits slower than publishers publish stops reading their sockets.

Sans-I/O over a real broker and a real store on disk: the store's writer is held before its
COMMIT, so persistent publishes pile up in its backlog; past the high mark the publishing
connection is in "flow" (its socket is not read, no connection.blocked is sent, as RabbitMQ's credit
flow does), a connection that only consumes is not, and once the writer has committed the backlog
the publisher is read again with every message queued.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from pamqp import commands

from broker.server import Broker
from broker.session.connection import Connection
from broker.store.sqlite import writer as sqlite_writer
from tests.sansio_support import FRAME_MAX, MemoryTransport, m, parse_frames, publish

BODY = b"x" * 10_000


class ReadingTransport(MemoryTransport):
    """A memory transport that remembers whether the broker wants to read it."""

    def __init__(self) -> None:
        super().__init__()
        self.reading = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


def handshake() -> bytes:
    out = b"AMQP\x00\x00\x09\x01"
    out += m(0, commands.Connection.StartOk(response="\0guest\0guest"))
    out += m(0, commands.Connection.TuneOk(channel_max=2047, frame_max=FRAME_MAX, heartbeat=0))
    out += m(0, commands.Connection.Open(virtual_host="/"))
    return out + m(1, commands.Channel.Open())


def connect(broker: Broker) -> tuple[Connection, ReadingTransport]:
    transport = ReadingTransport()
    conn = Connection(broker, transport, asyncio.get_running_loop())
    broker.connection_made(conn)
    conn.data_received(handshake())
    return conn, transport


async def test_a_slow_store_puts_publishers_in_flow_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writer, "FLOW_HIGH", 64_000)
    monkeypatch.setattr(sqlite_writer, "FLOW_LOW", 16_000)
    broker = Broker(port=0, data_dir=str(tmp_path / "data"), log_level="CRITICAL", disk_free_limit=0)
    await broker.start()
    try:
        assert broker.store is not None
        writer: Any = broker.store.writer  # type: ignore[attr-defined]
        entered, release = threading.Event(), threading.Event()

        def hold() -> None:
            entered.set()
            assert release.wait(30)

        consumer, consumer_transport = connect(broker)
        consumer.data_received(m(1, commands.Queue.Declare(queue="q.plain", durable=True)))
        await asyncio.wait_for(broker.store.sync(), 10)  # type: ignore[attr-defined]
        writer.commit_hook = hold
        publisher, transport = connect(broker)
        persistent = commands.Basic.Properties(delivery_mode=2)
        publisher.data_received(b"".join(publish(1, BODY, props=persistent) for _ in range(4)))
        assert await asyncio.to_thread(entered.wait, 10)  # the first batch is held before COMMIT
        assert transport.reading and publisher.state == "running"  # 40 KB: under the high mark
        publisher.data_received(b"".join(publish(1, BODY, props=persistent) for _ in range(16)))
        assert not transport.reading and publisher.state == "flow"
        assert broker.alarms.flow and writer.backlog > 64_000
        assert consumer_transport.reading and consumer.state == "running"  # it publishes nothing
        frames = parse_frames(b"".join(transport.out))
        blocked = [p for t, _c, p in frames if t == 1 and p[:4] == b"\x00\x0a\x00\x3c"]
        assert blocked == []  # flow is silent: no connection.blocked
        release.set()
        for _ in range(500):
            if transport.reading:
                break
            await asyncio.sleep(0.01)
        assert transport.reading and publisher.state == "running" and not broker.alarms.flow
        assert writer.backlog == 0
        assert broker.vhosts["/"].queues["q.plain"].message_count == 20
    finally:
        release.set()
        await broker.stop()
