"""Differential scenarios: declare, bind, route, get, consume, ack/nack, qos, tx, exclusive queues.

Each scenario runs against the live RabbitMQ 3.10.8 (the truth) and against hashbroker; the two
observations must be equal. See ``differential_support`` for how names are scrubbed and cleaned up.
"""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

import pika
import pika.exceptions
import pytest

from tests.differential_support import (
    ALL_PROPERTIES,
    Ctx,
    Registry,
    attempt,
    bodies,
    declare_each,
    get_all,
    method_obs,
    props_obs,
    pump,
    run_differential,
    wait_for_count,
)

registry = Registry()
scenario = registry.scenario


def _publish(ch: Any, exchange: str, keys_bodies: list[tuple[str, str]], **props: Any) -> None:
    for key, body in keys_bodies:
        ch.basic_publish(exchange, key, body.encode(), pika.BasicProperties(**props) if props else None)


@scenario
def scenario_default_exchange_roundtrip(ctx: Ctx) -> Any:
    """Publishing to "" with routing key = queue name delivers; basic.get reports exchange "" and count."""
    ch = ctx.channel()
    q = ctx.queue()
    declare = method_obs(ch.queue_declare(q))
    headers = {"s": "v", "i": 7, "neg": -3, "b": True, "d": Decimal("1.5"), "l": [1, "two"], "t": {"k": "v"}}
    props = pika.BasicProperties(headers=headers, **ALL_PROPERTIES)
    ch.basic_publish("", q, b"first", props)
    ch.basic_publish("", q, b"second")
    method, got_props, body = ch.basic_get(q)
    first = {"method": method_obs(method), "props": props_obs(got_props), "body": body.decode()}
    rest = get_all(ch, q)
    return {"declare": declare, "first": first, "rest": rest}


@scenario
def scenario_basic_get_empty(ctx: Ctx) -> Any:
    """basic.get on an empty queue answers get-empty (pika: None), also after draining."""
    ch = ctx.channel()
    q = ctx.queue()
    ch.queue_declare(q)
    empty = ch.basic_get(q)
    ch.basic_publish("", q, b"x")
    one = ch.basic_get(q, auto_ack=True)
    again = ch.basic_get(q)
    return {
        "empty": empty[0] is None,
        "one": one[2].decode(),
        "one_count": one[0].message_count,
        "again": again[0] is None,
    }


@scenario
def scenario_declare_ok_counts(ctx: Ctx) -> Any:
    """queue.declare-ok counts ready messages and consumers; unacked deliveries are not counted."""
    conn, ch, q = ctx.confirmed_queue()
    for i in range(3):
        ch.basic_publish("", q, str(i).encode())
    before = method_obs(ch.queue_declare(q, passive=True))
    redeclare = method_obs(ch.queue_declare(q))
    ch2 = conn.channel()
    ch2.basic_qos(prefetch_count=2)
    ch2.basic_consume(q, lambda *a: None, consumer_tag="c1")
    pump(conn, 0.3)
    during = method_obs(ch.queue_declare(q, passive=True))
    ch2.basic_cancel("c1")
    ch2.close()
    after = method_obs(ch.queue_declare(q, passive=True))
    return {"before": before, "redeclare": redeclare, "during": during, "after": after}


@scenario
def scenario_server_named_queue(ctx: Ctx) -> Any:
    """An empty queue name gets a generated amq.gen-* name; "" later means the channel's last queue."""
    ch = ctx.channel()
    ok = ch.queue_declare("", exclusive=True)
    name = ok.method.queue
    ctx.names[name] = "<generated>"
    x = ctx.exchange()
    ch.exchange_declare(x, "direct", auto_delete=True)
    bind = attempt(lambda: ch.queue_bind("", x, routing_key="k"))
    ch.basic_publish(x, "k", b"via-bind")
    got = attempt(lambda: ch.basic_get("", auto_ack=True)[2])
    return {
        "prefix": name[:8],
        "length": len(name),
        "counts": [ok.method.message_count, ok.method.consumer_count],
        "bind": bind,
        "got": got,
    }


@scenario
def scenario_fanout_routing(ctx: Ctx) -> Any:
    """Fanout ignores the routing key and copies to every bound queue once, even if bound twice."""
    ch = ctx.channel()
    x = ctx.exchange()
    q1, q2 = ctx.queue("q1"), ctx.queue("q2")
    ch.exchange_declare(x, "fanout")
    for q in (q1, q2):
        ch.queue_declare(q)
    ch.queue_bind(q1, x, "a")
    ch.queue_bind(q1, x, "b")
    ch.queue_bind(q2, x)
    _publish(ch, x, [("whatever", "m1"), ("", "m2")])
    return {"q1": bodies(ch, q1), "q2": bodies(ch, q2)}


