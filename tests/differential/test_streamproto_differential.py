"""The same rstream program against RabbitMQ 3.10.8's stream port and against hashbroker's stream
listener: the observable results are equal (offsets, bodies, confirms, stored offsets, errors)."""

from __future__ import annotations

import uuid

import pytest

from tests.differential_support import RABBIT_STREAM, needs_rabbitmq_stream
from tests.integration import test_streamproto_rbfly as rbfly_program
from tests.integration.test_streamproto_rstream import EXPECTED, program, run_against_listener

pytestmark = needs_rabbitmq_stream()


@pytest.mark.slow
async def test_rstream_program_same_on_both() -> None:
    name = f"hb-diff-{uuid.uuid4().hex[:8]}"
    rabbit = await program(*RABBIT_STREAM, name)
    ours = await run_against_listener(name)
    assert rabbit == EXPECTED
    assert ours == rabbit


async def test_rbfly_program_same_on_both() -> None:
    name = f"hb-diff-rbfly-{uuid.uuid4().hex[:8]}"
    rabbit = await rbfly_program.program(*RABBIT_STREAM, name)
    assert rabbit == {"count": rbfly_program.N, "in_order": True}
    assert await rbfly_program.run_against_listener(name) == rabbit
