"""Sans-I/O helpers: drive a broker Connection with raw AMQP bytes on an in-memory transport."""

from __future__ import annotations

import asyncio
import random
import struct
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pamqp import commands, frame, header
from pamqp.body import ContentBody

from broker.server import Broker
from broker.session.connection import Connection

T = TypeVar("T")

FRAME_MAX = 4096
_HDR = struct.Struct(">BHI")


def random_pieces(data: bytes, seed: int, sizes: Sequence[int]) -> list[bytes]:
    """`data` cut into consecutive pieces of sizes drawn from `sizes`, as reads may deliver it."""
    rng = random.Random(seed)
    pieces, pos = [], 0
    while pos < len(data):
        n = rng.choice(sizes)
        pieces.append(data[pos : pos + n])
        pos += n
    return pieces


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


def open_stream(channels: int) -> bytes:
    """The client's side of a handshake as guest on vhost "/", then channels 1..`channels` opened."""
    out = b"AMQP\x00\x00\x09\x01"
    out += m(0, commands.Connection.StartOk(response="\0guest\0guest"))
    out += m(0, commands.Connection.TuneOk(channel_max=2047, frame_max=FRAME_MAX, heartbeat=0))
    out += m(0, commands.Connection.Open(virtual_host="/"))
    for ch in range(1, channels + 1):
        out += m(ch, commands.Channel.Open())
    return out


async def run_pieces(
    pieces: list[bytes], fast: bool, data_dir: Path, inspect: Callable[[Broker], T]
) -> tuple[bytes, T]:
    """Feed `pieces` as successive reads to one connection of a new broker keeping its state in
    `data_dir` (`fast`: the single-read publish shortcut on), give the store time to commit, and
    return what the broker wrote and what `inspect` reads of it before it stops."""
    broker = Broker(port=0, data_dir=str(data_dir), log_level="CRITICAL")
    await broker.start()
    try:
        transport = MemoryTransport()
        conn = Connection(broker, transport, asyncio.get_running_loop())
        broker.connection_made(conn)
        conn.core.fast = fast
        for piece in pieces:
            conn.data_received(piece)
            await asyncio.sleep(0)
        for _ in range(50):  # store commits (persistent messages on durable queues)
            await asyncio.sleep(0.01)
        conn.flush()
        return b"".join(transport.out), inspect(broker)
    finally:
        await broker.stop()