@scenario
def scenario_direct_routing_and_unbind(ctx: Ctx) -> Any:
    """Direct routes by exact key; a queue bound with two matching keys gets one copy; unbind works."""
    ch = ctx.channel()
    x = ctx.exchange()
    q1, q2 = ctx.queue("q1"), ctx.queue("q2")
    ch.exchange_declare(x, "direct")
    for q in (q1, q2):
        ch.queue_declare(q)
    ch.queue_bind(q1, x, "a")
    ch.queue_bind(q2, x, "a")
    ch.queue_bind(q2, x, "b")
    _publish(ch, x, [("a", "a1"), ("b", "b1"), ("c", "c1"), ("A", "A1")])
    ch.queue_unbind(q2, x, "a")
    unbind_missing = attempt(lambda: ch.queue_unbind(q2, x, "never-bound") and None)
    _publish(ch, x, [("a", "a2")])
    return {"q1": bodies(ch, q1), "q2": bodies(ch, q2), "unbind_missing": unbind_missing}


@scenario
def scenario_topic_routing(ctx: Ctx) -> Any:
    """Topic wildcards: * is one word, # is zero or more, empty words and dots at the edges."""
    ch = ctx.channel()
    x = ctx.exchange()
    ch.exchange_declare(x, "topic")
    patterns = ["*.orange.*", "*.*.rabbit", "lazy.#", "#", "a.#.b", "*", "#.end", "x..y", ""]
    queues = {}
    for i, pattern in enumerate(patterns):
        q = ctx.queue(f"q{i}")
        ch.queue_declare(q)
        ch.queue_bind(q, x, pattern)
        queues[pattern] = q
    keys = [
        "quick.orange.rabbit",
        "lazy.orange.elephant",
        "quick.orange.fox",
        "lazy.brown.fox",
        "lazy",
        "orange",
        "quick.orange.male.rabbit",
        "a.b",
        "a.x.y.b",
        "ab",
        "end",
        "x.end",
        "x..y",
        "",
        ".",
        "a..b",
    ]
    for k in keys:
        ch.basic_publish(x, k, k.encode() or b"<empty>")
    return {p: bodies(ch, q) for p, q in queues.items()}


@scenario
def scenario_headers_routing(ctx: Ctx) -> Any:
    """Headers exchange: x-match all/any (default all), x-* binding args ignored, value types matter."""
    ch = ctx.channel()
    x = ctx.exchange()
    ch.exchange_declare(x, "headers")
    bindings = {
        "all": {"x-match": "all", "a": "1", "b": "2"},
        "any": {"x-match": "any", "a": "1", "b": "2"},
        "default": {"a": "1"},
        "xarg": {"x-match": "all", "x-ignored": "zzz", "a": "1"},
        "int": {"n": 5},
        "empty": {},
    }
    queues = {}
    for label, args in bindings.items():
        q = ctx.queue(label)
        ch.queue_declare(q)
        ch.queue_bind(q, x, "", arguments=args)
        queues[label] = q
    msgs = {
        "ab": {"a": "1", "b": "2"},
        "a": {"a": "1"},
        "b": {"b": "2"},
        "wrong": {"a": "9", "b": "2"},
        "n5": {"n": 5},
        "n5str": {"n": "5"},
        "none": None,
    }
    for body, headers in msgs.items():
        ch.basic_publish(x, "", body.encode(), pika.BasicProperties(headers=headers))
    return {label: bodies(ch, q) for label, q in queues.items()}


@scenario
def scenario_amq_predeclared_exchanges(ctx: Ctx) -> Any:
    """The amq.* exchanges exist with their types; passive declare and redeclare with the same type."""
    conn = ctx.connect()
    out: dict[str, Any] = {}
    for name, kind in [
        ("amq.direct", "direct"),
        ("amq.fanout", "fanout"),
        ("amq.topic", "topic"),
        ("amq.headers", "headers"),
        ("amq.match", "headers"),
        ("amq.rabbitmq.trace", "topic"),
        ("amq.nonexistent", "direct"),
    ]:
        ch = conn.channel()
        out[name] = {
            "passive": attempt(lambda ch=ch, name=name: ch.exchange_declare(name, passive=True) and "ok")
        }
        ch = ch if ch.is_open else conn.channel()
        out[name]["redeclare"] = attempt(
            lambda ch=ch, name=name, kind=kind: ch.exchange_declare(name, kind, durable=True) and "ok"
        )
    return out


