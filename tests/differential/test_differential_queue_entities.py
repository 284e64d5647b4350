"""Differential scenarios for the queue entities: what basic.get reports after expired messages,
delivery to a waiting consumer before length limits apply, zero-TTL deliveries in message_stats.

RabbitMQ 3.10.8 is the truth; hashbroker must produce the same observation.
"""

from __future__ import annotations

import time
from typing import Any

import pika
import pytest

from tests.differential_support import Ctx, Registry, pump, run_differential

registry = Registry()
scenario = registry.scenario


@scenario
def scenario_get_count_after_expired_messages(ctx: Ctx) -> Any:
    """a, b(1 ms), c, d(1 ms), e, f(1 ms); after 0.3 s each basic.get reports the count left once
    the expired messages the fetch exposed at the head are dropped (4 / 2 / 0 on RabbitMQ)."""
    ch = ctx.confirm_channel(ctx.connect())
    q = ctx.queue("q")
    ch.queue_declare(q)
    short = pika.BasicProperties(expiration="1")
    for body, props in (("a", None), ("b", short), ("c", None), ("d", short), ("e", None), ("f", short)):
        ch.basic_publish("", q, body.encode(), props)
    time.sleep(0.3)
    gets = []
    for _ in range(4):
        method, _props, body = ch.basic_get(q, auto_ack=True)
        gets.append(None if method is None else [body.decode(), method.message_count])
    return {"gets": gets, "left": ch.queue_declare(q, passive=True).method.message_count}


@scenario
def scenario_waiting_consumer_takes_a_message_over_max_length(ctx: Ctx) -> Any:
    """x-max-length 0: a consumer with credit still gets the message (attempt_delivery comes before
    the length limit); without one, the message is dropped as it arrives."""
    conn, ch, q = ctx.confirmed_queue(0, "q", arguments={"x-max-length": 0})
    ch.basic_publish("", q, b"no-consumer")
    got: list[str] = []
    cch = conn.channel()
    tag = cch.basic_consume(q, lambda _c, _m, _p, b: got.append(b.decode()), auto_ack=True)
    pump(conn, 0.2)
    ch.basic_publish("", q, b"consumer-waiting")
    pump(conn, 0.3)
    cch.basic_cancel(tag)
    return {"got": got, "left": ch.queue_declare(q, passive=True).method.message_count}


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("name", "target"), registry.params())
def test_differential(name: str, target: str, request: pytest.FixtureRequest) -> None:
    run_differential(registry, name, target, request)
