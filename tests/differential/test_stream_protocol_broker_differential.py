"""The stream protocol over the broker's stream queues against RabbitMQ 3.10.8's 5552: create-stream
argument handling (codes for equal, different and invalid arguments, another queue type), and a
record published over the stream protocol as AMQP 0-9-1 reads it (body, properties, headers,
offset), with the same rstream and pika programs on both."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pika
import pytest
from rstream import AMQPMessage, ConfirmationStatus, Producer
from rstream._pyamqp.message import Properties  # type: ignore[attr-defined]  # not re-exported

from tests.differential_support import RABBIT_STREAM, needs_rabbitmq_stream
from tests.integration.test_stream_protocol_amqp import _amqp_read, running

RABBIT_AMQP = 5672
USER = PASSWORD = "guest"


pytestmark = needs_rabbitmq_stream()


def _classic_queue(amqp_port: int, name: str, delete: bool = False) -> None:
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", amqp_port))
    try:
        ch = conn.channel()
        if delete:
            ch.queue_delete(name)
        else:
            ch.queue_declare(name)
    finally:
        conn.close()


async def _create(producer: Producer, stream: str, arguments: dict[str, Any]) -> str:
    try:
        await producer.create_stream(stream, arguments=arguments, exists_ok=False)
    except Exception as e:  # the exception class names the response code
        return type(e).__name__
    return "ok"


async def creation_program(stream_port: int, amqp_port: int, prefix: str) -> dict[str, str]:
    out: dict[str, str] = {}
    cases: list[tuple[str, str, dict[str, Any]]] = [
        ("new", "a", {"max-length-bytes": 1000, "max-age": "1h"}),
        ("same", "a", {"max-length-bytes": 1000, "max-age": "1h"}),
        ("different", "a", {"max-length-bytes": 2000}),
        ("unknown key ignored", "b", {"no-such-argument": "x"}),
        ("unknown key again", "b", {}),
        ("max-age not checked", "c", {"max-age": "1X"}),
        ("cluster size 0", "d", {"initial-cluster-size": 0}),
        ("bad locator", "e", {"queue-leader-locator": "nowhere"}),
        ("good locator", "f", {"queue-leader-locator": "balanced", "initial-cluster-size": 1}),
        ("segment size at the ceiling", "h", {"stream-max-segment-size-bytes": 3_000_000_000}),
        ("segment size above it", "i", {"stream-max-segment-size-bytes": 3_000_000_001}),
        ("classic queue", "g", {}),
    ]
    await asyncio.to_thread(_classic_queue, amqp_port, f"{prefix}-g")
    async with Producer("127.0.0.1", port=stream_port, username=USER, password=PASSWORD) as producer:
        try:
            for label, suffix, args in cases:
                out[label] = await _create(producer, f"{prefix}-{suffix}", args)
            try:
                await producer.delete_stream(f"{prefix}-g")
                out["delete classic"] = "ok"
            except Exception as e:
                out["delete classic"] = type(e).__name__
        finally:
            for suffix in "abcdefhi":
                await producer.delete_stream(f"{prefix}-{suffix}", missing_ok=True)
            await asyncio.to_thread(_classic_queue, amqp_port, f"{prefix}-g", True)
    return out


async def interop_program(stream_port: int, amqp_port: int, stream: str) -> list[dict[str, Any]]:
    confirmed: list[int] = []

    def on_confirm(status: ConfirmationStatus) -> None:
        if status.is_confirmed:
            confirmed.append(status.message_id)

    async with Producer("127.0.0.1", port=stream_port, username=USER, password=PASSWORD) as producer:
        await producer.create_stream(stream, exists_ok=False)
        try:
            messages = [
                AMQPMessage(body=b"plain"),
                AMQPMessage(
                    body=b"with properties",
                    properties=Properties(
                        message_id="mid",
                        content_type="text/plain",
                        content_encoding="gzip",
                        correlation_id="cid",
                        reply_to="rt",
                        creation_time=1_700_000_000_123,
                    ),
                    application_properties={"s": "text", "i": 7, "b": True},
                ),
            ]
            for m in messages:
                await producer.send(stream, m, on_publish_confirm=on_confirm)
            for _ in range(100):
                if len(confirmed) >= len(messages):
                    break
                await asyncio.sleep(0.05)
            got = await asyncio.to_thread(_amqp_read, amqp_port, stream, len(messages))
        finally:
            await producer.delete_stream(stream, missing_ok=True)
    out = []
    for body, p in got:
        props = {k: v for k, v in vars(p).items() if v is not None}
        out.append({"body": body, **props})
    return out


@pytest.mark.parametrize(
    ("program", "prefix"),
    [(creation_program, "hb-create"), (interop_program, "hb-interop")],
    ids=["create_stream_arguments", "stream_record_read_over_amqp"],
)
async def test_same_on_both(program: Any, prefix: str, tmp_path: Path) -> None:
    """The program's observations on RabbitMQ, then on hashbroker (streams named alike)."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    rabbit = await program(RABBIT_STREAM[1], RABBIT_AMQP, name)
    async with running(tmp_path) as (broker, port):
        ours = await program(port, broker.port, name)
    assert ours == rabbit