@scenario
def scenario_amq_exchanges_route(ctx: Ctx) -> Any:
    """Bindings to the pre-declared exchanges route like exchanges of their type."""
    ch = ctx.channel()
    q = ctx.queue()
    ch.queue_declare(q)
    ch.queue_bind(q, "amq.direct", "d")
    ch.queue_bind(q, "amq.fanout")
    ch.queue_bind(q, "amq.topic", "t.*")
    ch.queue_bind(q, "amq.match", "", arguments={"h": "1"})
    ch.basic_publish("amq.direct", "d", b"direct")
    ch.basic_publish("amq.direct", "nope", b"direct-miss")
    ch.basic_publish("amq.fanout", "any", b"fanout")
    ch.basic_publish("amq.topic", "t.x", b"topic")
    ch.basic_publish("amq.headers", "", b"headers-miss", pika.BasicProperties(headers={"h": "1"}))
    ch.basic_publish("amq.match", "", b"match", pika.BasicProperties(headers={"h": "1"}))
    result = bodies(ch, q)
    for x, key, args in [
        ("amq.direct", "d", None),
        ("amq.fanout", "", None),
        ("amq.topic", "t.*", None),
        ("amq.match", "", {"h": "1"}),
    ]:
        ch.queue_unbind(q, x, key, arguments=args)
    return result


@scenario
def scenario_exchange_to_exchange(ctx: Ctx) -> Any:
    """E2E bindings: source routes to destination exchanges; cycles deliver once; unbind stops flow."""
    ch = ctx.channel()
    src, dst, topic = ctx.exchange("src"), ctx.exchange("dst"), ctx.exchange("topic")
    q1, q2 = ctx.queue("q1"), ctx.queue("q2")
    ch.exchange_declare(src, "direct")
    ch.exchange_declare(dst, "fanout")
    ch.exchange_declare(topic, "topic")
    for q in (q1, q2):
        ch.queue_declare(q)
    ch.exchange_bind(dst, src, "k")
    ch.exchange_bind(topic, src, "k")
    ch.exchange_bind(src, dst, "")  # cycle src -> dst -> src
    ch.queue_bind(q1, dst)
    ch.queue_bind(q2, topic, "#")
    ch.queue_bind(q2, src, "k")  # q2 reachable on two paths
    _publish(ch, src, [("k", "k1"), ("other", "o1")])
    _publish(ch, dst, [("zz", "via-dst")])
    ch.exchange_unbind(dst, src, "k")
    _publish(ch, src, [("k", "k2")])
    return {"q1": bodies(ch, q1), "q2": bodies(ch, q2)}


@scenario
def scenario_alternate_exchange(ctx: Ctx) -> Any:
    """Unroutable messages go to the alternate-exchange; a missing AE just drops; mandatory not returned."""
    conn = ctx.connect()
    ch = conn.channel()
    x, ae, x2 = ctx.exchange("x"), ctx.exchange("ae"), ctx.exchange("x2")
    q, qae = ctx.queue("q"), ctx.queue("qae")
    ch.exchange_declare(ae, "fanout")
    ch.exchange_declare(x, "direct", arguments={"alternate-exchange": ae})
    ch.exchange_declare(x2, "direct", arguments={"alternate-exchange": ctx.exchange("missing")})
    for name in (q, qae):
        ch.queue_declare(name)
    ch.queue_bind(q, x, "hit")
    ch.queue_bind(qae, ae)
    returned: list[Any] = []
    ch.add_on_return_callback(lambda _c, m, _p, b: returned.append([m.reply_code, m.reply_text, b.decode()]))
    _publish(ch, x, [("hit", "routed"), ("miss", "to-ae")])
    ch.basic_publish(x, "miss2", b"mandatory-to-ae", mandatory=True)
    ch.basic_publish(x2, "miss3", b"mandatory-missing-ae", mandatory=True)
    pump(conn, 0.3)
    return {"q": bodies(ch, q), "qae": bodies(ch, qae), "returned": returned}


