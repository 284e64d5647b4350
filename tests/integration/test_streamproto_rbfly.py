"""rbfly (a second Python stream client, Cython-built) end to end against the stream listener;
`program` is also run against RabbitMQ 3.10.8 by the differential test."""

from __future__ import annotations

import asyncio
from typing import Any

import rbfly.streams as rbs

from broker.streamproto.memory import MemoryBroker
from broker.streamproto.server import StreamServer

N = 200


async def program(host: str, port: int, stream: str) -> dict[str, Any]:
    client = rbs.streams_client(f"rabbitmq-stream://guest:guest@{host}:{port}/")
    try:
        await client.create_stream(stream)
        async with client.publisher(stream) as publisher:
            for i in range(N):
                await publisher.send(f"r{i}".encode())
        got: list[tuple[int, bytes]] = []

        async def consume() -> None:
            async for msg in client.subscribe(stream, offset=rbs.Offset.FIRST):
                got.append((rbs.get_message_ctx().stream_offset, msg))
                if len(got) == N:
                    break

        await asyncio.wait_for(consume(), 10)
        await client.delete_stream(stream)
        return {"count": len(got), "in_order": got == [(i, f"r{i}".encode()) for i in range(N)]}
    finally:
        await client.disconnect()


async def run_against_listener(stream: str) -> dict[str, Any]:
    broker = MemoryBroker(host="127.0.0.1", port=0)
    server = StreamServer(broker, host="127.0.0.1", port=0)
    await server.start()
    broker.port = server.port
    try:
        return await asyncio.wait_for(program("127.0.0.1", server.port, stream), 60)
    finally:
        await server.stop()


async def test_rbfly_program_against_the_listener() -> None:
    assert await run_against_listener("rbfly-it") == {"count": N, "in_order": True}
