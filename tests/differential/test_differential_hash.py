"""Differential scenarios for the hash exchanges (x-consistent-hash, x-modulus-hash).

Routing is compared key by key (which queue got which key), not only as per-queue counts: a broker
with the right distribution but a different hash would pass a count test by luck on small samples.
"""

from __future__ import annotations

import datetime
from typing import Any

import pika
import pytest

from tests.differential_support import (
    Ctx,
    Registry,
    attempt,
    pump,
    run_differential,
    wait_for_count,
)

registry = Registry()
scenario = registry.scenario

CHX = "x-consistent-hash"
MODULUS = "x-modulus-hash"


def _route(
    ctx: Ctx,
    x: str,
    queues: list[str],
    messages: list[tuple[str, pika.BasicProperties | None]],
    ch: Any | None = None,
) -> dict[str, Any]:
    """Publish messages (body = their index) to ``x``; return which queue index got each message."""
    ch = ch or ctx.channel()
    for i, (key, props) in enumerate(messages):
        ch.basic_publish(x, key, str(i).encode(), props)
    # the total may legitimately be below len(messages) (unroutable): wait, then read what is there
    total = 0
    counts = []
    for q in queues:
        counts.append(ch.queue_declare(q, passive=True).method.message_count)
    total = sum(counts)
    if total < len(messages):
        import time

        time.sleep(0.3)
        counts = [ch.queue_declare(q, passive=True).method.message_count for q in queues]
    where = ["-"] * len(messages)
    for qi, q in enumerate(queues):
        while True:
            method, _p, body = ch.basic_get(q, auto_ack=True)
            if method is None:
                break
            where[int(body)] = str(qi)
    return {"counts": counts, "where": "".join(where)}


def _chx_topology(
    ctx: Ctx, weights: list[str], arguments: dict[str, Any] | None = None
) -> tuple[Any, str, list[str]]:
    ch = ctx.channel()
    x = ctx.exchange("chx")
    ch.exchange_declare(x, CHX, arguments=arguments)
    queues = []
    for i, w in enumerate(weights):
        q = ctx.queue(f"q{i}")
        ch.queue_declare(q)
        ch.queue_bind(q, x, w)
        queues.append(q)
    return ch, x, queues


@scenario
def scenario_chx_weights_1122_routing_key(ctx: Ctx) -> Any:
    """The README topology (weights 1,1,2,2) routes 3,000 routing keys exactly like RabbitMQ."""
    ch, x, queues = _chx_topology(ctx, ["1", "1", "2", "2"])
    return _route(ctx, x, queues, [(str(i), None) for i in range(3000)], ch)


@scenario
def scenario_chx_key_shapes(ctx: Ctx) -> Any:
    """Unusual routing keys (empty, unicode, long, binary-ish) hash like RabbitMQ; CC is ignored."""
    ch, x, queues = _chx_topology(ctx, ["1", "3", "1", "5", "2"])
    keys = ["", " ", "a", "ä", "日本語", "x" * 255, "0", "-1", "99999999999", "a.b.c", "\t"]
    msgs: list[tuple[str, pika.BasicProperties | None]] = [(k, None) for k in keys]
    msgs += [
        ("a", pika.BasicProperties(headers={"CC": ["b", "c"]})),
        ("zz", pika.BasicProperties(headers={"BCC": ["a"]})),
    ]
    return _route(ctx, x, queues, msgs, ch)


@scenario
def scenario_chx_bind_errors(ctx: Ctx) -> Any:
    """Binding keys must be positive integers (Erlang list_to_integer): exact 406 texts.

    Weights above 10000 are left out on purpose: 3.10.8 accepts them, hashbroker caps them (the CVE
    fix of 4.2.6), a deliberate difference."""
    conn = ctx.connect()
    ch = conn.channel()
    x = ctx.exchange()
    ch.exchange_declare(x, CHX)
    out = {}
    for key in ["abc", "0", "-1", "", " 5", "1e3", "+5", "007", "1.0", "5 ", "٣", "10000"]:
        q = ctx.queue("q")
        c = conn.channel()
        c.queue_declare(q)
        out[repr(key)] = attempt(lambda c=c, q=q, key=key: c.queue_bind(q, x, key) and "ok")
    return out


