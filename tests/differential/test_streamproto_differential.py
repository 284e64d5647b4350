"""The same rstream program against RabbitMQ 3.10.8's stream port and against hashbroker's stream
listener: the observable results are equal (offsets, bodies, confirms, stored offsets, errors)."""

from __future__ import annotations

import socket
import uuid

import pytest

from tests.integration import test_streamproto_rbfly as rbfly_program
from tests.integration.test_streamproto_rstream import EXPECTED, program, run_against_listener

RABBIT_STREAM = ("127.0.0.1", 5552)


def _stream_port_answers() -> bool:
    try:
        with socket.create_connection(RABBIT_STREAM, timeout=1):
            return True
    except OSError:
        return False


async def test_rstream_program_same_on_both() -> None:
    if not _stream_port_answers():
        pytest.skip("RabbitMQ's stream port 5552 does not answer: rabbitmq-plugins enable rabbitmq_stream")
    name = f"hb-diff-{uuid.uuid4().hex[:8]}"
    rabbit = await program(*RABBIT_STREAM, name)
    ours = await run_against_listener(name)
    assert rabbit == EXPECTED
    assert ours == rabbit


async def test_rbfly_program_same_on_both() -> None:
    if not _stream_port_answers():
        pytest.skip("RabbitMQ's stream port 5552 does not answer: rabbitmq-plugins enable rabbitmq_stream")
    name = f"hb-diff-rbfly-{uuid.uuid4().hex[:8]}"
    rabbit = await rbfly_program.program(*RABBIT_STREAM, name)
    assert rabbit == {"count": rbfly_program.N, "in_order": True}
    assert await rbfly_program.run_against_listener(name) == rabbit
