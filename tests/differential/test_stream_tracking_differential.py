"""Offset tracking and publisher deduplication: the rstream program of
tests/integration/test_stream_tracking_restart.py on RabbitMQ 3.10.8's 5552 (both halves, no
restart: RabbitMQ keeps tracking in the stream's log) gives the recorded answers, and hashbroker
gives the same without and with a restart between the halves.

Run with HB_RECORD=1 to write RabbitMQ's answers to the recording."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.differential.test_stream_protocol_broker_differential import RABBIT_STREAM, pytestmark
from tests.integration.test_stream_tracking_restart import RECORDED, after, before, delete, run_hashbroker
from tests.stream_recording import check_live

__all__ = ["pytestmark"]


@pytest.mark.slow  # the live check of the recording; hashbroker meets it every day (tests/integration)
async def test_tracking_same_on_rabbitmq_and_hashbroker(tmp_path: Path) -> None:
    stream = f"hb-stream1-track-{uuid.uuid4().hex[:6]}"
    port = RABBIT_STREAM[1]
    try:
        answers = {"before": await before(port, stream), "after": await after(port, stream)}
    finally:
        await delete(port, stream)
    rabbit = check_live(RECORDED, answers)
    assert await run_hashbroker(tmp_path / "live", stream, restart=False) == rabbit
    assert await run_hashbroker(tmp_path / "restart", stream, restart=True) == rabbit
