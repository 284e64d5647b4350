"""The stream protocol over the broker's own stream queues: rstream on the stream port and pika on
the AMQP port of one `Broker` (ephemeral ports, a data_dir store) see one log.

A message published over the stream protocol is read over AMQP 0-9-1 with x-stream-offset with
the same body, properties and offset, and the reverse; the rstream program the in-memory listener
runs gives the same observable results here.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pika
import pytest
from rstream import AMQPMessage, ConfirmationStatus, ConsumerOffsetSpecification, OffsetType, Producer
from rstream._pyamqp.message import Properties  # type: ignore[attr-defined]  # not re-exported

from broker.server import Broker
from tests.integration.test_streamproto_rstream import EXPECTED, program, read_stream

USER = PASSWORD = "guest"


@contextlib.asynccontextmanager
async def running(data_dir: Path) -> AsyncIterator[tuple[Broker, int]]:
    """A broker on `data_dir` with its stream listener on (`stream_port`): (broker, stream port)."""
    broker = Broker(host="127.0.0.1", port=0, data_dir=str(data_dir), stream_port=0)
    await broker.start()
    assert broker.stream_server is not None
    try:
        yield broker, broker.stream_server.port
    finally:
        await broker.stop()
    assert broker.stream_server is None


def _amqp_read(port: int, queue: str, n: int, declare: bool = False) -> list[tuple[bytes, Any]]:
    """n messages of stream `queue` from its first offset, over AMQP 0-9-1 (blocking: a thread)."""
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
    try:
        ch = conn.channel()
        if declare:
            ch.queue_declare(queue, durable=True, arguments={"x-queue-type": "stream"})
        ch.basic_qos(prefetch_count=100)
        got: list[tuple[bytes, Any]] = []
        for _method, props, body in ch.consume(
            queue, arguments={"x-stream-offset": "first"}, inactivity_timeout=5
        ):
            if body is None:
                break
            got.append((body, props))
            if len(got) >= n:
                break
        ch.cancel()
        return got
    finally:
        conn.close()


def _amqp_publish(port: int, queue: str, bodies: list[tuple[bytes, pika.BasicProperties]]) -> None:
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
    try:
        ch = conn.channel()
        ch.queue_declare(queue, durable=True, arguments={"x-queue-type": "stream"})
        ch.confirm_delivery()
        for body, props in bodies:
            ch.basic_publish("", queue, body, props)
    finally:
        conn.close()


async def _stream_read(port: int, stream: str, n: int) -> list[tuple[int, AMQPMessage]]:
    first = ConsumerOffsetSpecification(OffsetType.FIRST, None)
    return await read_stream("127.0.0.1", port, stream, first, n, wait=10)


@pytest.mark.slow
async def test_rstream_program_against_the_broker(tmp_path: Path) -> None:
    async with running(tmp_path) as (_broker, port):
        assert await asyncio.wait_for(program("127.0.0.1", port, "it-stream"), 60) == EXPECTED


async def test_stream_publish_read_over_amqp(tmp_path: Path) -> None:
    """rstream publishes (confirmed); pika reads the same bodies, properties and offsets."""
    async with running(tmp_path) as (broker, port):
        confirmed: list[int] = []

        def on_confirm(status: ConfirmationStatus) -> None:
            if status.is_confirmed:
                confirmed.append(status.message_id)

        async with Producer("127.0.0.1", port=port, username=USER, password=PASSWORD) as producer:
            await producer.create_stream("both", exists_ok=False)
            for i in range(3):
                msg = AMQPMessage(
                    body=f"body-{i}".encode(),
                    properties=Properties(
                        message_id=f"id-{i}", content_type="text/plain", correlation_id="corr"
                    ),
                    application_properties={"k": f"v{i}", "n": i},
                )
                await producer.send("both", msg, on_publish_confirm=on_confirm)
            for _ in range(100):
                if len(confirmed) >= 3:
                    break
                await asyncio.sleep(0.05)
        assert len(confirmed) == 3
        got = await asyncio.to_thread(_amqp_read, broker.port, "both", 3)
        assert [b for b, _ in got] == [b"body-0", b"body-1", b"body-2"]
        for i, (_body, props) in enumerate(got):
            assert props.message_id == f"id-{i}"
            assert props.content_type == "text/plain"
            assert props.correlation_id == "corr"
            assert props.headers == {"k": f"v{i}", "n": i, "x-stream-offset": i}


async def test_amqp_publish_read_over_stream(tmp_path: Path) -> None:
    """pika publishes to a stream it declares; rstream reads the same bodies, properties, offsets."""
    async with running(tmp_path) as (broker, port):
        stamp = datetime.datetime(2024, 1, 2, tzinfo=datetime.UTC)
        bodies = [
            (
                f"amqp-{i}".encode(),
                pika.BasicProperties(
                    message_id=f"m{i}",
                    content_type="application/json",
                    headers={"h": f"x{i}"},
                    timestamp=int(stamp.timestamp()),
                ),
            )
            for i in range(3)
        ]
        await asyncio.to_thread(_amqp_publish, broker.port, "from-amqp", bodies)
        got = await _stream_read(port, "from-amqp", 3)
        assert [o for o, _ in got] == [0, 1, 2]
        for i, (_offset, msg) in enumerate(got):
            body = msg.body if isinstance(msg.body, bytes) else b"".join(msg.body)
            assert body == f"amqp-{i}".encode()
            assert msg.properties is not None
            assert msg.properties.message_id in (f"m{i}", f"m{i}".encode())
            assert msg.properties.content_type in ("application/json", b"application/json")
            assert msg.properties.creation_time == int(stamp.timestamp()) * 1000
            app = {
                (k.decode() if isinstance(k, bytes) else k): v for k, v in msg.application_properties.items()
            }
            assert app["h"] in (f"x{i}", f"x{i}".encode())
        # and back over AMQP: the same stream, offsets as the stream client saw them
        again = await asyncio.to_thread(_amqp_read, broker.port, "from-amqp", 3)
        assert [p.headers["x-stream-offset"] for _, p in again] == [0, 1, 2]
        assert [p.message_id for _, p in again] == ["m0", "m1", "m2"]
