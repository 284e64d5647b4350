"""A minimal asyncio AMQP 0-9-1 client for the limits bench: handshakes, declares, pipelined
publishes with confirms, and floods, written with pamqp so that thousands of connections and
millions of publishes cost the bench little next to the broker it measures.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pamqp import commands, exceptions, frame, header
from pamqp.body import ContentBody


def handshake_bytes() -> bytes:
    """Protocol header, start-ok, tune-ok (no heartbeats: idle connections need no servicing), open."""
    out = frame.marshal(header.ProtocolHeader(), 0)
    props: dict[str, Any] = {
        "product": "limits-bench",
        "capabilities": {"publisher_confirms": True, "connection.blocked": True},
    }
    out += frame.marshal(commands.Connection.StartOk(client_properties=props, response="\0guest\0guest"), 0)
    out += frame.marshal(commands.Connection.TuneOk(channel_max=2047, frame_max=131072, heartbeat=0), 0)
    out += frame.marshal(commands.Connection.Open(virtual_host="/"), 0)
    return out


def publish_bytes(queue: str, body: bytes, persistent: bool, channel: int = 1) -> bytes:
    props = commands.Basic.Properties(delivery_mode=2 if persistent else 1)
    out = frame.marshal(commands.Basic.Publish(exchange="", routing_key=queue), channel)
    out += frame.marshal(header.ContentHeader(0, len(body), props), channel)
    return out + frame.marshal(ContentBody(body), channel)


class RawConnection:
    """One connection, one channel (1); frames are read on demand by `expect`."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.buffer = b""
        self.blocked = False

    @classmethod
    async def open(cls, host: str, port: int, channel: bool = True) -> RawConnection:
        reader, writer = await asyncio.open_connection(host, port)
        conn = cls(reader, writer)
        writer.write(handshake_bytes())
        await conn.expect(commands.Connection.OpenOk)
        if channel:
            writer.write(frame.marshal(commands.Channel.Open(), 1))
            await conn.expect(commands.Channel.OpenOk)
        return conn

    async def next_frame(self) -> Any:
        while True:
            try:
                used, _channel, value = frame.unmarshal(self.buffer)
            except exceptions.UnmarshalingException:
                data = await self.reader.read(65536)
                if not data:
                    raise ConnectionError("the broker closed the connection") from None
                self.buffer += data
                continue
            self.buffer = self.buffer[used:]
            if isinstance(value, commands.Connection.Blocked):
                self.blocked = True
            elif isinstance(value, commands.Connection.Unblocked):
                self.blocked = False
            return value

    async def expect(self, kind: type) -> Any:
        while True:
            value = await self.next_frame()
            if isinstance(value, kind):
                return value
            if isinstance(value, commands.Connection.Close | commands.Channel.Close):
                raise ConnectionError(f"{value.reply_code} {value.reply_text}")

    async def rpc(self, method: Any, reply: type) -> Any:
        self.writer.write(frame.marshal(method, 1))
        return await self.expect(reply)

    async def message_count(self, queue: str) -> int:
        ok = await self.rpc(commands.Queue.Declare(queue=queue, passive=True), commands.Queue.DeclareOk)
        return int(ok.message_count)

    async def publish_confirmed(
        self, queue: str, count: int, body: bytes, persistent: bool, window: int = 5000
    ) -> None:
        """`count` publishes to `queue`, at most `window` unconfirmed; returns once all are confirmed."""
        await self.rpc(commands.Confirm.Select(), commands.Confirm.SelectOk)
        one = publish_bytes(queue, body, persistent)
        sent = confirmed = 0
        while confirmed < count:
            if sent < count and sent - confirmed < window:
                n = min(window - (sent - confirmed), count - sent, 500)
                self.writer.write(one * n)
                sent += n
                await self.writer.drain()
                continue
            value = await self.next_frame()
            if isinstance(value, commands.Basic.Nack):
                raise RuntimeError(f"publish {value.delivery_tag} was nacked")
            if isinstance(value, commands.Basic.Ack):
                confirmed = max(confirmed, value.delivery_tag)
            elif isinstance(value, commands.Connection.Close | commands.Channel.Close):
                raise ConnectionError(f"{value.reply_code} {value.reply_text}")

    async def close(self) -> None:
        try:
            self.writer.write(
                frame.marshal(
                    commands.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0), 0
                )
            )
            await asyncio.wait_for(self.expect(commands.Connection.CloseOk), 5)
        except (OSError, ConnectionError, TimeoutError):
            pass
        self.writer.close()


async def declare(host: str, port: int, queue: str, durable: bool = False) -> None:
    conn = await RawConnection.open(host, port)
    await conn.rpc(commands.Queue.Declare(queue=queue, durable=durable), commands.Queue.DeclareOk)
    await conn.close()


async def delete(host: str, port: int, queue: str) -> None:
    conn = await RawConnection.open(host, port)
    await conn.rpc(commands.Queue.Delete(queue=queue), commands.Queue.DeleteOk)
    await conn.close()


async def count(host: str, port: int, queue: str) -> int:
    conn = await RawConnection.open(host, port)
    try:
        return await conn.message_count(queue)
    finally:
        await conn.close()


async def fill(
    host: str, port: int, queue: str, messages: int, body: bytes, persistent: bool, publishers: int = 2
) -> None:
    """Put `messages` into `queue` over `publishers` connections, confirms on."""

    async def one(n: int) -> None:
        conn = await RawConnection.open(host, port)
        await conn.publish_confirmed(queue, n, body, persistent)
        await conn.close()

    share = [messages // publishers + (1 if i < messages % publishers else 0) for i in range(publishers)]
    await asyncio.gather(*(one(n) for n in share if n))
