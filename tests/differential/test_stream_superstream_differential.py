"""Super-stream routing on RabbitMQ 3.10.8's 5552 and on hashbroker: the program of
tests/integration/test_stream_superstream_routing.py (route and partitions answers over a raw
socket, a murmur3-hashing and a key-routing super-stream producer, each partition read back) gives
the recorded answers on the live broker and the same on hashbroker.

Run with HB_RECORD=1 to write RabbitMQ's answers to the recording."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from tests.differential.test_stream_protocol_broker_differential import RABBIT_AMQP, RABBIT_STREAM, pytestmark
from tests.integration.test_stream_superstream_routing import (
    RECORDED,
    declare,
    delete,
    program,
    run_hashbroker,
)
from tests.stream_recording import check_live

__all__ = ["pytestmark"]


@pytest.mark.slow  # the live check of the recording; hashbroker meets it every day (tests/integration)
async def test_super_stream_routing_same_on_rabbitmq_and_hashbroker(tmp_path: Path) -> None:
    name = f"hb-stream1-ss-{uuid.uuid4().hex[:6]}"
    await asyncio.to_thread(declare, RABBIT_AMQP, name)
    try:
        answers = await program(RABBIT_STREAM[1], name)
    finally:
        await asyncio.to_thread(delete, RABBIT_AMQP, name)
    rabbit = check_live(RECORDED, answers)
    assert await run_hashbroker(tmp_path, name) == rabbit
