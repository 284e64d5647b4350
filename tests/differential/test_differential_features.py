"""Differential scenarios: TTL, dead-lettering (x-death), max-length overflow, priorities, confirms.

RabbitMQ 3.10.8 is the truth; hashbroker must produce the same observation. Timestamps (x-death
``time``) are reduced to their presence; everything else in x-death is compared exactly.
"""

from __future__ import annotations

import time
from typing import Any

import pika
import pika.exceptions
import pytest

from tests.differential_support import (
    Ctx,
    Registry,
    attempt,
    bodies,
    jsonable,
    method_obs,
    props_obs,
    pump,
    run_differential,
    wait_for_count,
    x_death_obs,
)

registry = Registry()
scenario = registry.scenario


def _dead_letters(ch: Any, queue: str, expected: int) -> list[dict[str, Any]]:
    """Wait for ``expected`` dead letters, then drain them with their x-death and x-first-death-*."""
    wait_for_count(ch, queue, expected)
    out = []
    while True:
        method, props, body = ch.basic_get(queue, auto_ack=True)
        if method is None:
            break
        headers = props.headers or {}
        out.append(
            {
                "body": body.decode(),
                "routing_key": method.routing_key,
                "exchange": method.exchange,
                "x_death": x_death_obs(headers),
                "other_headers": {k: jsonable(v) for k, v in sorted(headers.items()) if k != "x-death"},
                "expiration": props.expiration,
            }
        )
    return out


def _confirm_outcomes(ch: Any, exchange: str, key: str, payloads: list[str], **kw: Any) -> list[str]:
    """Publish on a confirm channel; record 'ack', 'nack' or 'returned' for each message."""
    out = []
    for body in payloads:
        try:
            ch.basic_publish(exchange, key, body.encode(), **kw)
            out.append("ack")
        except pika.exceptions.NackError:
            out.append("nack")
        except pika.exceptions.UnroutableError:
            out.append("returned")
    return out


def _fanout_dead_letters(ctx: Ctx, ch: Any) -> tuple[str, str]:
    """A fanout exchange to dead-letter through and the queue bound to it: (dlx, dlq)."""
    dlx, dlq = ctx.exchange("dlx"), ctx.queue("dlq")
    ch.exchange_declare(dlx, "fanout")
    ch.queue_declare(dlq)
    ch.queue_bind(dlq, dlx)
    return dlx, dlq


@scenario
def scenario_max_length_drop_head(ctx: Ctx) -> Any:
    """x-max-length with the default overflow drops from the head; the dropped are not dead-lettered
    unless a DLX is set, in which case they carry reason maxlen."""
    conn = ctx.connect()
    ch = ctx.confirm_channel(conn)
    q = ctx.queue("q")
    dlx, dlq = _fanout_dead_letters(ctx, ch)
    ch.queue_declare(q, arguments={"x-max-length": 2, "x-dead-letter-exchange": dlx})
    outcomes = _confirm_outcomes(ch, "", q, [f"m{i}" for i in range(5)])
    return {"outcomes": outcomes, "kept": bodies(ch, q), "dead": _dead_letters(ch, dlq, 3)}


@scenario
def scenario_max_length_reject_publish(ctx: Ctx) -> Any:
    """x-overflow reject-publish nacks publishes beyond the limit and keeps the head."""
    _conn, ch, q = ctx.confirmed_queue(arguments={"x-max-length": 2, "x-overflow": "reject-publish"})
    outcomes = _confirm_outcomes(ch, "", q, [f"m{i}" for i in range(4)])
    kept = bodies(ch, q)
    after = _confirm_outcomes(ch, "", q, ["again"])
    return {"outcomes": outcomes, "kept": kept, "after_drain": after, "final": bodies(ch, q)}


@scenario
def scenario_max_length_reject_publish_dlx(ctx: Ctx) -> Any:
    """x-overflow reject-publish-dlx nacks and dead-letters the rejected message (reason maxlen)."""
    conn = ctx.connect()
    ch = ctx.confirm_channel(conn)
    q = ctx.queue("q")
    dlx, dlq = _fanout_dead_letters(ctx, ch)
    ch.queue_declare(
        q, arguments={"x-max-length": 1, "x-overflow": "reject-publish-dlx", "x-dead-letter-exchange": dlx}
    )
    outcomes = _confirm_outcomes(ch, "", q, ["a", "b", "c"])
    return {"outcomes": outcomes, "kept": bodies(ch, q), "dead": _dead_letters(ch, dlq, 2)}


