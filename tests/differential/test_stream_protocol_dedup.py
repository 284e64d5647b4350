"""Publisher deduplication across a producer restart (publishing ids per publisher reference, the
sequence query): the same rstream program on RabbitMQ's 5552 and on a Broker with the stream
adapter. (rstream 1.1.1 cannot decode 3.10.8's route and partitions responses, so super streams
are checked against the adapter in tests/integration/test_stream_protocol_superstream.py.)"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from rstream import AMQPMessage, Producer

from tests.differential.test_stream_protocol_broker_differential import RABBIT_AMQP, RABBIT_STREAM, pytestmark
from tests.integration.test_stream_protocol_amqp import _stream_read, running

__all__ = ["pytestmark"]
USER = PASSWORD = "guest"


def _message(body: str, publishing_id: int) -> AMQPMessage:
    m = AMQPMessage(body=body.encode())
    m.publishing_id = publishing_id  # (the constructor does not take it)
    return m


async def program(stream_port: int, amqp_port: int, prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    stream = f"{prefix}-dedup"
    async with Producer("127.0.0.1", port=stream_port, username=USER, password=PASSWORD) as producer:
        await producer.create_stream(stream)
        for i in (1, 2, 3):
            await producer.send_wait(stream, _message(f"m{i}", i), publisher_name="ref")
    try:
        async with Producer("127.0.0.1", port=stream_port, username=USER, password=PASSWORD) as producer:
            out["sequence after restart"] = await (await producer.default_client).query_publisher_sequence(
                stream, "ref"
            )
            for i in (2, 3, 4):
                await producer.send_wait(stream, _message(f"again{i}", i), publisher_name="ref")
            out["sequence"] = await (await producer.default_client).query_publisher_sequence(stream, "ref")
            out["unknown reference"] = await (await producer.default_client).query_publisher_sequence(
                stream, "nobody"
            )
        got = await _stream_read(stream_port, stream, 4)
        out["records"] = [
            (o, bytes(m.body if isinstance(m.body, bytes) else b"".join(m.body))) for o, m in got
        ]
    finally:
        async with Producer("127.0.0.1", port=stream_port, username=USER, password=PASSWORD) as producer:
            await producer.delete_stream(stream, missing_ok=True)
    return out


async def test_dedup_same_on_both(tmp_path: Path) -> None:
    prefix = f"hb-dedup-{uuid.uuid4().hex[:6]}"
    rabbit = await program(RABBIT_STREAM[1], RABBIT_AMQP, prefix)
    assert rabbit["sequence"] == 4
    async with running(tmp_path) as (broker, port):
        ours = await program(port, broker.port, prefix)
    assert ours == rabbit
