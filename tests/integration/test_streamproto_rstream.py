"""rstream end to end against the stream listener (an in-memory stream broker behind it).

`program(host, port, stream)` is the one rstream program the differential test also runs against
RabbitMQ 3.10.8: it creates a stream, publishes 1,000 messages with confirms, consumes from
first, an offset, last and next, stores and queries a consumer offset, and deletes the stream; it
returns what a user of rstream observes (offsets, bodies, errors) as a JSON-able dict, so the two
brokers' results compare with ==.
"""

from __future__ import annotations

import asyncio
from typing import Any

from rstream import (
    AMQPMessage,
    ConfirmationStatus,
    Consumer,
    ConsumerOffsetSpecification,
    MessageContext,
    OffsetType,
    Producer,
    amqp_decoder,
)
from rstream.exceptions import OffsetNotFound, StreamDoesNotExist

from broker.streamproto.memory import MemoryBroker
from broker.streamproto.server import StreamServer

N = 1000
USER = PASSWORD = "guest"


async def read_stream(
    host: str, port: int, stream: str, spec: ConsumerOffsetSpecification, want: int, wait: float = 5.0
) -> list[tuple[int, AMQPMessage]]:
    """(offset, message) of what an rstream consumer from `spec` receives: `want` messages (fewer
    when `wait` seconds pass first), or whatever comes in 0.5 s when `want` is 0."""
    got: list[tuple[int, AMQPMessage]] = []
    done = asyncio.Event()

    async def on_message(msg: AMQPMessage, ctx: MessageContext) -> None:
        got.append((ctx.offset, msg))
        if len(got) >= want:
            done.set()

    consumer = Consumer(host, port=port, username=USER, password=PASSWORD)
    await consumer.start()
    try:
        await consumer.subscribe(stream, on_message, decoder=amqp_decoder, offset_specification=spec)
        if want:
            await asyncio.wait_for(done.wait(), wait)
        else:
            await asyncio.sleep(0.5)
    finally:
        await consumer.close()
    return got


async def _consume(
    host: str, port: int, stream: str, spec: ConsumerOffsetSpecification, want: int, wait: float = 5.0
) -> list[tuple[int, str]]:
    out = []
    for offset, msg in await read_stream(host, port, stream, spec, want, wait):
        body = msg.body if isinstance(msg.body, bytes) else b"".join(msg.body)
        out.append((offset, body.decode()))
    return out


async def program(host: str, port: int, stream: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    confirmed: list[int] = []

    def on_confirm(status: ConfirmationStatus) -> None:
        if status.is_confirmed:
            confirmed.append(status.message_id)

    async with Producer(host, port=port, username=USER, password=PASSWORD) as producer:
        await producer.create_stream(stream, arguments={"max-length-bytes": 100_000_000}, exists_ok=False)
        for i in range(N):
            await producer.send(stream, AMQPMessage(body=f"m{i}".encode()), on_publish_confirm=on_confirm)
        for _ in range(100):
            if len(confirmed) >= N:
                break
            await asyncio.sleep(0.05)
        out["confirmed"] = len(confirmed)
        out["stream_exists"] = await producer.stream_exists(stream)

    first = await _consume(host, port, stream, ConsumerOffsetSpecification(OffsetType.FIRST, None), N)
    out["first"] = {
        "count": len(first),
        "offsets": [o for o, _ in first[:3]],
        "bodies_in_order": first == [(i, f"m{i}") for i in range(N)],
    }
    from_offset = await _consume(host, port, stream, ConsumerOffsetSpecification(OffsetType.OFFSET, 990), 10)
    out["offset_990"] = [o for o, _ in from_offset if o >= 990][:10]
    last = await _consume(host, port, stream, ConsumerOffsetSpecification(OffsetType.LAST, None), 1)
    out["last_includes_999"] = any(o == N - 1 for o, _ in last)
    nxt = await _consume(host, port, stream, ConsumerOffsetSpecification(OffsetType.NEXT, None), 0)
    out["next"] = nxt

    consumer = Consumer(host, port=port, username=USER, password=PASSWORD)
    await consumer.start()
    try:
        try:
            await consumer.query_offset(stream, "never-stored")
            out["query_unknown"] = "found"
        except OffsetNotFound:
            out["query_unknown"] = "OffsetNotFound"
        await consumer.store_offset(stream, "tracker", 500)
        for _ in range(20):
            try:
                out["query_stored"] = await consumer.query_offset(stream, "tracker")
                break
            except OffsetNotFound:
                await asyncio.sleep(0.05)
    finally:
        await consumer.close()

    async with Producer(host, port=port, username=USER, password=PASSWORD) as producer:
        await producer.delete_stream(stream)
        out["exists_after_delete"] = await producer.stream_exists(stream)
        try:
            await producer.delete_stream(stream)
            out["delete_again"] = "ok"
        except StreamDoesNotExist:
            out["delete_again"] = "StreamDoesNotExist"
    return out


async def run_against_listener(stream: str) -> dict[str, Any]:
    """The program against a fresh listener on an ephemeral port."""
    broker = MemoryBroker(host="127.0.0.1", port=0)
    server = StreamServer(broker, host="127.0.0.1", port=0)
    await server.start()
    broker.port = server.port  # metadata and open advertise where clients reconnect
    try:
        return await asyncio.wait_for(program("127.0.0.1", server.port, stream), 60)
    finally:
        await server.stop()


EXPECTED = {
    "confirmed": N,
    "stream_exists": True,
    "first": {"count": N, "offsets": [0, 1, 2], "bodies_in_order": True},
    "offset_990": list(range(990, 1000)),
    "last_includes_999": True,
    "next": [],
    "query_unknown": "OffsetNotFound",
    "query_stored": 500,
    "exists_after_delete": False,
    "delete_again": "StreamDoesNotExist",
}


async def test_rstream_program_against_the_listener() -> None:
    assert await run_against_listener("it-stream") == EXPECTED


async def test_listener_survives_a_client_sending_garbage() -> None:
    """A malformed frame closes that connection only; a neighbour's session goes on."""
    broker = MemoryBroker(host="127.0.0.1", port=0)
    server = StreamServer(broker, host="127.0.0.1", port=0)
    await server.start()
    broker.port = server.port
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"\x00\x00\x00\x05\x00\x11\x00\x01\xff")  # a truncated peer-properties
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed without a frame
        writer.close()
        result = await asyncio.wait_for(program("127.0.0.1", server.port, "neighbour"), 60)
        assert result == EXPECTED
    finally:
        await server.stop()