@scenario
def scenario_max_length_bytes(ctx: Ctx) -> Any:
    """x-max-length-bytes counts body bytes only and drops from the head."""
    ch = ctx.confirm_channel(ctx.connect())
    q = ctx.queue()
    ch.queue_declare(q, arguments={"x-max-length-bytes": 10})
    outcomes = _confirm_outcomes(ch, "", q, ["aaaa", "bbbb", "cccc", "dd", "eeeeee"])
    kept = bodies(ch, q)
    oversized = _confirm_outcomes(ch, "", q, ["ff", "ggggggggggggg"])
    return {"outcomes": outcomes, "kept": kept, "oversized": oversized, "kept_after": bodies(ch, q)}


@scenario
def scenario_dead_letter_reject_x_death(ctx: Ctx) -> Any:
    """Rejected/nacked messages are dead-lettered with x-death (count, reason, queue, exchange,
    routing-keys) and x-first-death-*; a second death of the same kind increments count."""
    conn = ctx.connect()
    ch = ctx.confirm_channel(conn)
    x = ctx.exchange("x")
    dlx = ctx.exchange("dlx")
    q, dlq = ctx.queue("q"), ctx.queue("dlq")
    ch.exchange_declare(x, "direct")
    ch.exchange_declare(dlx, "topic")
    ch.queue_declare(q, arguments={"x-dead-letter-exchange": dlx})
    ch.queue_declare(dlq)
    ch.queue_bind(q, x, "orig")
    ch.queue_bind(dlq, dlx, "#")
    props = pika.BasicProperties(headers={"keep": "me", "CC": ["cc-key"]}, message_id="id1")
    ch.basic_publish(x, "orig", b"first", props)
    ch.basic_publish(x, "orig", b"second")
    m1, _p, _b = ch.basic_get(q)
    m2, _p, _b = ch.basic_get(q)
    ch.basic_reject(m1.delivery_tag, requeue=False)
    ch.basic_nack(m2.delivery_tag, requeue=False)
    dead = _dead_letters(ch, dlq, 2)
    # second death: route the dead letter back into q and reject again
    ch.queue_bind(q, dlx, "again")
    ch.basic_publish(dlx, "again", b"third")
    m3, _p3, _b = ch.basic_get(q)
    ch.basic_reject(m3.delivery_tag, requeue=False)
    third = _dead_letters(ch, dlq, 2)
    # a client republishing a dead letter keeps x-death; dying again the same way increments count
    ch.queue_unbind(q, dlx, "again")
    ch.basic_publish("", q, b"fourth", pika.BasicProperties(headers={"x-death": _raw_x_death(dead)}))
    m4, _p, _b = ch.basic_get(q)
    ch.basic_reject(m4.delivery_tag, requeue=False)
    return {"dead": dead, "third": third, "fourth": _dead_letters(ch, dlq, 1)}