@scenario
def scenario_nack_requeue_position(ctx: Ctx) -> Any:
    """nack/reject with requeue puts messages back at their original position with redelivered=true."""
    ch = ctx.channel()
    q = ctx.queue()
    ch.queue_declare(q)
    for i in range(1, 6):
        ch.basic_publish("", q, f"m{i}".encode())
    tags = []
    for _ in range(5):
        method, _props, _body = ch.basic_get(q)
        tags.append(method.delivery_tag)
    ch.basic_nack(tags[3], requeue=True)
    ch.basic_reject(tags[1], requeue=True)
    ch.basic_ack(tags[0])
    ch.basic_nack(tags[4], requeue=False)
    after = get_all(ch, q, ack=False)
    return {"tags": tags, "after": after}


@scenario
def scenario_nack_multiple(ctx: Ctx) -> Any:
    """nack multiple=true requeues every outstanding tag up to and including the given one."""
    ch = ctx.channel()
    q = ctx.queue()
    ch.queue_declare(q)
    for i in range(1, 5):
        ch.basic_publish("", q, f"m{i}".encode())
    tags = [ch.basic_get(q)[0].delivery_tag for _ in range(4)]
    ch.basic_nack(tags[2], multiple=True, requeue=True)
    first = get_all(ch, q, ack=False)
    ch.basic_nack(0, multiple=True, requeue=False)  # tag 0 + multiple = everything outstanding
    return {"tags": tags, "requeued": first, "left": get_all(ch, q)}


@scenario
def scenario_close_channel_requeues(ctx: Ctx) -> Any:
    """Unacked deliveries return to the queue, in order, redelivered, when their channel closes."""
    conn = ctx.connect()
    ch = conn.channel()
    q = ctx.queue()
    ch.queue_declare(q)
    for i in range(4):
        ch.basic_publish("", q, f"m{i}".encode())
    ch2 = conn.channel()
    got = [ch2.basic_get(q)[2].decode() for _ in range(2)]
    ch2.close()
    return {"got": got, "after": get_all(ch, q)}


@scenario
def scenario_basic_recover(ctx: Ctx) -> Any:
    """basic.recover requeue=true puts unacked messages back (redelivered)."""
    ch = ctx.channel()
    q = ctx.queue()
    ch.queue_declare(q)
    for i in range(3):
        ch.basic_publish("", q, f"m{i}".encode())
    ch.basic_get(q)
    ch.basic_get(q)
    ch.basic_recover(requeue=True)
    return get_all(ch, q)


@scenario
def scenario_reject_and_unknown_tag(ctx: Ctx) -> Any:
    """Acking an unknown or already-acked delivery tag closes the channel with 406."""
    conn = ctx.connect()
    ch = conn.channel()
    q = ctx.queue()
    ch.queue_declare(q)
    ch.basic_publish("", q, b"m")
    method, _p, _b = ch.basic_get(q)
    ch.basic_ack(method.delivery_tag)
    ch.basic_ack(method.delivery_tag)  # double ack: the error arrives asynchronously
    double = attempt(lambda: ch.queue_declare(q, passive=True) and None)
    ch = conn.channel()
    ch.basic_ack(99)
    unknown = attempt(lambda: ch.queue_declare(q, passive=True) and None)
    ch = conn.channel()
    ch.basic_reject(5, requeue=False)
    reject = attempt(lambda: ch.queue_declare(q, passive=True) and None)
    ch = conn.channel()
    ch.basic_nack(3, multiple=True)
    nack_multiple = attempt(lambda: ch.queue_declare(q, passive=True) and None)
    return {"double": double, "unknown": unknown, "reject": reject, "nack_multiple": nack_multiple}


@scenario
def scenario_qos_prefetch(ctx: Ctx) -> Any:
    """basic.qos prefetch_count limits unacked deliveries per consumer; acks release more."""
    conn = ctx.connect()
    ch = conn.channel()
    q = ctx.queue()
    ch.queue_declare(q)
    for i in range(5):
        ch.basic_publish("", q, f"m{i}".encode())
    ch.basic_qos(prefetch_count=2)
    got: list[Any] = []
    ch.basic_consume(q, lambda _c, m, _p, b: got.append([m.delivery_tag, b.decode(), m.redelivered]))
    pump(conn, 0.4)
    first = list(got)
    ch.basic_ack(got[0][0])
    pump(conn, 0.4)
    second = list(got)
    ch.basic_ack(0, multiple=True)
    pump(conn, 0.4)
    return {"first": first, "second": second, "final": got}