@scenario
def scenario_chx_first_binding_wins_and_unbind(ctx: Ctx) -> Any:
    """A queue's further bindings do not change the ring; unbinding removes its buckets (shift)."""
    ch, x, queues = _chx_topology(ctx, ["1", "2", "1"])
    keys = [(str(i), None) for i in range(600)]
    before = _route(ctx, x, queues, keys, ch)
    ch.queue_bind(queues[0], x, "7")  # ignored for the ring
    rebound = _route(ctx, x, queues, keys, ch)
    ch.queue_unbind(queues[0], x, "1")
    after_unbind_first = _route(ctx, x, queues, keys, ch)
    ch.queue_unbind(queues[0], x, "7")
    after_unbind_both = _route(ctx, x, queues, keys, ch)
    ch.queue_bind(queues[0], x, "2")
    readded = _route(ctx, x, queues, keys, ch)
    return {
        "before": before,
        "rebound": rebound,
        "unbind_first_key": after_unbind_first,
        "unbind_both": after_unbind_both,
        "readded": readded,
    }


@scenario
def scenario_chx_hash_header(ctx: Ctx) -> Any:
    """hash-header: the named header's typed value is hashed (3.10.8: the {Type, Value} tuple);
    messages without it all go to one arbitrary-but-fixed bucket."""
    ch, x, queues = _chx_topology(ctx, ["1", "1", "2", "2"], {"hash-header": "hash-on"})
    msgs: list[tuple[str, pika.BasicProperties | None]] = [
        ("", pika.BasicProperties(headers={"hash-on": str(i)})) for i in range(400)
    ]
    msgs += [("", pika.BasicProperties(headers={"hash-on": i})) for i in range(50)]
    msgs += [
        ("rk", None),
        ("rk2", pika.BasicProperties(headers={"other": "1"})),
        ("", pika.BasicProperties(headers={"hash-on": True})),
        ("", pika.BasicProperties(headers={"hash-on": b"bytes"})),
        ("", pika.BasicProperties(headers={"hash-on": 2**40})),
        ("", pika.BasicProperties(headers={"hash-on": -7})),
        ("", pika.BasicProperties(headers={"hash-on": ["a", 1]})),
        ("", pika.BasicProperties(headers={"hash-on": {"k": "v"}})),
    ]
    return _route(ctx, x, queues, msgs, ch)


@scenario
def scenario_chx_hash_property(ctx: Ctx) -> Any:
    """hash-property message_id / correlation_id / timestamp; missing property -> fixed bucket."""
    out = {}
    for prop in ["message_id", "correlation_id", "timestamp"]:
        ch, x, queues = _chx_topology(ctx, ["1", "1", "2", "2"], {"hash-property": prop})
        msgs: list[tuple[str, pika.BasicProperties | None]] = []
        for i in range(300):
            value: Any = 1_600_000_000 + i * 7 if prop == "timestamp" else str(i)
            msgs.append((f"rk{i}", pika.BasicProperties(**{prop: value})))
        msgs.append(("missing", None))
        out[prop] = _route(ctx, x, queues, msgs, ch)
    return out


@scenario
def scenario_chx_argument_validation(ctx: Ctx) -> Any:
    """Exchange arguments are validated at creation only; redeclare ignores changed hash args."""
    conn = ctx.connect()
    cases = {
        "bad_property": {"hash-property": "app_id"},
        "both": {"hash-header": "h", "hash-property": "message_id"},
        "header_int": {"hash-header": 5},
        "ok_header": {"hash-header": "h"},
        "ok_property": {"hash-property": "correlation_id"},
    }
    out: dict[str, Any] = {}
    for label, args in cases.items():
        x = ctx.exchange(label)
        if conn.is_closed:
            conn = ctx.connect()
        c = conn.channel()
        out[label] = attempt(lambda c=c, x=x, args=args: c.exchange_declare(x, CHX, arguments=args) and "ok")
        if label == "ok_header":
            c2 = conn.channel()
            out["redeclare_changed"] = attempt(
                lambda c2=c2, x=x: (
                    c2.exchange_declare(x, CHX, arguments={"hash-property": "message_id"}) and "ok"
                )
            )
            c3 = conn.channel()
            out["redeclare_invalid"] = attempt(
                lambda c3=c3, x=x: c3.exchange_declare(x, CHX, arguments={"hash-property": "app_id"}) and "ok"
            )
    return out


