"""A channel's cached write permission (per exchange name) follows permission changes at once.

Sans-I/O: a Connection on an in-memory transport; the registry's version counter invalidates what a
channel remembers, so a revoked permission refuses the very next publish with RabbitMQ's 403 text.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator
from typing import Any

from pamqp import commands, frame, header
from pamqp.body import ContentBody

from broker.connection import Connection
from broker.server import Broker

FRAME_MAX = 4096
_HDR = struct.Struct(">BHI")


class MemoryTransport:
    def __init__(self) -> None:
        self.out: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.out.append(data)

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default


def m(channel: int, method: Any) -> bytes:
    return frame.marshal(method, channel)


def publish(
    channel: int,
    body: bytes,
    exchange: str = "",
    routing_key: str = "q.plain",
    props: commands.Basic.Properties | None = None,
    mandatory: bool = False,
    immediate: bool = False,
    heartbeat_inside: bool = False,
) -> bytes:
    """basic.publish + content header + body frames (split at FRAME_MAX - 8)."""
    out = m(channel, commands.Basic.Publish(exchange=exchange, routing_key=routing_key, mandatory=mandatory))
    if immediate:  # pamqp refuses immediate=True; set the bit by hand (mandatory bit 0, immediate bit 1)
        out = out[:-2] + bytes((out[-2] | 2,)) + out[-1:]
    out += frame.marshal(header.ContentHeader(0, len(body), props or commands.Basic.Properties()), channel)
    if heartbeat_inside:
        out += b"\x08\x00\x00\x00\x00\x00\x00\xce"
    step = FRAME_MAX - 8
    for i in range(0, len(body), step):
        out += frame.marshal(ContentBody(body[i : i + step]), channel)
    return out


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


def parse_frames(data: bytes) -> Iterator[tuple[int, int, bytes]]:
    pos = 0
    if data.startswith(b"AMQP"):
        pos = 8
    while pos < len(data):
        ftype, channel, size = _HDR.unpack_from(data, pos)
        yield ftype, channel, data[pos + 7 : pos + 7 + size]
        pos += 8 + size


def queue_contents(broker: Broker) -> dict[str, list[tuple[bytes, bytes, str, tuple[str, ...]]]]:
    vhost = broker.vhosts["/"]
    return {
        name: [
            (e.msg.props, e.msg.body, e.msg.exchange, tuple(e.msg.routing_keys))
            for level in q.levels
            for e in level
        ]
        for name, q in sorted(vhost.queues.items())
    }


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
        assert not transport.closed
    finally:
        await broker.stop()