@scenario
def scenario_consumer_cancel_and_auto_delete(ctx: Ctx) -> Any:
    """An auto-delete queue disappears when its last consumer cancels (not before the first)."""
    conn, ch, q = ctx.confirmed_queue(auto_delete=True)
    ch.basic_publish("", q, b"kept")
    still_there = method_obs(ch.queue_declare(q, passive=True))
    tag = ch.basic_consume(q, lambda *a: None, auto_ack=True, consumer_tag="ctag-x")
    pump(conn, 0.2)
    ch.basic_cancel(tag)
    ch2 = conn.channel()
    gone = attempt(lambda: ch2.queue_declare(q, passive=True) and "exists")
    return {"before": still_there, "after_cancel": gone}


@scenario
def scenario_consume_unacked_then_cancel(ctx: Ctx) -> Any:
    """Unacked deliveries of a cancelled consumer stay unacked on the channel; ack after cancel works."""
    conn = ctx.connect()
    ch = conn.channel()
    q = ctx.queue()
    ch.queue_declare(q)
    for i in range(3):
        ch.basic_publish("", q, f"m{i}".encode())
    got: list[Any] = []
    ch.basic_consume(q, lambda _c, m, _p, b: got.append([m.delivery_tag, b.decode()]), consumer_tag="c")
    pump(conn, 0.3)
    ch.basic_cancel("c")
    during = method_obs(ch.queue_declare(q, passive=True))
    ch.basic_ack(got[1][0])
    ch.close()
    ch = conn.channel()
    return {"got": got, "during": during, "after": get_all(ch, q)}


@scenario
def scenario_exclusive_queue(ctx: Ctx) -> Any:
    """An exclusive queue is locked to its connection (405) and deleted when that connection closes."""
    owner = ctx.connect()
    other = ctx.connect()
    q = ctx.queue()
    och = owner.channel()
    och.queue_declare(q, exclusive=True)
    results: dict[str, Any] = {}
    for op_name, op in [
        ("passive", lambda c: c.queue_declare(q, passive=True)),
        ("declare", lambda c: c.queue_declare(q, exclusive=True)),
        ("get", lambda c: c.basic_get(q)),
        ("consume", lambda c: c.basic_consume(q, lambda *a: None)),
        ("delete", lambda c: c.queue_delete(q)),
        ("bind", lambda c: c.queue_bind(q, "amq.fanout")),
        ("purge", lambda c: c.queue_purge(q)),
    ]:
        och2 = other.channel()
        results[op_name] = attempt(lambda op=op, c=och2: op(c) and "ok")
    results["owner_redeclare_non_exclusive"] = attempt(lambda: och.queue_declare(q) and "ok")
    owner.close()
    probe = other.channel()
    results["after_owner_closed"] = attempt(lambda: probe.queue_declare(q, passive=True) and "exists")
    return results


@scenario
def scenario_tx_commit_rollback(ctx: Ctx) -> Any:
    """tx: publishes and acks take effect at commit; rollback discards publishes, keeps acks pending."""
    conn = ctx.connect()
    ch = conn.channel()
    q = ctx.queue()
    ch.queue_declare(q)
    ch.basic_publish("", q, b"pre")
    wait_for_count(ch, q, 1)
    ch.tx_select()
    ch.basic_publish("", q, b"rolled-back")
    c1 = ch.queue_declare(q, passive=True).method.message_count
    ch.tx_rollback()
    c2 = ch.queue_declare(q, passive=True).method.message_count
    ch.basic_publish("", q, b"committed")
    ch.tx_commit()
    c3 = ch.queue_declare(q, passive=True).method.message_count
    method, _p, body = ch.basic_get(q)
    ch.basic_ack(method.delivery_tag)
    ch.tx_rollback()
    c4 = ch.queue_declare(q, passive=True).method.message_count
    ch.tx_commit()
    ch.close()
    ch = conn.channel()
    remaining = get_all(ch, q)
    ch.basic_publish("", q, b"x")
    not_tx = attempt(lambda: ch.tx_commit() and "ok")
    ch = conn.channel()
    rb_not_tx = attempt(lambda: ch.tx_rollback() and "ok")
    return {
        "counts": [c1, c2, c3, c4],
        "first": body.decode(),
        "remaining": remaining,
        "commit_not_tx": not_tx,
        "rollback_not_tx": rb_not_tx,
    }


@scenario
def scenario_confirm_and_tx_exclusive(ctx: Ctx) -> Any:
    """A channel cannot be both transactional and in confirm mode (406 both ways)."""
    conn = ctx.connect()
    ch = conn.channel()
    ch.tx_select()
    tx_then_confirm = attempt(lambda: ch.confirm_delivery() or "ok")
    ch = conn.channel()
    ch.confirm_delivery()
    confirm_then_tx = attempt(lambda: ch.tx_select() and "ok")
    ch = conn.channel()
    ch.confirm_delivery()
    again = attempt(lambda: ch.confirm_delivery() or "ok")
    return {"tx_then_confirm": tx_then_confirm, "confirm_then_tx": confirm_then_tx, "confirm_twice": again}