def _raw_x_death(dead: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rebuild a client-side x-death header (as a republishing client would) from an observation."""
    entry = dict(dead[0]["x_death"][0])
    entry.pop("has_time")
    return [entry]


@scenario
def scenario_dead_letter_routing_key(ctx: Ctx) -> Any:
    """x-dead-letter-routing-key replaces the routing key; x-death keeps the original routing keys."""
    ch = ctx.confirm_channel(ctx.connect())
    dlx = ctx.exchange("dlx")
    q, dlq, other = ctx.queue("q"), ctx.queue("dlq"), ctx.queue("other")
    ch.exchange_declare(dlx, "direct")
    ch.queue_declare(q, arguments={"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "dl"})
    ch.queue_declare(dlq)
    ch.queue_declare(other)
    ch.queue_bind(dlq, dlx, "dl")
    ch.queue_bind(other, dlx, q)
    ch.basic_publish("", q, b"m")
    method, _p, _b = ch.basic_get(q)
    ch.basic_nack(method.delivery_tag, requeue=False)
    return {"dlq": _dead_letters(ch, dlq, 1), "other": bodies(ch, other)}


@scenario
def scenario_dead_letter_default_exchange(ctx: Ctx) -> Any:
    """A DLX of "" with a dead-letter routing key delivers to the named queue via the default exchange."""
    ch = ctx.confirm_channel(ctx.connect())
    q, dlq = ctx.queue("q"), ctx.queue("dlq")
    ch.queue_declare(dlq)
    ch.queue_declare(q, arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
    ch.basic_publish("", q, b"m")
    method, _p, _b = ch.basic_get(q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    return _dead_letters(ch, dlq, 1)


@scenario
def scenario_queue_ttl_expiry(ctx: Ctx) -> Any:
    """x-message-ttl expires messages (reason expired in x-death); a get never sees an expired one."""
    ch = ctx.confirm_channel(ctx.connect())
    q = ctx.queue("q")
    dlx, dlq = _fanout_dead_letters(ctx, ch)
    ch.queue_declare(q, arguments={"x-message-ttl": 200, "x-dead-letter-exchange": dlx})
    for i in range(3):
        ch.basic_publish("", q, f"m{i}".encode())
    time.sleep(0.6)
    left = ch.basic_get(q)[0] is None
    return {"queue_empty": left, "dead": _dead_letters(ch, dlq, 3)}


@scenario
def scenario_queue_ttl_zero(ctx: Ctx) -> Any:
    """x-message-ttl 0: messages are delivered only if a consumer is ready, else expire at once."""
    conn, ch, q = ctx.confirmed_queue(arguments={"x-message-ttl": 0})
    ch.basic_publish("", q, b"nobody-waits")
    no_consumer = ch.basic_get(q)[0] is None
    got: list[str] = []
    cch = conn.channel()
    cch.basic_consume(q, lambda _c, _m, _p, b: got.append(b.decode()), auto_ack=True)
    pump(conn, 0.2)
    ch.basic_publish("", q, b"consumer-waits")
    pump(conn, 0.3)
    return {"get_empty": no_consumer, "consumed": got}


@scenario
def scenario_per_message_expiration(ctx: Ctx) -> Any:
    """Per-message expiration: expired messages vanish (dead-lettered with original-expiration in
    x-death and the expiration property removed); min of queue TTL and message TTL applies."""
    ch = ctx.confirm_channel(ctx.connect())
    q = ctx.queue("q")
    dlx, dlq = _fanout_dead_letters(ctx, ch)
    ch.queue_declare(q, arguments={"x-dead-letter-exchange": dlx, "x-message-ttl": 60000})
    ch.basic_publish("", q, b"short", pika.BasicProperties(expiration="100"))
    ch.basic_publish("", q, b"long", pika.BasicProperties(expiration="60000"))
    ch.basic_publish("", q, b"none")
    time.sleep(0.5)
    remaining = []
    while True:
        method, props, body = ch.basic_get(q, auto_ack=True)
        if method is None:
            break
        remaining.append([body.decode(), props.expiration])
    return {"remaining": remaining, "dead": _dead_letters(ch, dlq, 1)}


@scenario
def scenario_per_message_expiration_head_blocking(ctx: Ctx) -> Any:
    """An expired message behind a live one is only removed when it reaches the head (RabbitMQ
    semantics), so the queue count includes it until then."""
    ch = ctx.confirm_channel(ctx.connect())
    q = ctx.queue()
    ch.queue_declare(q)
    ch.basic_publish("", q, b"live", pika.BasicProperties(expiration="60000"))
    ch.basic_publish("", q, b"dies", pika.BasicProperties(expiration="50"))
    time.sleep(0.3)
    count = ch.queue_declare(q, passive=True).method.message_count
    first = ch.basic_get(q, auto_ack=True)[2].decode()
    second = ch.basic_get(q, auto_ack=True)[0] is None
    return {"count_before": count, "first": first, "then_empty": second}


@scenario
def scenario_invalid_expiration(ctx: Ctx) -> Any:
    """A non-numeric or negative expiration property is a 406 channel error."""
    conn = ctx.connect()
    q = ctx.queue()
    out = {}
    for label, exp in [("text", "abc"), ("negative", "-1"), ("float", "1.5"), ("zero", "0")]:
        ch = conn.channel()
        ch.queue_declare(q)
        ch.basic_publish("", q, b"m", pika.BasicProperties(expiration=exp))
        out[label] = attempt(lambda ch=ch: method_obs(ch.queue_declare(q, passive=True)))
    return out


@scenario
def scenario_queue_expires(ctx: Ctx) -> Any:
    """x-expires deletes an unused queue after the period; a consumer keeps it alive."""
    conn = ctx.connect()
    ch = conn.channel()
    q, kept = ctx.queue("q"), ctx.queue("kept")
    ch.queue_declare(q, arguments={"x-expires": 300})
    ch.queue_declare(kept, arguments={"x-expires": 300})
    ch.basic_consume(kept, lambda *a: None, consumer_tag="keeper")
    pump(conn, 0.9)
    ch2 = conn.channel()
    gone = attempt(lambda: ch2.queue_declare(q, passive=True) and "exists")
    ch3 = conn.channel()
    alive = attempt(lambda: method_obs(ch3.queue_declare(kept, passive=True)))
    return {"unused": gone, "consumed": alive}


@scenario
def scenario_priority_queue(ctx: Ctx) -> Any:
    """x-max-priority: higher priority first, FIFO within a priority, priorities above max capped."""
    ch = ctx.confirm_channel(ctx.connect())
    q = ctx.queue()
    ch.queue_declare(q, arguments={"x-max-priority": 5})
    for body, prio in [("p0a", None), ("p3a", 3), ("p9", 9), ("p3b", 3), ("p5", 5), ("p1", 1), ("p0b", 0)]:
        ch.basic_publish("", q, body.encode(), pika.BasicProperties(priority=prio))
    return bodies(ch, q)


@scenario
def scenario_confirms_with_returns(ctx: Ctx) -> Any:
    """In confirm mode an unroutable mandatory message is returned (312 NO_ROUTE) and still acked;
    routable and non-mandatory unroutable messages are acked."""
    conn, ch, q = ctx.confirmed_queue()
    returned: list[Any] = []
    ch.add_on_return_callback(
        lambda _c, m, p, b: returned.append(
            [m.reply_code, m.reply_text, m.exchange, m.routing_key, b.decode(), props_obs(p)]
        )
    )
    outcomes = []
    for key, mandatory in [(q, True), ("nowhere", True), ("nowhere", False), (q, False)]:
        outcomes += _confirm_outcomes(
            ch,
            "",
            key,
            [f"{key}-{mandatory}"],
            mandatory=mandatory,
            properties=pika.BasicProperties(message_id="m"),
        )
    pump(conn, 0.2)
    return {"outcomes": outcomes, "returned": returned, "queue": bodies(ch, q)}


@scenario
def scenario_mandatory_without_confirms(ctx: Ctx) -> Any:
    """Without confirms, mandatory unroutable messages come back as basic.return with their props."""
    conn = ctx.connect()
    ch = conn.channel()
    x = ctx.exchange()
    ch.exchange_declare(x, "topic")
    returned: list[Any] = []
    ch.add_on_return_callback(
        lambda _c, m, p, b: returned.append(
            [m.reply_code, m.reply_text, m.exchange, m.routing_key, b.decode(), props_obs(p)]
        )
    )
    ch.basic_publish(x, "a.b", b"r1", pika.BasicProperties(headers={"h": 1}, priority=2), mandatory=True)
    ch.basic_publish(x, "a.c", b"silent")
    ch.basic_publish("", "no-such-queue", b"r2", mandatory=True)
    deadline = time.monotonic() + 2
    while len(returned) < 2 and time.monotonic() < deadline:
        pump(conn, 0.1)
    return returned


@scenario
def scenario_large_message_roundtrip(ctx: Ctx) -> Any:
    """Bodies larger than frame_max are split into several body frames and reassembled exactly."""
    ch = ctx.confirm_channel(ctx.connect())
    q = ctx.queue()
    ch.queue_declare(q)
    sizes = [0, 1, 131_064, 131_065, 300_000, 1_000_003]
    for n in sizes:
        ch.basic_publish("", q, bytes(i % 251 for i in range(n)))
    got = []
    while True:
        method, _p, body = ch.basic_get(q, auto_ack=True)
        if method is None:
            break
        got.append([len(body), body == bytes(i % 251 for i in range(len(body)))])
    return got


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("name", "target"), registry.params())
def test_differential(name: str, target: str, request: pytest.FixtureRequest) -> None:
    run_differential(registry, name, target, request)
