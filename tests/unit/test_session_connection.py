"""The connection adapter on an in-memory transport: identity and counters for the management API,
and the one way every unexpected failure ends (541 connection.close naming 0/0, one log line)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from pamqp import commands

from broker.protocol.commands import QueueDeclare
from broker.server import Broker
from broker.session import channel as channel_module
from broker.session.connection import Connection
from tests.sansio_support import FRAME_MAX, MemoryTransport, m, parse_frames, publish


def handshake(props: dict[str, Any] | None = None) -> bytes:
    out = b"AMQP\x00\x00\x09\x01"
    out += m(0, commands.Connection.StartOk(client_properties=props or {}, response="\0guest\0guest"))
    out += m(0, commands.Connection.TuneOk(channel_max=2047, frame_max=FRAME_MAX, heartbeat=0))
    out += m(0, commands.Connection.Open(virtual_host="/"))
    return out + m(1, commands.Channel.Open())


async def connected(props: dict[str, Any] | None = None) -> tuple[Broker, Connection, MemoryTransport]:
    broker = Broker(port=0, data_dir=":memory:", log_level="CRITICAL")
    await broker.start()
    transport = MemoryTransport()
    conn = Connection(broker, transport, asyncio.get_running_loop())
    broker.connection_made(conn)
    conn.data_received(handshake(props))
    conn.flush()
    return broker, conn, transport


async def test_identity_and_counters() -> None:
    broker, conn, transport = await connected({"connection_name": "orders-worker", "product": "tests"})
    try:
        assert conn.user_provided_name == "orders-worker"
        assert conn.client_properties["product"] == "tests"
        assert conn.state == "running" and conn.vhost_name == "/" and conn.user == "guest"
        assert conn.connected_at > 1_600_000_000_000
        sent_before, frames_before = conn.send_oct, conn.send_cnt
        assert sent_before == sum(map(len, transport.out))
        assert frames_before == 4  # start, tune, open-ok, channel.open-ok
        data = m(1, commands.Queue.Declare(queue="q.plain")) + publish(1, b"hello")
        received = conn.recv_oct
        received_frames = conn.recv_cnt
        conn.data_received(data)
        conn.flush()
        assert conn.recv_oct == received + len(data)
        assert conn.recv_cnt == received_frames + 4  # declare, publish method, header, body
        assert conn.send_cnt == frames_before + 1 and conn.send_oct > sent_before
    finally:
        await broker.stop()


async def test_no_connection_name_is_none() -> None:
    broker, conn, _transport = await connected()
    try:
        assert conn.user_provided_name is None
    finally:
        await broker.stop()


async def test_a_bug_in_a_handler_is_one_541_close_naming_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(channel: Any, command: Any) -> None:
        raise RuntimeError("boom")

    monkeypatch.setitem(channel_module.DISPATCH, QueueDeclare, broken)
    broker, conn, transport = await connected()
    try:
        transport.out.clear()
        caplog.set_level(logging.DEBUG, logger="hashbroker")
        caplog.clear()
        conn.data_received(m(1, commands.Queue.Declare(queue="q")) + m(1, commands.Queue.Declare(queue="r")))
        conn.flush()
        closes = [p for t, c, p in parse_frames(b"".join(transport.out)) if t == 1 and c == 0]
        assert closes == [b"\x00\x0a\x00\x32" + b"\x02\x1d" + b"\x0eINTERNAL_ERROR" + b"\x00\x00\x00\x00"]
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1 and "boom" in errors[0].getMessage()
        assert conn.state == "closing" and not transport.closed  # waits for close-ok
        conn.data_received(m(0, commands.Connection.CloseOk()))
        assert transport.closed
    finally:
        await broker.stop()


async def test_store_failure_of_a_commit_closes_the_channel_with_541_naming_nothing() -> None:
    from amqpwire.errors import AmqpError, ReplyCode

    broker, conn, transport = await connected()
    try:
        transport.out.clear()
        err = AmqpError(ReplyCode.INTERNAL_ERROR, "store write failed", hard=False, in_method=False)
        conn.close_channel(conn.channels[1], err, (90, 20))
        conn.flush()
        ((_t, channel, payload),) = list(parse_frames(b"".join(transport.out)))
        assert channel == 1 and payload.endswith(b"\x00\x00\x00\x00")
        assert b"INTERNAL_ERROR - store write failed" in payload
    finally:
        await broker.stop()


async def test_handshake_timeout_is_a_constructor_parameter() -> None:
    broker = Broker(port=0, data_dir=":memory:", log_level="CRITICAL")
    await broker.start()
    try:
        slow, done = MemoryTransport(), MemoryTransport()
        loop = asyncio.get_running_loop()
        lagging = Connection(broker, slow, loop, handshake_timeout=0.05)
        prompt = Connection(broker, done, loop, handshake_timeout=0.05)
        for conn in (lagging, prompt):
            broker.connection_made(conn)
        lagging.data_received(b"AMQP\x00\x00\x09\x01")
        prompt.data_received(handshake())
        await asyncio.sleep(0.2)
        assert slow.closed and lagging.state == "closed"
        assert len(list(parse_frames(b"".join(slow.out)))) == 1  # connection.start only
        assert not done.closed and prompt.state == "running"
    finally:
        await broker.stop()
