"""basic.recover on a channel holding an unacked stream delivery: RabbitMQ 3.10.8's channel crashes
(connection.close 541 INTERNAL_ERROR naming no method); without one it answers recover-ok."""

from __future__ import annotations

from typing import Any

import pytest
from pamqp import commands

from tests.differential.test_differential_cancel_order import _channel_with_queue, _frames
from tests.differential_support import Ctx, Registry, run_differential

registry = Registry()
scenario = registry.scenario

STREAM = {"durable": True, "arguments": {"x-queue-type": "stream"}}


def _stream_with_one_delivery(ctx: Ctx) -> Any:
    raw, q = _channel_with_queue(ctx, **STREAM)
    raw.call(1, commands.Confirm.Select(), commands.Confirm.SelectOk)
    raw.publish(1, "", q, b"m")
    raw.expect(commands.Basic.Ack)
    raw.call(1, commands.Basic.Qos(prefetch_count=10), commands.Basic.QosOk)
    consume = commands.Basic.Consume(queue=q, consumer_tag="c", arguments={"x-stream-offset": "first"})
    raw.call(1, consume, commands.Basic.ConsumeOk)
    raw.expect(commands.Basic.Deliver)
    return raw


@scenario
def scenario_recover_with_an_unacked_stream_delivery(ctx: Ctx) -> Any:
    raw = _stream_with_one_delivery(ctx)
    raw.send(1, commands.Basic.Recover(requeue=True))
    return _frames(raw)


@scenario
def scenario_recover_on_a_stream_channel_with_nothing_unacked(ctx: Ctx) -> Any:
    raw, q = _channel_with_queue(ctx, **STREAM)
    raw.call(1, commands.Basic.Qos(prefetch_count=10), commands.Basic.QosOk)
    raw.call(1, commands.Basic.Consume(queue=q, consumer_tag="c"), commands.Basic.ConsumeOk)
    raw.send(1, commands.Basic.Recover(requeue=True))
    return _frames(raw)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("name", "target"), registry.params())
def test_differential(name: str, target: str, request: pytest.FixtureRequest) -> None:
    run_differential(registry, name, target, request)
