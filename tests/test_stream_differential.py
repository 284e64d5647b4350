"""Streams, differential: the same scenario against the live RabbitMQ 3.10.8 and hashbroker.

Hash routing into streams (x-consistent-hash with weights, x-modulus-hash) must pick the same
stream for every key as it picks the classic queue bound in the same place; the destination string
itself is compared between the brokers. Then the recorded stream scenarios of
`tests/qs_scenarios.py` whose outcome does not depend on the wall clock run live on both brokers.
"""

from __future__ import annotations

import time
from typing import Any

import pika
import pytest

from tests.differential_support import Ctx, Registry, run_differential
from tests.qs_scenarios import registry as qs_registry

pytestmark = pytest.mark.live


class _Registry(Registry):
    """Scenarios here publish thousands of messages: more time than the core default."""

    def run(self, name: str, url: str, timeout: float = 150.0) -> Any:
        return super().run(name, url, timeout)


registry = _Registry()
scenario = registry.scenario

KEYS = [f"key-{i}" for i in range(5000)]
ST = {"x-queue-type": "stream"}


def _read_stream(conn: pika.BlockingConnection, name: str) -> list[str]:
    """Everything in stream `name`, from the first offset until nothing arrived for a second."""
    ch = conn.channel()
    ch.basic_qos(prefetch_count=1000)
    got: list[str] = []

    def on_message(c: Any, method: Any, _props: Any, body: bytes) -> None:
        got.append(body.decode())
        c.basic_ack(method.delivery_tag)

    ch.basic_consume(name, on_message, arguments={"x-stream-offset": "first"})
    deadline = time.monotonic() + 30
    seen, last = -1, time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - last < 1.0:
        conn.process_data_events(time_limit=0.1)
        if seen != len(got):
            seen, last = len(got), time.monotonic()
    ch.close()  # nothing is pending: pika would reject pending messages, which a stream refuses
    return got


def _destinations(ctx: Ctx, xtype: str, weights: tuple[str, ...], args: dict[str, Any]) -> str:
    conn = ctx.connect()
    ch = ctx.confirm_channel(conn)
    x = ctx.exchange(f"{xtype}-{args.get('x-queue-type', 'classic')}")
    ch.exchange_declare(x, xtype)
    names = []
    for i, weight in enumerate(weights):
        q = ctx.queue(f"{xtype}-{args.get('x-queue-type', 'classic')}-{i}")
        ch.queue_declare(q, durable=True, arguments=args)
        ch.queue_bind(q, x, routing_key=weight)
        names.append(q)
    pub = conn.channel()
    for key in KEYS:
        pub.basic_publish(x, key, key.encode())
    ch.queue_declare(names[0], durable=True, arguments=args)  # a round trip after the publishes
    where: dict[str, str] = {}
    for i, q in enumerate(names):
        if args:
            bodies = _read_stream(conn, q)
        else:
            bodies = []
            for _ in range(len(KEYS)):
                method, _p, body = ch.basic_get(q, auto_ack=True)
                if method is None:
                    break
                bodies.append(body.decode())
        for body in bodies:
            where[body] = "ABC"[i]
    conn.close()
    return "".join(where.get(k, "-") for k in KEYS)


@scenario
def scenario_hash_routing_into_streams(ctx: Ctx) -> Any:
    out: dict[str, Any] = {}
    for xtype, weights in (("x-consistent-hash", ("1", "2", "3")), ("x-modulus-hash", ("", "", ""))):
        classic = _destinations(ctx, xtype, weights, {})
        stream = _destinations(ctx, xtype, weights, ST)
        out[xtype] = {
            "stream": stream,
            "stream_equals_classic": stream == classic,
            "counts": {c: stream.count(c) for c in "ABC-"},
        }
    return out


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("name", "target"), registry.params())
def test_differential(name: str, target: str, request: pytest.FixtureRequest) -> None:
    run_differential(registry, name, target, request)


#: Stream scenarios of tests/qs_scenarios.py run on both brokers (those that need the management
#: API on hashbroker are compared with the recording in tests/test_stream_recorded.py).
LIVE = ("st_consume_rules", "st_offsets", "st_next_and_last_then_publish", "st_prefetch_and_acks")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("name", LIVE)
@pytest.mark.parametrize("target", ["rabbitmq", "hashbroker"])
def test_qs_stream_scenarios_live(name: str, target: str, request: pytest.FixtureRequest) -> None:
    run_differential(qs_registry, name, target, request)
