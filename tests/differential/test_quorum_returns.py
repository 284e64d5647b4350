"""Differential (live RabbitMQ 3.10.8 vs hashbroker): how a quorum queue takes messages back beyond
the recorded scenarios: basic.recover, nack multiple, a no-ack consumer after a return, purge with a
returned message waiting, a per-message TTL that ran out while the message was held."""

from __future__ import annotations

import time
from typing import Any

import pika
import pytest

from tests.differential_support import Ctx, Registry, run_differential

registry = Registry()
scenario = registry.scenario
QQ = {"x-queue-type": "quorum"}


def _drain(ch: Any, q: str) -> list[Any]:
    out = []
    while True:
        m, p, b = ch.basic_get(q, auto_ack=True)
        if m is None:
            return out
        out.append([b.decode(), m.redelivered, (p.headers or {}).get("x-delivery-count"), m.message_count])


def _returns(ctx: Ctx, label: str, args: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    conn = ctx.connect()
    ch = ctx.confirm_channel(conn)

    def fresh(tag: str, bodies: list[str]) -> str:
        q = ctx.queue(f"{label}_{tag}")
        ch.queue_declare(q, durable=True, arguments={**QQ, **args})
        for body in bodies:
            ch.basic_publish("", q, body.encode())
        return q

    q = fresh("recover", ["a", "b", "c", "d"])
    c2 = conn.channel()
    for _ in range(2):
        c2.basic_get(q)
    c2.basic_recover(requeue=True)
    time.sleep(0.2)
    out["recover"] = _drain(ch, q)
    q = fresh("nack_multiple", ["a", "b", "c", "d"])
    tags = [c2.basic_get(q)[0].delivery_tag for _ in range(3)]
    c2.basic_nack(tags[1], multiple=True, requeue=True)
    time.sleep(0.2)
    out["nack_multiple"] = _drain(ch, q)
    q = fresh("noack_consumer", ["x"])
    m = c2.basic_get(q)[0]
    c2.basic_reject(m.delivery_tag, requeue=True)
    got: list[Any] = []
    c2.basic_consume(
        q,
        lambda _c, m, p, b: got.append(
            [b.decode(), m.redelivered, (p.headers or {}).get("x-delivery-count")]
        ),
        auto_ack=True,
    )
    deadline = time.monotonic() + 3
    while not got and time.monotonic() < deadline:
        conn.process_data_events(0.1)
    out["noack_consumer"] = got
    c2.close()
    q = fresh("purge", ["p", "q", "r"])
    c3 = conn.channel()
    m = c3.basic_get(q)[0]
    c3.basic_nack(m.delivery_tag, requeue=True)
    time.sleep(0.1)
    out["purge_with_a_return_waiting"] = c3.queue_purge(q).method.message_count
    c3.close()
    q = ctx.queue(f"{label}_ttl")
    ch.queue_declare(q, durable=True, arguments={**QQ, **args})
    ch.basic_publish("", q, b"t1", pika.BasicProperties(expiration="300"))
    ch.basic_publish("", q, b"t2")
    c4 = conn.channel()
    m = c4.basic_get(q)[0]
    time.sleep(0.5)
    c4.basic_nack(m.delivery_tag, requeue=True)
    time.sleep(0.2)
    out["ttl_ran_out_while_held"] = _drain(ch, q)
    return out


@scenario
def scenario_quorum_returns_without_limit(ctx: Ctx) -> Any:
    return _returns(ctx, "nolimit", {})


@scenario
def scenario_quorum_returns_with_limit(ctx: Ctx) -> Any:
    return _returns(ctx, "limit", {"x-delivery-limit": 5})


@scenario
def scenario_quorum_limits_and_consumers(ctx: Ctx) -> Any:
    """A waiting consumer gets a TTL-0 message; drop-head drops a closed channel's returns first;
    reject-publish with x-max-length 0 takes one message; single active consumer ignores x-priority."""
    out: dict[str, Any] = {}
    conn = ctx.connect()
    ch = ctx.confirm_channel(conn)

    def fresh(tag: str, args: dict[str, Any]) -> str:
        q = ctx.queue(tag)
        ch.queue_declare(q, durable=True, arguments={**QQ, **args})
        return q

    def bodies(q: str) -> list[str]:
        return [b[0] for b in _drain(ch, q)]

    q = fresh("ttl0", {})
    got: list[str] = []
    c2 = conn.channel()
    c2.basic_qos(prefetch_count=5)
    c2.basic_consume(q, lambda _c, _m, _p, b: got.append(b.decode()))
    ch.basic_publish("", q, b"zero", pika.BasicProperties(expiration="0"))
    ch.basic_publish("", q, b"plain")
    deadline = time.monotonic() + 1
    while time.monotonic() < deadline:
        conn.process_data_events(0.1)
    out["ttl0_with_consumer"] = got
    c2.close()
    q = fresh("drop_head", {"x-max-length": 2})
    for body in "abc":
        ch.basic_publish("", q, body.encode())
    c3 = conn.channel()
    c3.basic_get(q)
    c3.basic_get(q)
    for body in "def":
        ch.basic_publish("", q, body.encode())
    c3.close()
    time.sleep(0.3)
    out["drop_head_with_unacked_then_close"] = bodies(q)
    q = fresh("reject_0", {"x-max-length": 0, "x-overflow": "reject-publish"})
    acks = []
    for body in "ab":
        try:
            ch.basic_publish("", q, body.encode())
            acks.append("ack")
        except pika.exceptions.NackError:
            acks.append("nack")
    out["reject_publish_0"] = [acks, bodies(q)]
    q = fresh("sac", {"x-single-active-consumer": True})
    per: dict[str, list[str]] = {}
    for tag, prio in (("low", 1), ("high", 10)):
        cc = conn.channel()
        cc.basic_qos(prefetch_count=5)
        per[tag] = []
        cc.basic_consume(
            q,
            lambda _c, _m, _p, b, tag=tag: per[tag].append(b.decode()),
            consumer_tag=tag,
            arguments={"x-priority": prio},
        )
    for body in ("s1", "s2"):
        ch.basic_publish("", q, body.encode())
    deadline = time.monotonic() + 1
    while time.monotonic() < deadline:
        conn.process_data_events(0.1)
    out["sac_priority"] = per
    return out


@scenario
def scenario_quorum_delivery_limit_values(ctx: Ctx) -> Any:
    """x-delivery-limit as a string (no validator: a limit never reached, returns to the front),
    -1 and 0 (gone on the first return)."""
    out: dict[str, Any] = {}
    conn = ctx.connect()
    ch = ctx.confirm_channel(conn)
    for label, limit in (("str", "5"), ("neg", -1), ("zero", 0)):
        q = ctx.queue(label)
        ch.queue_declare(q, durable=True, arguments={**QQ, "x-delivery-limit": limit})
        for body in "abcd":
            ch.basic_publish("", q, body.encode())
        c2 = conn.channel()
        a, b = c2.basic_get(q)[0], c2.basic_get(q)[0]
        c2.basic_nack(b.delivery_tag, requeue=True)
        c2.basic_nack(a.delivery_tag, requeue=True)
        time.sleep(0.2)
        out[label] = _drain(ch, q)
        c2.close()
    return out


@scenario
def scenario_quorum_single_active_consumer(ctx: Ctx) -> Any:
    """basic.get on a single-active-consumer quorum queue is 405; the first consumer is active; when
    it is cancelled holding an unacked message the next one takes the next ready message."""
    out: dict[str, Any] = {}
    conn, ch, q = ctx.confirmed_queue(
        0, "sac", durable=True, arguments={**QQ, "x-single-active-consumer": True}
    )
    for body in "abcd":
        ch.basic_publish("", q, body.encode())
    try:
        conn.channel().basic_get(q)
        out["basic_get"] = "ok"
    except pika.exceptions.ChannelClosedByBroker as exc:
        out["basic_get"] = [exc.reply_code, exc.reply_text]
    got: dict[str, list[Any]] = {"first": [], "second": []}
    chans = {}
    for tag in ("first", "second"):
        c = conn.channel()
        c.basic_qos(prefetch_count=1)
        c.basic_consume(
            q,
            lambda _c, m, p, b, tag=tag: got[tag].append(
                [b.decode(), m.redelivered, p.headers, m.delivery_tag]
            ),
            consumer_tag=tag,
        )
        chans[tag] = c
    deadline = time.monotonic() + 1
    while time.monotonic() < deadline:
        conn.process_data_events(0.1)
    chans["first"].basic_ack(got["first"][0][3])
    deadline = time.monotonic() + 1
    while time.monotonic() < deadline:
        conn.process_data_events(0.1)
    chans["first"].basic_cancel("first")
    deadline = time.monotonic() + 1
    while time.monotonic() < deadline:
        conn.process_data_events(0.1)
    out["deliveries"] = {k: [d[:3] for d in v] for k, v in got.items()}
    return out


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("name", "target"), registry.params())
def test_differential(name: str, target: str, request: pytest.FixtureRequest) -> None:
    run_differential(registry, name, target, request)
