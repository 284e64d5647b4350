"""Streams, differential: the same scenario against the live RabbitMQ 3.10.8 and hashbroker.

Hash routing into streams (x-consistent-hash with weights, x-modulus-hash) must pick the same
stream for every key as it picks the classic queue bound in the same place; the destination string
itself is compared between the brokers. Then the recorded stream scenarios of
`tests/qs_scenarios.py` whose outcome does not depend on the wall clock run live on both brokers.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pika
import pytest

from tests.differential_support import Ctx, Registry, run_differential
from tests.qs_scenarios import (
    SCALAR_HEADERS,
    ack_all_then_qos,
    confirm_channel,
    deliveries_from_first,
    publish_confirmed,
    pump_until_some,
    read_stream,
    stream_read_by_victim,
)
from tests.qs_scenarios import attempt as qs_attempt
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
    return [body for _offset, body in read_stream(conn, name, "first", prefetch=1000, quiet=1.0, timeout=30)]


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


@registry.slow_scenario
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


@scenario
def scenario_stream_headers_and_properties(ctx: Ctx) -> Any:
    """What a stream keeps of each header type and property (with the wire type tags), the
    x-stream-offset header it adds, and the 541 a decimal header provokes."""
    conn = ctx.connect()
    s = ctx.queue("s")
    conn.channel().queue_declare(s, durable=True, arguments=ST)
    headers: dict[str, Any] = {
        **SCALAR_HEADERS,
        "array": [1, "a", True],
        "table": {"k": "v", "n": 1},
        "nested": {"t": {"a": [1, {"b": 2}]}},
        "bytes": b"\x00\x01",
        "empty_array": [],
        "none": None,
        "ts": datetime(2020, 1, 1, tzinfo=UTC),
        "x-stream-offset": "mine",
        "decimal": Decimal("1.5"),
        "after_decimal": "still here",
    }
    out: dict[str, Any] = {"publish": {}}
    for key, value in headers.items():
        if conn.is_closed:
            conn = ctx.connect()
        c = confirm_channel(conn)
        out["publish"][key] = qs_attempt(
            lambda c=c, key=key, value=value: publish_confirmed(c, s, [key], headers={key: value})
        )
    c = confirm_channel(conn)
    props = {
        "content_type": "text/plain",
        "headers": {"str": "v", "array": [1], "x-stream-offset": 7},
        "delivery_mode": 2,
        "priority": 3,
        "correlation_id": "cid",
        "expiration": "600000",
        "message_id": "mid",
        "timestamp": 1_600_000_000,
        "user_id": "guest",
        "app_id": "app",
        "cluster_id": "cluster",
    }
    publish_confirmed(c, s, ["all_properties"], **props)
    publish_confirmed(c, s, ["bare"])
    _reader, out["deliveries"], out["wire"] = deliveries_from_first(ctx, conn, s, len(headers) + 1)
    return out


@scenario
def scenario_stream_delete_with_consumer(ctx: Ctx) -> Any:
    """queue.delete (if-unused too) of a stream read by a consumer: delete-ok 0, basic.cancel to the
    consumer, whose channel stays open and may still ack."""
    conn, _ch, s, c, col, cancelled = stream_read_by_victim(ctx)
    other = ctx.connect()
    out: dict[str, Any] = {
        "delete": qs_attempt(lambda: other.channel().queue_delete(s, if_unused=True, if_empty=True))
    }
    out["cancel_received"] = pump_until_some(conn, cancelled, 3)
    out["channel_open"] = c.is_open
    out["ack_after_delete"] = qs_attempt(lambda: ack_all_then_qos(c, col))
    out["passive_after"] = qs_attempt(lambda: other.channel().queue_declare(s, passive=True))
    return out


@scenario
def scenario_stream_qos_variants(ctx: Ctx) -> Any:
    """Which basic.qos settings a stream consumer may have: per-consumer after a global one, a
    global one after a per-consumer one, no-ack without any prefetch."""
    out: dict[str, Any] = {}
    conn = ctx.connect()
    s = ctx.queue("s")
    conn.channel().queue_declare(s, durable=True, arguments=ST)
    variants: dict[str, list[tuple[int, bool]]] = {
        "global_then_consumer": [(5, True), (5, False)],
        "consumer_then_global": [(5, False), (5, True)],
        "consumer_then_global_0": [(5, False), (0, True)],
        "consumer_then_0": [(5, False), (0, False)],
    }
    for label, qos in variants.items():
        if conn.is_closed:
            conn = ctx.connect()
        c = conn.channel()
        for count, global_qos in qos:
            c.basic_qos(prefetch_count=count, global_qos=global_qos)
        out[label] = qs_attempt(lambda c=c: c.basic_consume(s, lambda *a: None, consumer_tag="t"))
    if conn.is_closed:
        conn = ctx.connect()
    c = conn.channel()
    out["no_ack_without_prefetch"] = qs_attempt(lambda: c.basic_consume(s, lambda *a: None, auto_ack=True))
    return out


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("name", "target"), registry.params())
def test_differential(name: str, target: str, request: pytest.FixtureRequest) -> None:
    run_differential(registry, name, target, request)


#: Stream scenarios of tests/qs_scenarios.py run on both brokers (those that need the management
#: API on hashbroker are compared with the recording in tests/integration/test_stream_recorded.py).
LIVE = (
    "st_consume_rules",
    pytest.param("st_offsets", marks=pytest.mark.slow),  # 20 consumers, each waits out a quiet spell
    "st_next_and_last_then_publish",
    "st_prefetch_and_acks",
    "st_redeclare_and_passive",
)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("name", LIVE)
@pytest.mark.parametrize("target", ["rabbitmq", "hashbroker"])
def test_qs_stream_scenarios_live(name: str, target: str, request: pytest.FixtureRequest) -> None:
    run_differential(qs_registry, name, target, request)
