"""A channel's cached write permission (per exchange name) follows permission changes at once.

Sans-I/O: a Connection on an in-memory transport; the registry's version counter invalidates what a
channel remembers, so a revoked permission refuses the very next publish with RabbitMQ's 403 text.
"""

from __future__ import annotations

import asyncio

from pamqp import commands

from broker.server import Broker
from broker.session.connection import Connection
from tests.sansio_support import FRAME_MAX, MemoryTransport, m, parse_frames, publish, queue_contents


def setup_stream() -> bytes:
    """Handshake, channels 1 and 2, a queue bound to direct exchange `ex`."""
    out = b"AMQP\x00\x00\x09\x01"
    out += m(0, commands.Connection.StartOk(response="\0guest\0guest"))
    out += m(0, commands.Connection.TuneOk(channel_max=2047, frame_max=FRAME_MAX, heartbeat=0))
    out += m(0, commands.Connection.Open(virtual_host="/"))
    for ch in (1, 2):
        out += m(ch, commands.Channel.Open())
    out += m(1, commands.Queue.Declare(queue="q.plain"))
    out += m(1, commands.Exchange.Declare(exchange="ex", exchange_type="direct"))
    out += m(1, commands.Queue.Bind(queue="q.plain", exchange="ex", routing_key="k"))
    return out


async def test_cached_write_permission_follows_changes() -> None:
    """A channel remembers granted write access per exchange; a permission change applies at once."""
    broker = Broker(port=0, data_dir=":memory:", log_level="CRITICAL")
    await broker.start()
    try:
        transport = MemoryTransport()
        conn = Connection(broker, transport, asyncio.get_running_loop())
        broker.connection_made(conn)
        conn.data_received(setup_stream())
        conn.data_received(publish(1, b"allowed"))
        broker.auth.set_permissions("/", "guest", ".*", "^ex$", ".*")
        transport.out.clear()
        conn.data_received(publish(1, b"refused"))
        conn.flush()
        closes = [p for t, c, p in parse_frames(b"".join(transport.out)) if t == 1 and c == 1]
        assert closes and closes[0][:4] == b"\x00\x14\x00\x28"
        assert b"access to exchange 'amq.default' in vhost '/' refused for user 'guest'" in closes[0]
        conn.data_received(m(1, commands.Channel.CloseOk()))
        conn.data_received(publish(2, b"to ex is still allowed", exchange="ex", routing_key="k"))
        broker.auth.set_permissions("/", "guest", ".*", ".*", ".*")
        conn.data_received(publish(2, b"allowed again"))
        conn.flush()
        bodies = [b for _p, b, _x, _k in queue_contents(broker)["q.plain"]]
        assert bodies == [b"allowed", b"to ex is still allowed", b"allowed again"]
        broker.auth.clear_permissions("/", "guest")  # no permissions at all: refused as well
        transport.out.clear()
        conn.data_received(publish(2, b"refused again", exchange="ex", routing_key="k"))
        conn.flush()
        closes = [p for t, c, p in parse_frames(b"".join(transport.out)) if t == 1 and c == 2]
        assert closes and b"access to exchange 'ex' in vhost '/' refused for user 'guest'" in closes[0]
        assert len(queue_contents(broker)["q.plain"]) == 3
        assert not transport.closed
    finally:
        await broker.stop()