@scenario
def scenario_purge_and_delete_counts(ctx: Ctx) -> Any:
    """queue.purge and queue.delete report the ready message counts; deleting a missing queue is OK."""
    ch = ctx.confirm_channel(ctx.connect())
    q, q2 = ctx.queue("q"), ctx.queue("q2")
    ch.queue_declare(q)
    ch.queue_declare(q2)
    for i in range(4):
        ch.basic_publish("", q, str(i).encode())
        ch.basic_publish("", q2, str(i).encode())
    ch.basic_get(q)  # one unacked: purge leaves it alone
    purge = method_obs(ch.queue_purge(q))
    delete = method_obs(ch.queue_delete(q2))
    missing = attempt(lambda: method_obs(ch.queue_delete(ctx.queue("never"))))
    x_missing = attempt(lambda: method_obs(ch.exchange_delete(ctx.exchange("never"))))
    return {"purge": purge, "delete": delete, "delete_missing": missing, "exchange_delete_missing": x_missing}


@scenario
def scenario_queue_delete_if_unused_if_empty(ctx: Ctx) -> Any:
    """queue.delete if_unused/if_empty refuse with 406 and the exact RabbitMQ text."""
    conn = ctx.connect()
    q = ctx.queue()
    ch = conn.channel()
    ch.queue_declare(q)
    ch.basic_publish("", q, b"m")
    not_empty = attempt(lambda: ch.queue_delete(q, if_empty=True) and "deleted")
    ch = conn.channel()
    cch = conn.channel()
    cch.basic_consume(q, lambda *a: None, consumer_tag="hold")
    in_use = attempt(lambda: ch.queue_delete(q, if_unused=True) and "deleted")
    cch.basic_cancel("hold")
    cch.close()
    ch = conn.channel()
    ch.queue_purge(q)
    ok = attempt(lambda: method_obs(ch.queue_delete(q, if_unused=True, if_empty=True)))
    return {"if_empty": not_empty, "if_unused": in_use, "both_ok": ok}


@scenario
def scenario_exchange_delete_if_unused(ctx: Ctx) -> Any:
    """exchange.delete if_unused refuses while bindings exist (as source), succeeds once unbound."""
    conn = ctx.connect()
    ch = conn.channel()
    x, x2 = ctx.exchange("x"), ctx.exchange("x2")
    q = ctx.queue()
    ch.exchange_declare(x, "direct")
    ch.exchange_declare(x2, "direct")
    ch.queue_declare(q)
    ch.queue_bind(q, x, "k")
    ch.exchange_bind(x, x2, "k")  # x is a destination of x2: does not count as "used" for x
    used = attempt(lambda: ch.exchange_delete(x, if_unused=True) and "deleted")
    ch = conn.channel()
    ch.queue_unbind(q, x, "k")
    as_dest = attempt(lambda: ch.exchange_delete(x, if_unused=True) and "deleted")
    ch = conn.channel() if not ch.is_open else ch
    x2_used = attempt(lambda: ch.exchange_delete(x2, if_unused=True) and "deleted")
    return {"used": used, "as_destination_only": as_dest, "x2_after": x2_used}