@scenario
def scenario_chx_edge_rings(ctx: Ctx) -> Any:
    """No bindings: unroutable (mandatory return); one binding: everything goes there; an exchange
    can be a destination with its own weight."""
    conn = ctx.connect()
    ch = conn.channel()
    empty = ctx.exchange("empty")
    ch.exchange_declare(empty, CHX)
    returned: list[Any] = []
    ch.add_on_return_callback(lambda _c, m, _p, b: returned.append([m.reply_code, m.reply_text, b.decode()]))
    ch.basic_publish(empty, "k", b"nobody", mandatory=True)
    pump(conn, 0.3)
    single_ch, single_x, single_q = _chx_topology(ctx, ["3"])
    single = _route(ctx, single_x, single_q, [(str(i), None) for i in range(20)], single_ch)
    x = ctx.exchange("mixed")
    fan = ctx.exchange("fan")
    ch.exchange_declare(x, CHX)
    ch.exchange_declare(fan, "fanout")
    qa, qb = ctx.queue("qa"), ctx.queue("qb")
    ch.queue_declare(qa)
    ch.queue_declare(qb)
    ch.queue_bind(qa, x, "2")
    ch.exchange_bind(fan, x, "3")
    ch.queue_bind(qb, fan)
    mixed = _route(ctx, x, [qa, qb], [(str(i), None) for i in range(300)], ch)
    return {"returned": returned, "single": single, "mixed": mixed}


@scenario
def scenario_chx_weights_1111(ctx: Ctx) -> Any:
    """Equal weights, 8 queues, 2,000 keys: per-key placement."""
    ch, x, queues = _chx_topology(ctx, ["1"] * 8)
    return _route(ctx, x, queues, [(f"key-{i}", None) for i in range(2000)], ch)


def _modulus_queues(ctx: Ctx, n: int) -> tuple[Any, str, list[str]]:
    """A channel, an x-modulus-hash exchange and `n` queues, not bound yet."""
    ch = ctx.channel()
    x = ctx.exchange("mod")
    ch.exchange_declare(x, MODULUS)
    queues = [ctx.queue(f"q{i}") for i in range(n)]
    for q in queues:
        ch.queue_declare(q)
    return ch, x, queues


@scenario
def scenario_modulus_hash(ctx: Ctx) -> Any:
    """x-modulus-hash: phash2 of [RK | CC] modulo the number of bindings (ordered by key, then
    destination); binding a queue twice doubles its share."""
    ch, x, queues = _modulus_queues(ctx, 3)
    ch.queue_bind(queues[2], x, "")
    ch.queue_bind(queues[0], x, "")
    ch.queue_bind(queues[1], x, "b")
    keys: list[tuple[str, pika.BasicProperties | None]] = [(str(i), None) for i in range(600)]
    keys += [("a", pika.BasicProperties(headers={"CC": ["b"]})), ("", None)]
    three = _route(ctx, x, queues, keys, ch)
    ch.queue_bind(queues[0], x, "again")
    doubled = _route(ctx, x, queues, keys, ch)
    return {"three": three, "doubled": doubled}


@scenario
def scenario_modulus_hash_5_queues(ctx: Ctx) -> Any:
    """Five destinations (not a power of two) tell the 2^27 range apart from 2^32."""
    ch, x, queues = _modulus_queues(ctx, 5)
    for q in queues:
        ch.queue_bind(q, x, "")
    return _route(ctx, x, queues, [(f"k{i}", None) for i in range(1000)], ch)


@scenario
def scenario_chx_timestamp_and_datetime(ctx: Ctx) -> Any:
    """hash-property timestamp hashes the decimal text of the seconds."""
    ch, x, queues = _chx_topology(ctx, ["1", "2", "3"], {"hash-property": "timestamp"})
    base = int(datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC).timestamp())
    msgs: list[tuple[str, pika.BasicProperties | None]] = [
        ("", pika.BasicProperties(timestamp=base + i)) for i in range(200)
    ]
    result = _route(ctx, x, queues, msgs, ch)
    wait_for_count(ch, queues[0], 0)
    return result


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("name", "target"), registry.params())
def test_differential(name: str, target: str, request: pytest.FixtureRequest) -> None:
    run_differential(registry, name, target, request)