@scenario
def scenario_redeclare_equivalence(ctx: Ctx) -> Any:
    """Redeclaring with different type/durable/auto_delete/args gives 406 inequivalent arg texts."""
    conn = ctx.connect()
    x, q = ctx.exchange(), ctx.queue()
    setup = conn.channel()
    setup.exchange_declare(x, "direct")
    setup.queue_declare(q, arguments={"x-message-ttl": 1000})
    out: dict[str, Any] = {}
    cases = {
        "x_same": lambda c: c.exchange_declare(x, "direct"),
        "x_type": lambda c: c.exchange_declare(x, "fanout"),
        "x_durable": lambda c: c.exchange_declare(x, "direct", durable=True),
        "x_auto_delete": lambda c: c.exchange_declare(x, "direct", auto_delete=True),
        "x_internal": lambda c: c.exchange_declare(x, "direct", internal=True),
        "x_args_ignored": lambda c: c.exchange_declare(x, "direct", arguments={"foo": "bar"}),
        "x_ae_changed": lambda c: c.exchange_declare(x, "direct", arguments={"alternate-exchange": "zz"}),
        "x_passive_other_type": lambda c: c.exchange_declare(x, "fanout", passive=True),
        "q_same": lambda c: c.queue_declare(q, arguments={"x-message-ttl": 1000}),
        "q_ttl_changed": lambda c: c.queue_declare(q, arguments={"x-message-ttl": 2000}),
        "q_ttl_missing": lambda c: c.queue_declare(q),
        "q_ttl_type": lambda c: c.queue_declare(q, arguments={"x-message-ttl": "1000"}),
        "q_durable": lambda c: c.queue_declare(q, durable=True, arguments={"x-message-ttl": 1000}),
        "q_auto_delete": lambda c: c.queue_declare(q, auto_delete=True, arguments={"x-message-ttl": 1000}),
        "q_other_arg": lambda c: c.queue_declare(q, arguments={"x-message-ttl": 1000, "x-max-length": 5}),
        "q_unknown_arg": lambda c: c.queue_declare(q, arguments={"x-message-ttl": 1000, "foo": 1}),
        "q_passive_other": lambda c: c.queue_declare(q, passive=True, durable=True),
    }
    for label, op in cases.items():
        ch = conn.channel()
        out[label] = attempt(lambda op=op, ch=ch: op(ch) and "ok")
        if conn.is_closed:
            conn = ctx.connect()
    return out


@scenario
def scenario_default_exchange_rules(ctx: Ctx) -> Any:
    """The default exchange cannot be bound, unbound, deleted or redeclared differently; amq.* reserved."""
    conn = ctx.connect()
    q = ctx.queue()
    conn.channel().queue_declare(q)
    amq_x = ctx.register("amq.custom." + q, "amq_x")
    amq_q = ctx.register("amq.q." + q, "amq_q")
    out: dict[str, Any] = {}
    cases = {
        "bind": lambda c: c.queue_bind(q, "", q),
        "unbind": lambda c: c.queue_unbind(q, "", q),
        "delete": lambda c: c.exchange_delete(""),
        "declare_direct": lambda c: c.exchange_declare("", "direct", durable=True),
        "declare_fanout": lambda c: c.exchange_declare("", "fanout"),
        "passive": lambda c: c.exchange_declare("", passive=True),
        "declare_amq_prefix": lambda c: c.exchange_declare(amq_x, "direct"),
        "passive_amq_prefix": lambda c: c.exchange_declare(amq_x, "direct", passive=True),
        "delete_amq_direct": lambda c: c.exchange_delete("amq.direct"),
        "queue_amq_prefix": lambda c: c.queue_declare(amq_q),
        "e2e_bind_default": lambda c: c.exchange_bind("amq.direct", "", "k"),
        "e2e_bind_to_default": lambda c: c.exchange_bind("", "amq.direct", "k"),
        "bind_amq_direct": lambda c: c.queue_bind(q, "amq.direct", "k"),
    }
    for label, op in cases.items():
        ch = conn.channel()
        out[label] = attempt(lambda op=op, ch=ch: op(ch) and "ok")
        if conn.is_closed:
            conn = ctx.connect()
    conn.channel().queue_unbind(q, "amq.direct", "k")
    return out


@scenario
def scenario_not_found_errors(ctx: Ctx) -> Any:
    """404 texts for passive declares, binds, consume, get, purge against missing objects."""
    conn = ctx.connect()
    q, x = ctx.queue("q"), ctx.exchange("x")
    mq, mx = ctx.queue("missing_q"), ctx.exchange("missing_x")
    setup = conn.channel()
    setup.queue_declare(q)
    setup.exchange_declare(x, "direct")
    cases = {
        "passive_queue": lambda c: c.queue_declare(mq, passive=True),
        "passive_exchange": lambda c: c.exchange_declare(mx, passive=True),
        "bind_missing_queue": lambda c: c.queue_bind(mq, x, "k"),
        "bind_missing_exchange": lambda c: c.queue_bind(q, mx, "k"),
        "bind_both_missing": lambda c: c.queue_bind(mq, mx, "k"),
        "unbind_missing_exchange": lambda c: c.queue_unbind(q, mx, "k"),
        "e2e_missing_src": lambda c: c.exchange_bind(x, mx, "k"),
        "e2e_missing_dst": lambda c: c.exchange_bind(mx, x, "k"),
        "consume_missing": lambda c: c.basic_consume(mq, lambda *a: None),
        "get_missing": lambda c: c.basic_get(mq),
        "purge_missing": lambda c: c.queue_purge(mq),
    }
    out: dict[str, Any] = {}
    for label, op in cases.items():
        ch = conn.channel()
        out[label] = attempt(lambda op=op, ch=ch: op(ch) and "ok")
    ch = conn.channel()
    ch.basic_publish(mx, "k", b"lost")
    out["publish_missing_exchange"] = attempt(lambda: ch.queue_declare(q, passive=True) and "ok")
    return out


@scenario
def scenario_consumer_tag_reuse(ctx: Ctx) -> Any:
    """Reusing a consumer tag on one channel is a 530 NOT_ALLOWED connection error."""
    ch = ctx.channel()
    q = ctx.queue()
    ch.queue_declare(q)
    first = attempt(lambda: ch.basic_consume(q, lambda *a: None, consumer_tag="dup"))
    # pika refuses a duplicate tag client-side, so send the frame on a raw connection instead
    from pamqp import commands

    raw = ctx.raw()
    raw.open_channel(1)
    raw.call(1, commands.Basic.Consume(queue=q, consumer_tag="dup"), commands.Basic.ConsumeOk)
    raw.send(1, commands.Basic.Consume(queue=q, consumer_tag="dup"))
    from tests.differential_support import frame_obs

    frames = [frame_obs(c, f) for c, f in raw.frames_until_quiet()]
    return {"first": first, "raw_frames": frames}


@scenario
def scenario_invalid_queue_arguments(ctx: Ctx) -> Any:
    """Queue arguments of the wrong type or range are refused with 406 'invalid arg' texts."""
    cases: dict[str, dict[str, Any]] = {
        "max_length_str": {"x-max-length": "ten"},
        "max_length_neg": {"x-max-length": -1},
        "ttl_neg": {"x-message-ttl": -5},
        "ttl_str": {"x-message-ttl": "5"},
        "expires_zero": {"x-expires": 0},
        "overflow_bad": {"x-overflow": "drop-tail"},
        "dlx_int": {"x-dead-letter-exchange": 5},
        "dlrk_without_dlx": {"x-dead-letter-routing-key": "rk"},
        "max_priority_big": {"x-max-priority": 300},
        "queue_type_bad": {"x-queue-type": "weird"},
        "unknown_x_arg": {"x-whatever": 1},
        "max_length_bytes_float": {"x-max-length-bytes": Decimal("1.5")},
    }
    return declare_each(ctx, cases)


@scenario
def scenario_user_id_validation(ctx: Ctx) -> Any:
    """basic.publish with a user_id that is not the authenticated user closes the channel with 406."""
    ch = ctx.channel()
    q = ctx.queue()
    ch.queue_declare(q)
    ch.basic_publish("", q, b"ok", pika.BasicProperties(user_id="guest"))
    ok = wait_for_count(ch, q, 1)
    ch.basic_publish("", q, b"bad", pika.BasicProperties(user_id="mallory"))
    bad = attempt(lambda: ch.queue_declare(q, passive=True) and "ok")
    return {"count": ok, "mismatch": bad}


@scenario
def scenario_exchange_internal_and_unknown_type(ctx: Ctx) -> Any:
    """Publishing to an internal exchange is 403; an unknown exchange type is a 503 connection error."""
    conn = ctx.connect()
    ch = conn.channel()
    x = ctx.exchange()
    ch.exchange_declare(x, "fanout", internal=True)
    ch.basic_publish(x, "", b"m")
    internal = attempt(lambda: ch.exchange_declare(x, passive=True) and "ok")
    ch = conn.channel()
    unknown = attempt(lambda: ch.exchange_declare(ctx.exchange("unknown"), "x-no-such-type") and "ok")
    return {"internal": internal, "unknown_type": unknown}


@scenario
def scenario_get_auto_ack_and_redelivery(ctx: Ctx) -> Any:
    """basic.get with no-ack removes at once; without ack a re-get after recover is redelivered."""
    ch = ctx.channel()
    q = ctx.queue()
    ch.queue_declare(q)
    for i in range(3):
        ch.basic_publish("", q, f"m{i}".encode())
    auto = ch.basic_get(q, auto_ack=True)
    manual = ch.basic_get(q)
    ch.basic_recover(requeue=True)
    time.sleep(0.05)
    return {
        "auto": [auto[0].delivery_tag, auto[0].message_count, auto[2].decode()],
        "manual": [manual[0].delivery_tag, manual[0].message_count, manual[2].decode()],
        "after": get_all(ch, q),
    }


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("name", "target"), registry.params())
def test_differential(name: str, target: str, request: pytest.FixtureRequest) -> None:
    run_differential(registry, name, target, request)
