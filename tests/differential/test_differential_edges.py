"""Differential scenarios on less-trodden paths: bind/unbind errors, argument validation corners,
exclusive consumers, tag handling, qos/flow/recover corners, transactions, last-declared-queue
shorthand, alternate-exchange loops, dead-lettering corners, channel 0 misuse.

RabbitMQ 3.10.8 is the truth; hashbroker must produce the same observation.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pika
import pika.exceptions
import pytest
from pamqp import commands

from tests.differential_support import (
    Ctx,
    RawAmqp,
    Registry,
    attempt,
    attempt_each,
    bodies,
    declare_each,
    frame_obs,
    get_all,
    jsonable,
    method_obs,
    publish_frames,
    pump,
    run_differential,
    wait_for_count,
    x_death_obs,
)

registry = Registry()
scenario = registry.scenario


def _converse(raw: RawAmqp, quiet: float = 0.6) -> list[Any]:
    """The server's frames until it goes quiet; closes are answered politely."""
    out: list[Any] = []
    for channel, value in raw.frames_until_quiet(quiet):
        out.append(frame_obs(channel, value))
        if isinstance(value, commands.Connection.Close):
            raw.send(0, commands.Connection.CloseOk())
        elif isinstance(value, commands.Channel.Close):
            raw.send(channel, commands.Channel.CloseOk())
    return out


@scenario
def scenario_exchange_unbind_errors(ctx: Ctx) -> Any:
    """exchange.unbind: missing source/destination are 404; a binding that does not exist is ok."""
    x1, x2 = ctx.exchange("x1"), ctx.exchange("x2")
    mx = ctx.exchange("missing")
    setup = ctx.channel()
    setup.exchange_declare(x1, "direct")
    setup.exchange_declare(x2, "direct")
    return attempt_each(
        ctx,
        {
            "unbind_not_bound": lambda c: c.exchange_unbind(x1, x2, "k"),
            "unbind_missing_src": lambda c: c.exchange_unbind(x1, mx, "k"),
            "unbind_missing_dst": lambda c: c.exchange_unbind(mx, x1, "k"),
            "unbind_both_missing": lambda c: c.exchange_unbind(mx, ctx.exchange("missing2"), "k"),
            "unbind_default_src": lambda c: c.exchange_unbind(x1, "", "k"),
            "unbind_default_dst": lambda c: c.exchange_unbind("", x1, "k"),
            "bind_self": lambda c: c.exchange_bind(x1, x1, "k"),
            "unbind_self": lambda c: c.exchange_unbind(x1, x1, "k"),
        },
    )


@scenario
def scenario_queue_unbind_errors(ctx: Ctx) -> Any:
    """queue.unbind: missing queue/exchange 404 texts; a non-existent binding is ok."""
    x, q = ctx.exchange("x"), ctx.queue("q")
    mq, mx = ctx.queue("missing_q"), ctx.exchange("missing_x")
    setup = ctx.channel()
    setup.exchange_declare(x, "direct")
    setup.queue_declare(q)
    return attempt_each(
        ctx,
        {
            "not_bound": lambda c: c.queue_unbind(q, x, "nope"),
            "missing_queue": lambda c: c.queue_unbind(mq, x, "k"),
            "both_missing": lambda c: c.queue_unbind(mq, mx, "k"),
            "args_mismatch": lambda c: c.queue_unbind(q, x, "k", arguments={"a": 1}),
        },
    )


@scenario
def scenario_internal_exchange_via_e2e(ctx: Ctx) -> Any:
    """An internal exchange receives through an exchange binding; direct publishes to it are 403."""
    conn = ctx.connect()
    ch = conn.channel()
    src, internal = ctx.exchange("src"), ctx.exchange("internal")
    q = ctx.queue()
    ch.exchange_declare(src, "fanout")
    ch.exchange_declare(internal, "fanout", internal=True)
    ch.queue_declare(q)
    ch.queue_bind(q, internal)
    ch.exchange_bind(internal, src)
    ch.basic_publish(src, "", b"via-src")
    wait_for_count(ch, q, 1)
    ch.basic_publish(internal, "", b"direct")
    refused = attempt(lambda: ch.queue_declare(q, passive=True) and "ok")
    ch = conn.channel()
    passive = attempt(lambda: ch.exchange_declare(internal, "fanout", passive=True) and "ok")
    redeclare_not_internal = attempt(lambda: ch.exchange_declare(internal, "fanout") and "ok")
    return {
        "q": bodies(conn.channel(), q),
        "direct": refused,
        "passive": passive,
        "redeclare": redeclare_not_internal,
    }


@scenario
def scenario_queue_argument_corners(ctx: Ctx) -> Any:
    """More x-arguments of the wrong type or range (beyond the basic invalid-argument scenario)."""
    cases: dict[str, dict[str, Any]] = {
        "ttl_decimal": {"x-message-ttl": Decimal("1.5")},
        "ttl_huge": {"x-message-ttl": 2**40},
        "ttl_bool": {"x-message-ttl": True},
        "expires_neg": {"x-expires": -1},
        "expires_str": {"x-expires": "1000"},
        "max_length_zero": {"x-max-length": 0},
        "max_length_bytes_neg": {"x-max-length-bytes": -1},
        "priority_neg": {"x-max-priority": -1},
        "priority_str": {"x-max-priority": "5"},
        "priority_255": {"x-max-priority": 255},
        "priority_256": {"x-max-priority": 256},
        "priority_zero": {"x-max-priority": 0},
        "overflow_int": {"x-overflow": 1},
        "overflow_dlx": {"x-overflow": "reject-publish-dlx"},
        "queue_mode_bad": {"x-queue-mode": "fast"},
        "queue_mode_lazy": {"x-queue-mode": "lazy"},
        "dlrk_int": {"x-dead-letter-exchange": "x", "x-dead-letter-routing-key": 5},
        "sac_str": {"x-single-active-consumer": "yes"},
        "queue_type_classic": {"x-queue-type": "classic"},
        "queue_type_int": {"x-queue-type": 1},
        "master_locator_bad": {"x-queue-master-locator": "nowhere"},
    }
    return declare_each(ctx, cases)


@scenario
def scenario_quorum_and_stream_declare_rules(ctx: Ctx) -> Any:
    """Quorum/stream queues refuse non-durable, exclusive and auto-delete declarations."""
    cases = {
        "quorum_non_durable": lambda c: c.queue_declare(
            ctx.queue("qq1"), arguments={"x-queue-type": "quorum"}
        ),
        "quorum_exclusive": lambda c: c.queue_declare(
            ctx.queue("qq2"), durable=True, exclusive=True, arguments={"x-queue-type": "quorum"}
        ),
        "quorum_auto_delete": lambda c: c.queue_declare(
            ctx.queue("qq3"), durable=True, auto_delete=True, arguments={"x-queue-type": "quorum"}
        ),
        "stream_non_durable": lambda c: c.queue_declare(
            ctx.queue("sq1"), arguments={"x-queue-type": "stream"}
        ),
    }
    qq = {"x-queue-type": "quorum"}
    sq = {"x-queue-type": "stream"}
    cases.update(
        {
            "quorum_all_three": lambda c: c.queue_declare(
                ctx.queue("qq4"), exclusive=True, auto_delete=True, arguments=qq
            ),
            "quorum_non_durable_exclusive": lambda c: c.queue_declare(
                ctx.queue("qq5"), exclusive=True, arguments=qq
            ),
            "quorum_unsupported_before_property": lambda c: c.queue_declare(
                ctx.queue("qq6"), auto_delete=True, arguments={**qq, "x-queue-mode": "lazy"}
            ),
            "quorum_first_unsupported_wins": lambda c: c.queue_declare(
                ctx.queue("qq7"), arguments={**qq, "x-max-priority": 2, "x-queue-mode": "lazy"}
            ),
            "quorum_value_check": lambda c: c.queue_declare(
                ctx.queue("qq8"), arguments={**qq, "x-message-ttl": -1}
            ),
            "quorum_supported_arg": lambda c: c.queue_declare(
                ctx.queue("qq9"), arguments={**qq, "x-delivery-limit": 5, "x-max-in-memory-length": 3}
            ),
            "stream_unsupported_before_value": lambda c: c.queue_declare(
                ctx.queue("sq2"), durable=True, arguments={**sq, "x-max-priority": 300}
            ),
            "stream_exclusive": lambda c: c.queue_declare(
                ctx.queue("sq3"), durable=True, exclusive=True, arguments=sq
            ),
            "stream_ttl": lambda c: c.queue_declare(ctx.queue("sq4"), arguments={**sq, "x-message-ttl": 5}),
        }
    )
    return attempt_each(ctx, cases)


@scenario
def scenario_master_locator_crash(ctx: Ctx) -> Any:
    """An unknown x-queue-master-locator crashes the classic queue declaration (541, no queue made);
    an exclusive queue never consults the locator."""
    q = ctx.queue()
    raw = ctx.raw()
    raw.open_channel(1)
    raw.send(1, commands.Queue.Declare(queue=q, arguments={"x-queue-master-locator": "nowhere"}))
    crash = _converse(raw)
    out = attempt_each(
        ctx,
        {
            "after_crash": lambda c: c.queue_declare(q, passive=True),
            "int_locator": lambda c: c.queue_declare(q, arguments={"x-queue-master-locator": 1}),
            "exclusive": lambda c: c.queue_declare(
                q, exclusive=True, arguments={"x-queue-master-locator": "zz"}
            ),
            "valid": lambda c: c.queue_declare(
                ctx.queue("ok"), arguments={"x-queue-master-locator": "random"}
            ),
        },
    )
    return {"raw": crash, **out}


@scenario
def scenario_exclusive_consumer(ctx: Ctx) -> Any:
    """basic.consume exclusive: refused (403) when other consumers exist, and blocks later consumers."""
    conn = ctx.connect()
    q, q2 = ctx.queue("q"), ctx.queue("q2")
    ch = conn.channel()
    ch.queue_declare(q)
    ch.queue_declare(q2)
    ch.basic_consume(q, lambda *a: None, exclusive=True, consumer_tag="excl")
    ch2 = conn.channel()
    second = attempt(lambda: ch2.basic_consume(q, lambda *a: None, consumer_tag="second") and "ok")
    ch3 = conn.channel()
    ch3.basic_consume(q2, lambda *a: None, consumer_tag="plain")
    ch4 = conn.channel()
    excl_after = attempt(lambda: ch4.basic_consume(q2, lambda *a: None, exclusive=True) and "ok")
    ch5 = conn.channel()
    get_ok = attempt(lambda: ch5.basic_get(q)[0] is None and "empty")
    declare = method_obs(ch5.queue_declare(q, passive=True))
    return {"second": second, "exclusive_after": excl_after, "get": get_ok, "declare": declare}


@scenario
def scenario_server_named_queue_other_connection(ctx: Ctx) -> Any:
    """A server-named (exclusive) queue is locked to its connection: another connection gets 405."""
    och = ctx.channel()
    name = och.queue_declare("", exclusive=True).method.queue
    ctx.register(name, "gen")
    shared = och.queue_declare("", exclusive=False).method.queue
    ctx.register(shared, "gen_shared")
    ctx.queues.append(shared)
    cases = {
        "passive": lambda c: c.queue_declare(name, passive=True),
        "redeclare": lambda c: c.queue_declare(name, exclusive=True),
        "shared_passive": lambda c: c.queue_declare(shared, passive=True),
        "shared_redeclare": lambda c: c.queue_declare(shared),
        "shared_redeclare_exclusive": lambda c: c.queue_declare(shared, exclusive=True),
    }
    return attempt_each(ctx, cases, ctx.connect(), observe=method_obs)


@scenario
def scenario_last_declared_queue_shorthand(ctx: Ctx) -> Any:
    """An empty queue name means the channel's last declared queue (bind, get, purge, consume, delete)."""
    conn = ctx.connect()
    fresh = conn.channel()
    x = ctx.exchange()
    fresh.exchange_declare(x, "fanout")
    cases = {
        "bind_none": lambda c: c.queue_bind("", x),
        "get_none": lambda c: c.basic_get(""),
        "purge_none": lambda c: c.queue_purge(""),
        "delete_none": lambda c: c.queue_delete(""),
        "consume_none": lambda c: c.basic_consume("", lambda *a: None),
    }
    out = attempt_each(ctx, cases, conn)
    ch = ctx.confirm_channel(conn)
    q = ctx.queue()
    ch.queue_declare(q)
    ch.queue_bind("", x)
    ch.basic_publish(x, "", b"m1")
    ch.basic_publish(x, "", b"m2")
    got = ch.basic_get("", auto_ack=True)
    out["get_last"] = [got[0].message_count, got[2].decode()]
    out["purge_last"] = method_obs(ch.queue_purge(""))
    out["unbind_last"] = attempt(lambda: ch.queue_unbind("", x) and "ok")
    out["delete_last"] = method_obs(ch.queue_delete(""))
    out["after_delete"] = attempt(lambda: ch.basic_get("") and "ok")
    return out


@scenario
def scenario_ack_multiple_corners(ctx: Ctx) -> Any:
    """ack multiple with tag 0 acks all; ack multiple past the last tag is 406; ack 0 single is 406."""
    conn = ctx.connect()
    q = ctx.queue()
    ch = ctx.confirm_channel(conn)
    ch.queue_declare(q)
    for i in range(4):
        ch.basic_publish("", q, f"m{i}".encode())
    ch2 = conn.channel()
    tags = [ch2.basic_get(q)[0].delivery_tag for _ in range(4)]
    ch2.basic_ack(2, multiple=True)
    mid = method_obs(ch2.queue_declare(q, passive=True))
    ch2.basic_ack(0, multiple=True)
    all_acked = attempt(lambda: ch2.queue_declare(q, passive=True) and "ok")
    ch2.basic_ack(0, multiple=True)  # nothing outstanding: still fine
    empty_multi = attempt(lambda: ch2.queue_declare(q, passive=True) and "ok")
    ch2.basic_ack(0)
    zero_single = attempt(lambda: ch2.queue_declare(q, passive=True) and "ok")
    ch3 = conn.channel()
    ch.basic_publish("", q, b"late")
    t = ch3.basic_get(q)[0].delivery_tag
    ch3.basic_ack(t + 5, multiple=True)
    beyond = attempt(lambda: ch3.queue_declare(q, passive=True) and "ok")
    ch4 = conn.channel()
    after = get_all(ch4, q)
    return {
        "tags": tags,
        "mid": mid,
        "all": all_acked,
        "empty_multi": empty_multi,
        "zero_single": zero_single,
        "beyond": beyond,
        "after": after,
    }


@scenario
def scenario_ack_on_no_ack_delivery(ctx: Ctx) -> Any:
    """Acking a delivery that was sent with no-ack (auto_ack) is an unknown delivery tag (406)."""
    conn, ch, q = ctx.confirmed_queue()
    ch.basic_publish("", q, b"m")
    method = ch.basic_get(q, auto_ack=True)[0]
    ch.basic_ack(method.delivery_tag)
    ack = attempt(lambda: ch.queue_declare(q, passive=True) and "ok")
    ch = conn.channel()
    ch.basic_publish("", q, b"n")
    wait_for_count(ch, q, 1)
    method = ch.basic_get(q)[0]
    ch.basic_reject(method.delivery_tag, requeue=True)
    ch.basic_reject(method.delivery_tag, requeue=True)
    double_reject = attempt(lambda: ch.queue_declare(q, passive=True) and "ok")
    return {"tag": method.delivery_tag, "ack_no_ack": ack, "double_reject": double_reject}


@scenario
def scenario_qos_corners(ctx: Ctx) -> Any:
    """basic.qos: prefetch_size != 0 is refused; global=true and prefetch 0 are accepted."""
    raw = ctx.raw()
    raw.open_channel(1)
    raw.send(1, commands.Basic.Qos(prefetch_count=5, global_=True))
    global_ok = _converse(raw, 0.4)
    raw.send(1, commands.Basic.Qos(prefetch_count=0))
    zero = _converse(raw, 0.4)
    raw.send(1, commands.Basic.Qos(prefetch_size=1000, prefetch_count=1))
    size = _converse(raw)
    return {"global": global_ok, "zero": zero, "prefetch_size": size}


@scenario
def scenario_channel_flow(ctx: Ctx) -> Any:
    """channel.flow active=true is answered with flow-ok; active=false is refused."""
    raw = ctx.raw()
    raw.open_channel(1)
    raw.send(1, commands.Channel.Flow(active=True))
    on = _converse(raw, 0.4)
    raw.send(1, commands.Channel.Flow(active=False))
    off = _converse(raw)
    return {"active": on, "inactive": off}


@scenario
def scenario_recover_no_requeue(ctx: Ctx) -> Any:
    """basic.recover requeue=false redelivers unacked consumer messages; recover-async; get messages."""
    conn, ch, q = ctx.confirmed_queue(2)
    got: list[Any] = []
    ch.basic_consume(
        q, lambda _c, m, _p, b: got.append([m.delivery_tag, m.redelivered, b.decode()]), consumer_tag="c"
    )
    pump(conn, 0.3)
    first = list(got)
    no_requeue = attempt(lambda: ch.basic_recover(requeue=False) and "ok")
    raw = ctx.raw()
    raw.open_channel(1)
    raw.send(1, commands.Basic.RecoverAsync(requeue=True))
    recover_async = _converse(raw)
    return {"first": first, "recover_no_requeue": no_requeue, "recover_async": recover_async}


@scenario
def scenario_tx_error_corners(ctx: Ctx) -> Any:
    """In tx mode: publish to a missing exchange fails at publish; unknown ack tag fails at ack;
    tx.select twice is ok; unroutable mandatory is returned at commit."""
    conn = ctx.connect()
    q = ctx.queue()
    mx = ctx.exchange("missing")
    ch = conn.channel()
    ch.queue_declare(q)
    ch.tx_select()
    ch.basic_publish(mx, "k", b"lost")
    missing = attempt(lambda: ch.tx_commit() and "ok")
    ch = conn.channel()
    ch.tx_select()
    ch.basic_ack(7)
    unknown = attempt(lambda: ch.tx_commit() and "ok")
    ch = conn.channel()
    ch.tx_select()
    twice = attempt(lambda: ch.tx_select() and "ok")
    returned: list[Any] = []
    ch.add_on_return_callback(lambda _c, m, _p, b: returned.append([m.reply_code, m.reply_text, b.decode()]))
    ch.basic_publish("", ctx.queue("nowhere"), b"unroutable", mandatory=True)
    pump(conn, 0.3)
    before_commit = list(returned)
    ch.tx_commit()
    pump(conn, 0.3)
    return {
        "missing_exchange": missing,
        "unknown_ack": unknown,
        "select_twice": twice,
        "returned_before_commit": before_commit,
        "returned_after_commit": returned,
    }


@scenario
def scenario_tx_reject_rollback(ctx: Ctx) -> Any:
    """tx: a requeueing reject is held until commit; rollback keeps the message unacked."""
    conn = ctx.connect()
    q = ctx.queue()
    ch = ctx.confirm_channel(conn)
    ch.queue_declare(q)
    ch.basic_publish("", q, b"a")
    ch.basic_publish("", q, b"b")
    tch = conn.channel()
    tch.tx_select()
    m1 = tch.basic_get(q)[0]
    m2 = tch.basic_get(q)[0]
    tch.basic_reject(m1.delivery_tag, requeue=True)
    tch.basic_nack(m2.delivery_tag, requeue=True)
    before = method_obs(ch.queue_declare(q, passive=True))
    tch.tx_rollback()
    rolled = method_obs(ch.queue_declare(q, passive=True))
    tch.basic_reject(m1.delivery_tag, requeue=True)
    tch.tx_commit()
    committed = method_obs(ch.queue_declare(q, passive=True))
    tch.close()
    return {"before": before, "rolled": rolled, "committed": committed, "after": get_all(ch, q)}


@scenario
def scenario_alternate_exchange_loop(ctx: Ctx) -> Any:
    """Two exchanges naming each other as AE: an unroutable message is dropped, no loop; mandatory
    returns only when the AE chain also fails."""
    conn = ctx.connect()
    ch = conn.channel()
    a, b, c = ctx.exchange("a"), ctx.exchange("b"), ctx.exchange("c")
    q, qc = ctx.queue("q"), ctx.queue("qc")
    ch.exchange_declare(a, "direct", arguments={"alternate-exchange": b})
    ch.exchange_declare(b, "direct", arguments={"alternate-exchange": a})
    ch.exchange_declare(c, "direct", arguments={"alternate-exchange": a})
    ch.queue_declare(q)
    ch.queue_declare(qc)
    ch.queue_bind(q, b, "via-b")
    ch.queue_bind(qc, c, "own")
    returned: list[Any] = []
    ch.add_on_return_callback(
        lambda _c, m, _p, body: returned.append([m.reply_code, m.exchange, body.decode()])
    )
    ch.basic_publish(a, "via-b", b"a-to-b", mandatory=True)
    ch.basic_publish(a, "nowhere", b"loop", mandatory=True)
    ch.basic_publish(c, "via-b", b"c-a-b", mandatory=True)
    ch.basic_publish(c, "nowhere", b"c-loop", mandatory=True)
    pump(conn, 0.4)
    return {"q": bodies(ch, q), "qc": bodies(ch, qc), "returned": returned}


@scenario
def scenario_alternate_exchange_type_and_internal(ctx: Ctx) -> Any:
    """An AE of any type routes with the original routing key; an internal AE still receives."""
    ch = ctx.channel()
    x, ae = ctx.exchange("x"), ctx.exchange("ae")
    q1, q2 = ctx.queue("q1"), ctx.queue("q2")
    ch.exchange_declare(ae, "topic", internal=True)
    ch.exchange_declare(x, "fanout", arguments={"alternate-exchange": ae})
    ch.queue_declare(q1)
    ch.queue_declare(q2)
    ch.queue_bind(q1, ae, "a.*")
    ch.basic_publish(x, "a.b", b"fanout-no-bindings")
    ch.queue_bind(q2, x)
    ch.basic_publish(x, "a.c", b"fanout-bound")
    ch.basic_publish(x, "zz", b"again")
    return {"q1": bodies(ch, q1), "q2": bodies(ch, q2)}


@scenario
def scenario_dead_letter_missing_exchange(ctx: Ctx) -> Any:
    """A dead letter to a missing DLX is dropped silently; the channel stays open."""
    _conn, ch, q = ctx.confirmed_queue(arguments={"x-dead-letter-exchange": ctx.exchange("missing")})
    ch.basic_publish("", q, b"m")
    method = ch.basic_get(q)[0]
    ch.basic_reject(method.delivery_tag, requeue=False)
    return {"after": method_obs(ch.queue_declare(q, passive=True)), "open": ch.is_open}


@scenario
def scenario_dead_letter_cycle_dropped(ctx: Ctx) -> Any:
    """An expiry cycle q -> dlx -> q is dropped by RabbitMQ on the second pass (no rejection involved);
    with a rejection in the cycle it continues and x-death counts grow."""
    conn = ctx.connect()
    ch = ctx.confirm_channel(conn)
    q, q2 = ctx.queue("ttlq"), ctx.queue("rq")
    ch.queue_declare(
        q, arguments={"x-message-ttl": 50, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": q}
    )
    ch.basic_publish("", q, b"expires")
    import time

    time.sleep(0.6)
    ttl_cycle = method_obs(ch.queue_declare(q, passive=True))
    ch.queue_declare(q2, arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": q2})
    ch.basic_publish("", q2, b"rejected")
    deaths = []
    for _ in range(2):
        wait_for_count(ch, q2, 1)
        method, props, _b = ch.basic_get(q2)
        deaths.append(x_death_obs(props.headers))
        ch.basic_reject(method.delivery_tag, requeue=False)
    wait_for_count(ch, q2, 1)
    _m, props, _b = ch.basic_get(q2, auto_ack=True)
    deaths.append(x_death_obs(props.headers))
    return {"ttl_cycle": ttl_cycle, "deaths": deaths}


@scenario
def scenario_headers_void_and_bad_match(ctx: Ctx) -> Any:
    """Headers bindings with void values match a void header; an invalid x-match is refused."""
    conn = ctx.connect()
    ch = conn.channel()
    x = ctx.exchange()
    ch.exchange_declare(x, "headers")
    qv, qany = ctx.queue("void"), ctx.queue("any")
    ch.queue_declare(qv)
    ch.queue_declare(qany)
    ch.queue_bind(qv, x, "", arguments={"x-match": "all", "v": None})
    ch.queue_bind(qany, x, "", arguments={"x-match": "any", "v": None, "w": "1"})
    for body, headers in {
        "void": {"v": None},
        "str": {"v": "x"},
        "w": {"w": "1"},
        "none": {},
    }.items():
        ch.basic_publish(x, "", body.encode(), pika.BasicProperties(headers=headers))
    routed = {"void": bodies(ch, qv), "any": bodies(ch, qany)}
    bad = attempt(lambda: ch.queue_bind(qv, x, "", arguments={"x-match": "some"}) and "ok")
    ch = conn.channel()
    bad_type = attempt(lambda: ch.queue_bind(qv, x, "", arguments={"x-match": 1}) and "ok")
    ch = conn.channel()
    all_with_x = attempt(lambda: ch.queue_bind(qv, x, "", arguments={"x-match": "all-with-x"}) and "ok")
    return {"routed": routed, "bad_match": bad, "bad_type": bad_type, "all_with_x": all_with_x}


@scenario
def scenario_channel_zero_misuse(ctx: Ctx) -> Any:
    """A channel-class method on channel 0 is a connection error."""
    raw = ctx.raw()
    raw.send(0, commands.Queue.Declare(queue="", exclusive=True))
    declare = _converse(raw)
    raw2 = ctx.raw()
    raw2.send(0, commands.Channel.Open())
    open0 = _converse(raw2)
    return {"declare_on_0": declare, "open_on_0": open0}


@scenario
def scenario_connection_method_on_channel(ctx: Ctx) -> Any:
    """A connection-class method on a non-zero channel is a connection error."""
    raw = ctx.raw()
    raw.open_channel(1)
    raw.send(1, commands.Connection.Close(reply_code=200, reply_text="x", class_id=0, method_id=0))
    return _converse(raw)


@scenario
def scenario_cancel_unknown_and_reused_tag(ctx: Ctx) -> Any:
    """basic.cancel of an unknown tag is answered cancel-ok; a cancelled tag can be reused."""
    raw = ctx.raw()
    raw.open_channel(1)
    q = ctx.queue()
    raw.call(1, commands.Queue.Declare(queue=q), commands.Queue.DeclareOk)
    raw.send(1, commands.Basic.Cancel(consumer_tag="nope"))
    unknown = _converse(raw, 0.4)
    raw.call(1, commands.Basic.Consume(queue=q, consumer_tag="t"), commands.Basic.ConsumeOk)
    raw.call(1, commands.Basic.Cancel(consumer_tag="t"), commands.Basic.CancelOk)
    raw.send(1, commands.Basic.Consume(queue=q, consumer_tag="t"))
    reuse = _converse(raw, 0.4)
    return {"unknown": unknown, "reuse": reuse}


@scenario
def scenario_mandatory_default_exchange_and_unbound(ctx: Ctx) -> Any:
    """mandatory to a missing queue via the default exchange and to an exchange with no bindings:
    basic.return 312 NO_ROUTE with exchange and routing key."""
    conn = ctx.connect()
    ch = conn.channel()
    x = ctx.exchange()
    ch.exchange_declare(x, "topic")
    returned: list[Any] = []
    ch.add_on_return_callback(
        lambda _c, m, _p, b: returned.append(
            [m.reply_code, m.reply_text, m.exchange, m.routing_key, b.decode()]
        )
    )
    missing = ctx.queue("missing")
    ch.basic_publish("", missing, b"default", mandatory=True)
    ch.basic_publish(x, "a.b", b"topic", mandatory=True)
    ch.basic_publish("amq.direct", "none", b"amq", mandatory=True)
    ch.basic_publish(x, "a.b", b"not-mandatory")
    pump(conn, 0.4)
    return returned


@scenario
def scenario_auto_delete_exchange(ctx: Ctx) -> Any:
    """An auto-delete exchange goes away when its last binding is removed (queue or exchange unbind)."""
    conn = ctx.connect()
    ch = conn.channel()
    x, x2, dst = ctx.exchange("ad"), ctx.exchange("ad2"), ctx.exchange("dst")
    q = ctx.queue()
    ch.exchange_declare(x, "direct", auto_delete=True)
    ch.exchange_declare(x2, "direct", auto_delete=True)
    ch.exchange_declare(dst, "direct")
    ch.queue_declare(q)
    unbound_exists = attempt(lambda: ch.exchange_declare(x, passive=True) and "exists")
    ch.queue_bind(q, x, "a")
    ch.queue_bind(q, x, "b")
    ch.queue_unbind(q, x, "a")
    one_left = attempt(lambda: ch.exchange_declare(x, passive=True) and "exists")
    ch.queue_unbind(q, x, "b")
    gone = attempt(lambda: ch.exchange_declare(x, passive=True) and "exists")
    ch = conn.channel()
    ch.exchange_bind(dst, x2, "k")
    ch.exchange_unbind(dst, x2, "k")
    e2e_gone = attempt(lambda: ch.exchange_declare(x2, passive=True) and "exists")
    ch = conn.channel()
    ch.exchange_declare(x, "direct", auto_delete=True)
    ch.queue_bind(q, x, "c")
    ch.queue_delete(q)
    queue_deleted = attempt(lambda: ch.exchange_declare(x, passive=True) and "exists")
    return {
        "no_bindings_yet": unbound_exists,
        "one_left": one_left,
        "after_last_unbind": gone,
        "after_e2e_unbind": e2e_gone,
        "after_queue_delete": queue_deleted,
    }


@scenario
def scenario_max_length_zero(ctx: Ctx) -> Any:
    """x-max-length 0: drop-head drops every message (dead-lettered); reject-publish nacks."""
    conn = ctx.connect()
    ch = ctx.confirm_channel(conn)
    q, q2, dlq = ctx.queue("dh"), ctx.queue("rp"), ctx.queue("dlq")
    ch.queue_declare(dlq)
    ch.queue_declare(
        q, arguments={"x-max-length": 0, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}
    )
    ch.queue_declare(q2, arguments={"x-max-length": 0, "x-overflow": "reject-publish"})
    ch.basic_publish("", q, b"dropped")
    try:
        ch.basic_publish("", q2, b"rejected")
        outcome = "ack"
    except pika.exceptions.NackError:
        outcome = "nack"
    wait_for_count(ch, dlq, 1)
    _m, props, body = ch.basic_get(dlq, auto_ack=True)
    return {
        "q": method_obs(ch.queue_declare(q, passive=True)),
        "reject_publish": outcome,
        "dead": [body.decode() if body else None, x_death_obs(props.headers if props else None)],
    }


@scenario
def scenario_cc_bcc_sender_selected(ctx: Ctx) -> Any:
    """CC/BCC headers route to extra keys on direct/topic exchanges; BCC is stripped from the copy;
    a CC that is not an array is an invalid message (406)."""
    conn = ctx.connect()
    ch = ctx.confirm_channel(conn)
    x = ctx.exchange()
    ch.exchange_declare(x, "topic")
    qa, qb, qc = ctx.queue("a"), ctx.queue("b"), ctx.queue("c")
    for q, key in ((qa, "a.*"), (qb, "b"), (qc, "c")):
        ch.queue_declare(q)
        ch.queue_bind(q, x, key)
    ch.basic_publish(x, "a.1", b"cc", pika.BasicProperties(headers={"CC": ["b", "c"]}))
    ch.basic_publish(x, "zz", b"bcc", pika.BasicProperties(headers={"BCC": ["b"], "keep": 1}))
    ch.basic_publish(x, "zz", b"both", pika.BasicProperties(headers={"CC": ["c"], "BCC": ["a.9"]}))
    ch.basic_publish("", qa, b"default-cc", pika.BasicProperties(headers={"CC": [qb]}))
    out = {}
    for label, q in (("a", qa), ("b", qb), ("c", qc)):
        msgs = []
        while True:
            method, props, body = ch.basic_get(q, auto_ack=True)
            if method is None:
                break
            msgs.append([body.decode(), method.routing_key, jsonable(props.headers)])
        out[label] = msgs
    out["cc_not_array"] = attempt(
        lambda: ch.basic_publish(x, "a.2", b"cc-str", pika.BasicProperties(headers={"CC": "b"})) or "ok"
    )
    return out


@scenario
def scenario_amq_default_name(ctx: Ctx) -> Any:
    """'amq.default' is no alias of the default exchange in 3.10: publish/passive/bind are 404, declare
    and delete are refused as reserved/system names."""
    conn, ch, q = ctx.confirmed_queue()
    out: dict[str, Any] = {}
    out["publish"] = attempt(lambda: ch.basic_publish("amq.default", q, b"via-amq-default") or "ok")
    ch = ch if ch.is_open else conn.channel()
    out["count"] = wait_for_count(ch, q, 1, timeout=1)
    out.update(
        attempt_each(
            ctx,
            {
                "passive": lambda c: c.exchange_declare("amq.default", passive=True),
                "declare": lambda c: c.exchange_declare("amq.default", "direct", durable=True),
                "bind": lambda c: c.queue_bind(q, "amq.default", "k"),
                "delete": lambda c: c.exchange_delete("amq.default"),
            },
        )
    )
    return out


@scenario
def scenario_direct_reply_to_misuse(ctx: Ctx) -> Any:
    """amq.rabbitmq.reply-to misuse: publish with it but no reply consumer, consume with acks,
    basic.get, passive declare, a second reply consumer."""
    q = ctx.queue()
    return attempt_each(
        ctx,
        {
            "publish_no_consumer": lambda c: (
                c.queue_declare(q),
                c.basic_publish("", q, b"m", pika.BasicProperties(reply_to="amq.rabbitmq.reply-to")),
                c.queue_declare(q, passive=True),
            )[2],
            "consume_with_ack": lambda c: c.basic_consume("amq.rabbitmq.reply-to", lambda *a: None),
            "get": lambda c: c.basic_get("amq.rabbitmq.reply-to"),
            "passive": lambda c: c.queue_declare("amq.rabbitmq.reply-to", passive=True),
            "declare": lambda c: c.queue_declare("amq.rabbitmq.reply-to"),
            "consume_twice": lambda c: (
                c.basic_consume("amq.rabbitmq.reply-to", lambda *a: None, auto_ack=True),
                c.basic_consume("amq.rabbitmq.reply-to", lambda *a: None, auto_ack=True),
            ),
            "publish_to_bogus_reply": lambda c: (
                c.basic_publish("", "amq.rabbitmq.reply-to.bogus", b"m"),
                c.queue_declare(q, passive=True),
            )[1],
        },
    )


def _declare_unchecked(name: str, **kw: Any) -> commands.Queue.Declare:
    """A queue.declare whose name pamqp would refuse (RabbitMQ's reply-to suffixes contain '+', '/')."""
    method = commands.Queue.Declare(queue="placeholder", **kw)
    method.queue = name
    method.validate = lambda: None  # type: ignore[method-assign]
    return method


@scenario
def scenario_direct_reply_to_declare(ctx: Ctx) -> Any:
    """queue.declare of amq.rabbitmq.reply-to (any flags) is declare-ok 0/1; of reply-to.<suffix> only
    while that reply consumer exists; other names with the prefix are 404."""
    raw = ctx.raw()
    q = ctx.queue()
    out: dict[str, Any] = {}
    n = 1
    for label, method in {
        "passive": commands.Queue.Declare(queue="amq.rabbitmq.reply-to", passive=True),
        "durable_exclusive": commands.Queue.Declare(
            queue="amq.rabbitmq.reply-to", durable=True, exclusive=True
        ),
        "bad_args": commands.Queue.Declare(queue="amq.rabbitmq.reply-to", arguments={"x-message-ttl": -1}),
        "nowait": commands.Queue.Declare(queue="amq.rabbitmq.reply-to", nowait=True),
        "suffix_passive": commands.Queue.Declare(queue="amq.rabbitmq.reply-to.abc", passive=True),
        "suffix": commands.Queue.Declare(queue="amq.rabbitmq.reply-to.abc"),
        "glued": commands.Queue.Declare(queue="amq.rabbitmq.reply-tox"),
    }.items():
        n += 1
        raw.open_channel(n)
        raw.send(n, method)
        out[label] = _converse(raw, 0.4)
    raw.open_channel(20)
    raw.send(20, commands.Queue.Declare(queue="amq.rabbitmq.reply-to"))
    raw.send(20, commands.Basic.Get(queue=""))
    out["get_last_declared"] = _converse(raw, 0.4)
    raw.open_channel(21)
    raw.call(21, commands.Queue.Declare(queue=q), commands.Queue.DeclareOk)
    raw.call(
        21,
        commands.Basic.Consume(queue="amq.rabbitmq.reply-to", no_ack=True, consumer_tag="r"),
        commands.Basic.ConsumeOk,
    )
    raw.publish(21, "", q, b"x", properties=commands.Basic.Properties(reply_to="amq.rabbitmq.reply-to"))
    raw.send(21, commands.Basic.Get(queue=q, no_ack=True))
    _c, get_ok = raw.recv()
    _c, props = raw.recv()
    raw.recv()
    reply_name = props.properties.reply_to
    ctx.register(reply_name, "reply")
    raw.open_channel(22)
    raw.send(22, _declare_unchecked(reply_name, passive=True))
    out["live_suffix"] = [get_ok.name, _converse(raw, 0.4)]
    raw.call(21, commands.Basic.Cancel(consumer_tag="r"), commands.Basic.CancelOk)
    raw.send(22, _declare_unchecked(reply_name))
    out["after_cancel"] = _converse(raw, 0.4)
    return out


@scenario
def scenario_exclusive_durable_redeclare(ctx: Ctx) -> Any:
    """An exclusive queue declared durable: redeclare equivalence of durable/exclusive flags."""
    conn = ctx.connect()
    q, q2 = ctx.queue("q"), ctx.queue("q2")
    ch = conn.channel()
    ch.queue_declare(q, durable=True, exclusive=True)
    ch.queue_declare(q2, exclusive=True)
    cases = {
        "same": lambda c: c.queue_declare(q, durable=True, exclusive=True),
        "not_durable": lambda c: c.queue_declare(q, exclusive=True),
        "q2_durable": lambda c: c.queue_declare(q2, durable=True, exclusive=True),
        "q2_not_exclusive": lambda c: c.queue_declare(q2),
    }
    return attempt_each(ctx, cases, conn, observe=method_obs)


@scenario
def scenario_publish_to_other_connections_exclusive_queue(ctx: Ctx) -> Any:
    """Publishing into another connection's exclusive queue is allowed (only declare/consume lock)."""
    owner = ctx.connect()
    q = ctx.queue()
    och = owner.channel()
    och.queue_declare(q, exclusive=True)
    other = ctx.connect()
    ch = ctx.confirm_channel(other)
    ch.basic_publish("", q, b"from-other")
    bound = attempt(lambda: other.channel().queue_bind(q, "amq.fanout") and "ok")
    return {"count": wait_for_count(och, q, 1), "bind": bound, "got": bodies(och, q)}


@scenario
def scenario_duplicate_bindings(ctx: Ctx) -> Any:
    """The same binding twice is one binding; different args on direct are two bindings but deliver once;
    unbind with the wrong args leaves the binding."""
    ch = ctx.confirm_channel(ctx.connect())
    x = ctx.exchange()
    q = ctx.queue()
    ch.exchange_declare(x, "direct")
    ch.queue_declare(q)
    ch.queue_bind(q, x, "k")
    ch.queue_bind(q, x, "k")
    ch.queue_bind(q, x, "k", arguments={"a": 1})
    ch.basic_publish(x, "k", b"once")
    first = bodies(ch, q)
    ch.queue_unbind(q, x, "k")
    ch.basic_publish(x, "k", b"still-bound-with-args")
    second = bodies(ch, q)
    ch.queue_unbind(q, x, "k", arguments={"a": 2})
    ch.basic_publish(x, "k", b"wrong-args-unbind")
    third = bodies(ch, q)
    ch.queue_unbind(q, x, "k", arguments={"a": 1})
    ch.basic_publish(x, "k", b"gone")
    return {"first": first, "second": second, "third": third, "fourth": bodies(ch, q)}


@scenario
def scenario_exchange_delete_cleans_bindings(ctx: Ctx) -> Any:
    """Deleting an exchange removes bindings where it is source or destination; an AE pointing at a
    deleted exchange just drops."""
    ch = ctx.confirm_channel(ctx.connect())
    src, mid, ae = ctx.exchange("src"), ctx.exchange("mid"), ctx.exchange("ae")
    q = ctx.queue()
    ch.exchange_declare(ae, "fanout")
    ch.exchange_declare(src, "fanout", arguments={"alternate-exchange": ae})
    ch.exchange_declare(mid, "fanout")
    ch.queue_declare(q)
    ch.exchange_bind(mid, src)
    ch.queue_bind(q, mid)
    ch.queue_bind(q, ae)
    ch.basic_publish(src, "", b"through-mid")
    one = bodies(ch, q)
    ch.exchange_delete(mid)
    ch.basic_publish(src, "", b"to-ae")
    two = bodies(ch, q)
    ch.exchange_delete(ae)
    ch.basic_publish(src, "", b"dropped")
    ch.exchange_declare(mid, "fanout")
    ch.basic_publish(mid, "", b"mid-recreated-unbound")
    return {"one": one, "two": two, "three": bodies(ch, q)}


@scenario
def scenario_requeue_priority_order(ctx: Ctx) -> Any:
    """Requeued messages of a priority queue go back in priority order with redelivered set."""
    conn, ch, q = ctx.confirmed_queue(arguments={"x-max-priority": 3})
    for body, prio in (("low", 0), ("high", 3), ("mid", 2), ("high2", 3)):
        ch.basic_publish("", q, body.encode(), pika.BasicProperties(priority=prio))
    ch2 = conn.channel()
    tags = []
    for _ in range(3):
        method, _p, body = ch2.basic_get(q)
        tags.append([method.delivery_tag, body.decode()])
    ch2.basic_nack(tags[1][0], requeue=True)
    ch2.basic_nack(0, multiple=True, requeue=True)
    wait_for_count(ch, q, 4)  # requeues are asynchronous on RabbitMQ
    return {"got": tags, "after": get_all(ch, q)}


@scenario
def scenario_queue_delete_with_unacked(ctx: Ctx) -> Any:
    """queue.delete counts only ready messages; acking a delivery of the deleted queue is fine."""
    conn, ch, q = ctx.confirmed_queue(3)
    ch2 = conn.channel()
    method = ch2.basic_get(q)[0]
    deleted = method_obs(ch.queue_delete(q))
    ch2.basic_ack(method.delivery_tag)
    after = attempt(lambda: ch2.basic_qos(prefetch_count=1) and "ok")
    ch2.basic_ack(method.delivery_tag)
    again = attempt(lambda: ch2.basic_qos(prefetch_count=1) and "ok")
    return {"deleted": deleted, "ack_after_delete": after, "ack_again": again}


@scenario
def scenario_exchange_declare_type_corners(ctx: Ctx) -> Any:
    """exchange.declare with an empty type, a type differing only by case, passive with a bogus type."""
    x = ctx.exchange()
    setup = ctx.channel()
    setup.exchange_declare(x, "topic")
    return attempt_each(
        ctx,
        {
            "empty_type": lambda c: c.exchange_declare(ctx.exchange("e"), ""),
            "atom_type_queue": lambda c: c.exchange_declare(ctx.exchange("aq"), "queue"),
            "atom_type_ok": lambda c: c.exchange_declare(ctx.exchange("ao"), "ok"),
            "not_atom_type": lambda c: c.exchange_declare(ctx.exchange("na"), "Topic"),
            "upper_type": lambda c: c.exchange_declare(ctx.exchange("u"), "DIRECT"),
            "passive_bogus_type": lambda c: c.exchange_declare(x, "bogus", passive=True),
            "passive_missing_bogus_type": lambda c: c.exchange_declare(
                ctx.exchange("m"), "bogus", passive=True
            ),
            "redeclare_bogus_type": lambda c: c.exchange_declare(x, "bogus"),
            "ae_int": lambda c: c.exchange_declare(
                ctx.exchange("ae"), "direct", arguments={"alternate-exchange": 5}
            ),
        },
    )


@scenario
def scenario_consumer_priority(ctx: Ctx) -> Any:
    """x-priority consumers get messages first while they have prefetch credit; bad x-priority type."""
    conn = ctx.connect()
    q = ctx.queue()
    ch = ctx.confirm_channel(conn)
    ch.queue_declare(q)
    lo, hi = conn.channel(), conn.channel()
    hi.basic_qos(prefetch_count=2)
    got: list[Any] = []
    lo.basic_consume(q, lambda _c, m, _p, b: got.append(["lo", b.decode()]), consumer_tag="lo")
    hi.basic_consume(
        q,
        lambda _c, m, _p, b: got.append(["hi", b.decode()]),
        consumer_tag="hi",
        arguments={"x-priority": 10},
    )
    for i in range(5):
        ch.basic_publish("", q, f"m{i}".encode())
    pump(conn, 0.5)
    bad = conn.channel()
    bad_prio = attempt(
        lambda: bad.basic_consume(q, lambda *a: None, arguments={"x-priority": "high"}) and "ok"
    )
    return {"got": sorted(got), "hi_count": sum(1 for g in got if g[0] == "hi"), "bad": bad_prio}


@scenario
def scenario_consumer_priority_bands(ctx: Ctx) -> Any:
    """Equal-priority consumers share round-robin; lower bands (including negative) get nothing while
    a higher one has credit; a blocked high consumer lets the next band in, acks bring it back."""
    conn = ctx.connect()
    q = ctx.queue()
    ch = ctx.confirm_channel(conn)
    ch.queue_declare(q)
    got: list[Any] = []
    chans = {}
    for tag, prio, prefetch in (("neg", -1, 0), ("zero", 0, 0), ("a5", 5, 2), ("b5", 5, 2)):
        c = conn.channel()
        if prefetch:
            c.basic_qos(prefetch_count=prefetch)
        c.basic_consume(
            q,
            lambda _c, m, _p, b, tag=tag: got.append([tag, b.decode(), m.delivery_tag]),
            consumer_tag=tag,
            arguments={"x-priority": prio},
        )
        chans[tag] = c
    for i in range(6):
        ch.basic_publish("", q, f"m{i}".encode())
    pump(conn, 0.5)
    first = sorted(got)
    chans["a5"].basic_ack(0, multiple=True)
    # a round trip on a5's channel: on RabbitMQ the ack then reaches the queue before the publish
    # from another channel does (under load it could come second and the message go to `zero`)
    chans["a5"].basic_qos(prefetch_count=2)
    ch.basic_publish("", q, b"after-ack")
    pump(conn, 0.4)
    chans["b5"].basic_cancel("b5")
    chans["a5"].basic_cancel("a5")
    ch.basic_publish("", q, b"after-cancel")
    pump(conn, 0.4)
    return {"first": first, "rest": got[len(first) :]}


@scenario
def scenario_nack_after_channel_close(ctx: Ctx) -> Any:
    """After a channel error, frames on that channel are dropped until close-ok; a nack after reopening
    refers to a fresh tag space (406)."""
    raw = ctx.raw()
    raw.open_channel(1)
    q = ctx.queue()
    raw.call(1, commands.Queue.Declare(queue=q), commands.Queue.DeclareOk)
    raw.publish(1, "", q, b"m")
    get = raw.call(1, commands.Basic.Get(queue=q), commands.Basic.GetOk)
    raw.frames_until_quiet(0.3)
    raw.send(1, commands.Basic.Ack(delivery_tag=99))
    close = _converse(raw, 0.4)
    raw.open_channel(1)
    raw.send(1, commands.Basic.Nack(delivery_tag=get.delivery_tag))
    nack = _converse(raw, 0.4)
    raw.open_channel(1)
    count = raw.call(1, commands.Queue.Declare(queue=q, passive=True), commands.Queue.DeclareOk)
    return {"close": close, "nack_after_reopen": nack, "ready": count.message_count}


@scenario
def scenario_priority_queue_overflow(ctx: Ctx) -> Any:
    """x-max-length on a priority queue: which message drop-head drops, which reject-publish nacks."""
    conn = ctx.connect()
    ch = ctx.confirm_channel(conn)
    q, q2 = ctx.queue("dh"), ctx.queue("rp")
    ch.queue_declare(q, arguments={"x-max-priority": 5, "x-max-length": 2})
    ch.queue_declare(q2, arguments={"x-max-priority": 5, "x-max-length": 2, "x-overflow": "reject-publish"})
    outcomes = []
    for body, prio in (("p1", 1), ("p5", 5), ("p3", 3), ("p0", 0)):
        ch.basic_publish("", q, body.encode(), pika.BasicProperties(priority=prio))
        try:
            ch.basic_publish("", q2, body.encode(), pika.BasicProperties(priority=prio))
            outcomes.append("ack")
        except pika.exceptions.NackError:
            outcomes.append("nack")
    return {"drop_head": bodies(ch, q), "reject_publish": outcomes, "rp_left": bodies(ch, q2)}


@scenario
def scenario_max_length_ignores_unacked(ctx: Ctx) -> Any:
    """x-max-length counts ready messages only: unacked deliveries do not make room be taken."""
    conn, ch, q = ctx.confirmed_queue(arguments={"x-max-length": 2})
    ch.basic_publish("", q, b"m0")
    ch.basic_publish("", q, b"m1")
    ch2 = conn.channel()
    held = [ch2.basic_get(q)[2].decode() for _ in range(2)]
    for i in range(2, 5):
        ch.basic_publish("", q, f"m{i}".encode())
    ready = method_obs(ch.queue_declare(q, passive=True))
    ch2.close()  # the two unacked go back: now 4 > 2, the head is dropped
    wait_for_count(ch, q, 2)
    return {"held": held, "ready": ready, "after_requeue": get_all(ch, q)}


@scenario
def scenario_global_qos_shared_by_consumers(ctx: Ctx) -> Any:
    """basic.qos global=true (3.10: per channel) caps the unacked total of all consumers on the
    channel; a per-consumer prefetch set afterwards applies to later consumers only."""
    conn = ctx.connect()
    ch = ctx.confirm_channel(conn)
    q1, q2 = ctx.queue("q1"), ctx.queue("q2")
    ch.queue_declare(q1)
    ch.queue_declare(q2)
    for i in range(4):
        ch.basic_publish("", q1, f"a{i}".encode())
        ch.basic_publish("", q2, f"b{i}".encode())
    cch = conn.channel()
    cch.basic_qos(prefetch_count=3, global_qos=True)
    got: list[Any] = []
    cch.basic_consume(q1, lambda _c, m, _p, b: got.append(b.decode()), consumer_tag="c1")
    pump(conn, 0.3)
    cch.basic_consume(q2, lambda _c, m, _p, b: got.append(b.decode()), consumer_tag="c2")
    pump(conn, 0.3)
    first = sorted(got)
    cch.basic_ack(0, multiple=True)
    pump(conn, 0.4)
    return {"first": first, "after_ack": sorted(got[len(first) :])}


@scenario
def scenario_auto_delete_cascade(ctx: Ctx) -> Any:
    """Deleting an exchange removes its e2e bindings: an auto-delete source left without bindings
    goes too; an auto-delete destination losing its only (incoming) binding stays."""
    ch = ctx.channel()
    src, dst, src2, dst2 = (
        ctx.exchange("src"),
        ctx.exchange("dst"),
        ctx.exchange("src2"),
        ctx.exchange("dst2"),
    )
    ch.exchange_declare(src, "fanout", auto_delete=True)
    ch.exchange_declare(dst, "fanout")
    ch.exchange_declare(src2, "fanout")
    ch.exchange_declare(dst2, "fanout", auto_delete=True)
    ch.exchange_bind(dst, src)
    ch.exchange_bind(dst2, src2)
    ch.exchange_delete(dst)
    ch.exchange_delete(src2)
    out = {}
    for label, name in (("auto_delete_source", src), ("auto_delete_destination", dst2)):
        c = ctx.channel()
        out[label] = attempt(lambda c=c, name=name: c.exchange_declare(name, passive=True) and "exists")
    return out


@scenario
def scenario_headers_only_x_keys(ctx: Ctx) -> Any:
    """Headers bindings whose arguments are only x-match/x-* keys: all matches everything, any nothing."""
    ch = ctx.confirm_channel(ctx.connect())
    x = ctx.exchange()
    ch.exchange_declare(x, "headers")
    q_all, q_any, q_anyx = ctx.queue("all"), ctx.queue("any"), ctx.queue("anyx")
    for q, args in (
        (q_all, {"x-match": "all", "x-foo": "1"}),
        (q_any, {"x-match": "any"}),
        (q_anyx, {"x-match": "any", "x-foo": "1"}),
    ):
        ch.queue_declare(q)
        ch.queue_bind(q, x, "", arguments=args)
    ch.basic_publish(x, "", b"x-foo", pika.BasicProperties(headers={"x-foo": "1"}))
    ch.basic_publish(x, "", b"plain", pika.BasicProperties(headers={"a": "1"}))
    ch.basic_publish(x, "", b"none")
    return {"all": bodies(ch, q_all), "any": bodies(ch, q_any), "any_x": bodies(ch, q_anyx)}


@scenario
def scenario_delivery_tags_shared_get_consume(ctx: Ctx) -> Any:
    """basic.get and consumer deliveries share the channel's delivery-tag sequence; no-ack ones too."""
    conn, _ch, q = ctx.confirmed_queue(4)
    cch = conn.channel()
    tags = [
        ["get", cch.basic_get(q)[0].delivery_tag],
        ["get_noack", cch.basic_get(q, auto_ack=True)[0].delivery_tag],
    ]
    cch.basic_consume(
        q, lambda _c, m, _p, b: tags.append(["consume", m.delivery_tag, b.decode()]), auto_ack=True
    )
    pump(conn, 0.3)
    return tags


@scenario
def scenario_exclusive_queue_outlives_channel(ctx: Ctx) -> Any:
    """An exclusive queue belongs to the connection: closing its declaring channel keeps it; an
    exclusive auto-delete queue goes with its last consumer."""
    conn = ctx.connect()
    q, q2 = ctx.queue("q"), ctx.queue("q2")
    ch = conn.channel()
    ch.queue_declare(q, exclusive=True)
    ch.queue_declare(q2, exclusive=True, auto_delete=True)
    ch.basic_consume(q2, lambda *a: None, consumer_tag="c")
    ch.close()
    ch = conn.channel()
    out = {
        "exclusive": attempt(lambda: method_obs(ch.queue_declare(q, passive=True))),
        "exclusive_auto_delete": attempt(lambda: method_obs(ch.queue_declare(q2, passive=True))),
    }
    return out


@scenario
def scenario_mandatory_through_e2e_dead_end(ctx: Ctx) -> Any:
    """mandatory: routed to an exchange that routes nowhere is still unroutable (returned)."""
    conn = ctx.connect()
    ch = conn.channel()
    src, dst = ctx.exchange("src"), ctx.exchange("dst")
    ch.exchange_declare(src, "fanout")
    ch.exchange_declare(dst, "direct")
    ch.exchange_bind(dst, src)
    q = ctx.queue()
    ch.queue_declare(q)
    ch.queue_bind(q, dst, "hit")
    returned: list[Any] = []
    ch.add_on_return_callback(
        lambda _c, m, _p, b: returned.append([m.reply_code, m.exchange, m.routing_key, b.decode()])
    )
    ch.basic_publish(src, "miss", b"dead-end", mandatory=True)
    ch.basic_publish(src, "hit", b"delivered", mandatory=True)
    pump(conn, 0.4)
    return {"returned": returned, "q": bodies(ch, q)}


@scenario
def scenario_recover_requeue_with_consumer(ctx: Ctx) -> Any:
    """basic.recover(requeue=true) with a live consumer: the messages come back redelivered, in order,
    with fresh delivery tags."""
    conn, _ch, q = ctx.confirmed_queue(3)
    cch = conn.channel()
    got: list[Any] = []
    cch.basic_consume(q, lambda _c, m, _p, b: got.append([m.delivery_tag, m.redelivered, b.decode()]))
    pump(conn, 0.3)
    cch.basic_recover(requeue=True)
    pump(conn, 0.4)
    return got


@scenario
def scenario_nowait_variants(ctx: Ctx) -> Any:
    """nowait methods: no -ok on success, the error close still comes on failure."""
    raw = ctx.raw()
    q, x = ctx.queue(), ctx.exchange()
    mx = ctx.exchange("missing")
    out: dict[str, Any] = {}
    steps = {
        "exchange_declare": commands.Exchange.Declare(exchange=x, exchange_type="direct", nowait=True),
        "queue_declare": commands.Queue.Declare(queue=q, nowait=True),
        "queue_bind": commands.Queue.Bind(queue=q, exchange=x, routing_key="k", nowait=True),
        "queue_bind_missing": commands.Queue.Bind(queue=q, exchange=mx, routing_key="k", nowait=True),
        "exchange_bind": commands.Exchange.Bind(
            destination=x, source="amq.direct", routing_key="k", nowait=True
        ),
        "exchange_unbind": commands.Exchange.Unbind(
            destination=x, source="amq.direct", routing_key="k", nowait=True
        ),
        "queue_purge": commands.Queue.Purge(queue=q, nowait=True),
        "cancel_unknown": commands.Basic.Cancel(consumer_tag="nope", nowait=True),
        "confirm_select": commands.Confirm.Select(nowait=True),
        "queue_delete_missing": commands.Queue.Delete(queue=ctx.queue("never"), nowait=True),
        "exchange_delete_missing": commands.Exchange.Delete(exchange=mx, nowait=True),
        "queue_delete": commands.Queue.Delete(queue=q, nowait=True),
        "exchange_delete": commands.Exchange.Delete(exchange=x, nowait=True),
        "redeclare_inequivalent": commands.Exchange.Declare(
            exchange="amq.direct", exchange_type="fanout", nowait=True
        ),
    }
    n = 1
    raw.open_channel(n)
    for label, method in steps.items():
        raw.send(n, method)
        frames = _converse(raw, 0.3)
        out[label] = frames
        if any(f[1] == "Channel.Close" for f in frames):
            n += 1
            raw.open_channel(n)
    return out


@scenario
def scenario_qos_consumer_and_global(ctx: Ctx) -> Any:
    """Per-consumer prefetch and a global (channel) prefetch together: both limits apply."""
    conn = ctx.connect()
    ch = ctx.confirm_channel(conn)
    q1, q2 = ctx.queue("q1"), ctx.queue("q2")
    for q in (q1, q2):
        ch.queue_declare(q)
        for i in range(4):
            ch.basic_publish("", q, f"{q[-2:]}{i}".encode())
    cch = conn.channel()
    cch.basic_qos(prefetch_count=3, global_qos=True)
    cch.basic_qos(prefetch_count=2)
    got: list[Any] = []
    cch.basic_consume(q1, lambda _c, m, _p, b: got.append(["c1", m.delivery_tag]), consumer_tag="c1")
    pump(conn, 0.3)
    cch.basic_consume(q2, lambda _c, m, _p, b: got.append(["c2", m.delivery_tag]), consumer_tag="c2")
    pump(conn, 0.3)
    first = sorted(got)
    cch.basic_ack(1)
    pump(conn, 0.3)
    return {"first": first, "after_one_ack": sorted(got[len(first) :])}


@scenario
def scenario_qos_order_variants(ctx: Ctx) -> Any:
    """The order of global and per-consumer basic.qos matters: a per-consumer qos lifts the global one."""
    conn = ctx.connect()
    ch = ctx.confirm_channel(conn)
    out = {}
    for label, order in {
        "global_then_consumer": [(True, 3), (False, 2)],
        "consumer_then_global": [(False, 2), (True, 3)],
        "global_then_consumer_zero": [(True, 3), (False, 0)],
        "global_then_global_zero": [(True, 3), (True, 0)],
        "consumer_global_consumer": [(False, 2), (True, 3), (False, 1)],
    }.items():
        q1, q2 = ctx.queue("q1"), ctx.queue("q2")
        for q in (q1, q2):
            ch.queue_declare(q)
            for _ in range(4):
                ch.basic_publish("", q, b"x")
        cch = conn.channel()
        for global_qos, count in order:
            cch.basic_qos(prefetch_count=count, global_qos=global_qos)
        got: list[str] = []
        cch.basic_consume(q1, lambda _c, _m, _p, _b, got=got: got.append("c1"))
        pump(conn, 0.2)
        cch.basic_consume(q2, lambda _c, _m, _p, _b, got=got: got.append("c2"))
        pump(conn, 0.3)
        cch.close()
        out[label] = sorted(got)
    return out


@scenario
def scenario_content_frame_corners(ctx: Ctx) -> Any:
    """Content corners: a zero-size message followed by a stray body frame; a header whose class id is
    not basic; a body frame on a channel with no content expected."""
    from pamqp import frame, header
    from pamqp.body import ContentBody

    out: dict[str, Any] = {}
    raw = ctx.raw()
    raw.open_channel(1)
    raw.send_bytes(publish_frames("nowhere", b"stray", size=0))
    out["stray_body"] = _converse(raw)
    raw = ctx.raw()
    raw.open_channel(1)
    hdr = bytearray(frame.marshal(header.ContentHeader(0, 1, commands.Basic.Properties()), 1))
    hdr[7:9] = (50).to_bytes(2, "big")  # class id of the content header: queue instead of basic
    raw.send_bytes(frame.marshal(commands.Basic.Publish(exchange="", routing_key="nowhere"), 1) + bytes(hdr))
    out["header_wrong_class"] = _converse(raw)
    raw = ctx.raw()
    raw.open_channel(1)
    raw.send(1, ContentBody(b"orphan"))
    out["orphan_body"] = _converse(raw)
    return out


@scenario
def scenario_reject_publish_partial_route(ctx: Ctx) -> Any:
    """A publish routed to a full reject-publish queue and to a normal one: the normal one gets it, the
    publisher gets a nack; mandatory is not returned."""
    conn = ctx.connect()
    ch = ctx.confirm_channel(conn)
    x = ctx.exchange()
    full, ok = ctx.queue("full"), ctx.queue("ok")
    ch.exchange_declare(x, "fanout")
    ch.queue_declare(full, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    ch.queue_declare(ok)
    ch.queue_bind(full, x)
    ch.queue_bind(ok, x)
    outcomes = []
    returned: list[Any] = []
    ch.add_on_return_callback(lambda _c, m, _p, b: returned.append(b.decode()))
    for body in ("m0", "m1", "m2"):
        try:
            ch.basic_publish(x, "", body.encode(), mandatory=True)
            outcomes.append("ack")
        except pika.exceptions.NackError:
            outcomes.append("nack")
    pump(conn, 0.2)
    return {"outcomes": outcomes, "full": bodies(ch, full), "ok": bodies(ch, ok), "returned": returned}


@scenario
def scenario_max_length_bytes_dead_letter(ctx: Ctx) -> Any:
    """x-max-length-bytes drop-head dead-letters with reason maxlen, oldest first; an oversized single
    message is itself dropped."""
    conn = ctx.connect()
    ch = ctx.confirm_channel(conn)
    q, dlq = ctx.queue("q"), ctx.queue("dlq")
    ch.queue_declare(dlq)
    ch.queue_declare(
        q,
        arguments={"x-max-length-bytes": 10, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq},
    )
    for body in ("aaaa", "bbbb", "cccc", "x" * 11):
        ch.basic_publish("", q, body.encode())
    wait_for_count(ch, dlq, 3)
    dead = []
    while True:
        method, props, body = ch.basic_get(dlq, auto_ack=True)
        if method is None:
            break
        dead.append([body.decode(), x_death_obs(props.headers)])
    return {"left": bodies(ch, q), "dead": dead}


@scenario
def scenario_exclusive_consumer_released(ctx: Ctx) -> Any:
    """After an exclusive consumer is cancelled, others may consume; an exclusive consumer on a queue
    where the same channel already consumes is refused too."""
    conn = ctx.connect()
    q = ctx.queue()
    ch = conn.channel()
    ch.queue_declare(q)
    ch.basic_consume(q, lambda *a: None, exclusive=True, consumer_tag="ex")
    ch.basic_cancel("ex")
    c2 = conn.channel()
    after = attempt(lambda: c2.basic_consume(q, lambda *a: None, consumer_tag="plain") and "ok")
    same = attempt(lambda: c2.basic_consume(q, lambda *a: None, exclusive=True, consumer_tag="ex2") and "ok")
    return {"after_cancel": after, "exclusive_same_channel": same}


@scenario
def scenario_empty_routing_key_default_exchange(ctx: Ctx) -> Any:
    """Publishing to the default exchange with an empty routing key routes nowhere (mandatory returns)."""
    conn = ctx.connect()
    ch = conn.channel()
    returned: list[Any] = []
    ch.add_on_return_callback(
        lambda _c, m, _p, b: returned.append([m.reply_code, m.reply_text, m.routing_key])
    )
    ch.basic_publish("", "", b"nowhere", mandatory=True)
    pump(conn, 0.3)
    return returned


@scenario
def scenario_ttl_expired_while_unacked(ctx: Ctx) -> Any:
    """A message whose TTL passes while it is unacked is not expired in flight; once requeued it expires
    (dead-lettered with reason expired) instead of being redelivered."""
    import time

    conn = ctx.connect()
    ch = ctx.confirm_channel(conn)
    q, dlq = ctx.queue("q"), ctx.queue("dlq")
    ch.queue_declare(dlq)
    ch.queue_declare(
        q, arguments={"x-message-ttl": 200, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}
    )
    ch.basic_publish("", q, b"held")
    ch.basic_publish("", q, b"fresh-later")
    cch = conn.channel()
    method = cch.basic_get(q)[0]
    time.sleep(0.5)
    cch.basic_nack(method.delivery_tag, requeue=True)
    wait_for_count(ch, dlq, 2)
    dead = []
    while True:
        m, props, body = ch.basic_get(dlq, auto_ack=True)
        if m is None:
            break
        dead.append([body.decode(), x_death_obs(props.headers)])
    return {"q": bodies(ch, q), "dead": sorted(dead, key=lambda d: d[0])}


@scenario
def scenario_queue_expires_reset(ctx: Ctx) -> Any:
    """x-expires: which operations count as use (reset the idle timer): basic.get, passive declare..."""
    import time

    conn = ctx.connect()
    ch = conn.channel()
    qg, qp, qn = ctx.queue("get"), ctx.queue("passive"), ctx.queue("none")
    qpu, qb, qpub = ctx.queue("purge"), ctx.queue("bind"), ctx.queue("publish")
    for q in (qg, qp, qn, qpu, qb, qpub):
        ch.queue_declare(q, arguments={"x-expires": 1200})
    time.sleep(0.8)
    ch.basic_get(qg)
    ch.queue_declare(qp, passive=True)
    ch.queue_purge(qpu)
    ch.queue_bind(qb, "amq.fanout")
    ch.basic_publish("", qpub, b"m")
    time.sleep(0.8)
    out = {}
    for label, q in (
        ("get", qg),
        ("passive", qp),
        ("untouched", qn),
        ("purge", qpu),
        ("bind", qb),
        ("publish", qpub),
    ):
        c = conn.channel()
        out[label] = attempt(lambda c=c, q=q: c.queue_declare(q, passive=True) and "exists")
    return out


@scenario
def scenario_alternate_exchange_of_e2e_destination(ctx: Ctx) -> Any:
    """The AE of an exchange reached through an exchange binding; an exchange that is its own AE."""
    conn = ctx.connect()
    ch = conn.channel()
    src, dst, ae, selfae = ctx.exchange("src"), ctx.exchange("dst"), ctx.exchange("ae"), ctx.exchange("self")
    qae, qdst = ctx.queue("qae"), ctx.queue("qdst")
    ch.exchange_declare(ae, "fanout")
    ch.exchange_declare(dst, "direct", arguments={"alternate-exchange": ae})
    ch.exchange_declare(src, "fanout")
    ch.exchange_declare(selfae, "direct", arguments={"alternate-exchange": selfae})
    ch.exchange_bind(dst, src)
    ch.queue_declare(qae)
    ch.queue_declare(qdst)
    ch.queue_bind(qae, ae)
    ch.queue_bind(qdst, dst, "hit")
    returned: list[Any] = []
    ch.add_on_return_callback(lambda _c, m, _p, b: returned.append([m.reply_code, m.exchange, b.decode()]))
    ch.basic_publish(src, "miss", b"via-src-miss", mandatory=True)
    ch.basic_publish(src, "hit", b"via-src-hit", mandatory=True)
    ch.basic_publish(dst, "miss", b"direct-miss", mandatory=True)
    ch.basic_publish(selfae, "miss", b"self-ae", mandatory=True)
    pump(conn, 0.4)
    return {"qae": bodies(ch, qae), "qdst": bodies(ch, qdst), "returned": returned}


@scenario
def scenario_update_secret(ctx: Ctx) -> Any:
    """connection.update-secret with the same password; then with a wrong one."""
    raw = ctx.raw()
    raw.send(0, commands.Connection.UpdateSecret(new_secret="\0guest\0guest", reason="rotate"))
    same = _converse(raw, 0.5)
    raw.send(0, commands.Connection.UpdateSecret(new_secret="\0guest\0wrong", reason="rotate"))
    wrong = _converse(raw, 0.5)
    return {"same": same, "wrong": wrong}


@scenario
def scenario_content_split_frames(ctx: Ctx) -> Any:
    """A body split into several frames, including an empty body frame, is one message; a
    channel.close where a body frame is due is a connection error and the partial message is lost."""

    raw = ctx.raw()
    raw.open_channel(1)
    q = ctx.queue()
    raw.call(1, commands.Queue.Declare(queue=q), commands.Queue.DeclareOk)
    raw.send_bytes(publish_frames(q, b"12", b"", b"345"))
    split = _converse(raw, 0.4)
    data = publish_frames(q, b"ab", size=5)
    raw.send(1, commands.Basic.Get(queue=q, no_ack=True))
    got = _converse(raw, 0.4)
    raw.send_bytes(data)
    raw.send(1, commands.Channel.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0))
    mid_close = _converse(raw, 0.4)
    probe = ctx.raw()
    probe.open_channel(1)
    probe.send(1, commands.Queue.Declare(queue=q, passive=True))
    return {"split": split, "get": got, "mid_close": mid_close, "after": _converse(probe, 0.4)}


@scenario
def scenario_single_active_consumer_corners(ctx: Ctx) -> Any:
    """Single active consumer: the first consumer gets everything, declare-ok counts all consumers,
    basic.get still works, x-priority does not displace the active one, cancel hands over."""
    conn, ch, q = ctx.confirmed_queue(arguments={"x-single-active-consumer": True})
    got: list[Any] = []
    a, b = conn.channel(), conn.channel()
    a.basic_consume(
        q, lambda _c, m, _p, body: got.append(["a", body.decode()]), auto_ack=True, consumer_tag="a"
    )
    b.basic_consume(
        q,
        lambda _c, m, _p, body: got.append(["b", body.decode()]),
        auto_ack=True,
        consumer_tag="b",
        arguments={"x-priority": 10},
    )
    for i in range(2):
        ch.basic_publish("", q, f"m{i}".encode())
    pump(conn, 0.3)
    declare = method_obs(ch.queue_declare(q, passive=True))
    a.basic_cancel("a")
    ch.basic_publish("", q, b"after-cancel")
    pump(conn, 0.3)
    return {"got": got, "declare": declare}


@scenario
def scenario_headers_typed_values(ctx: Ctx) -> Any:
    """Headers matching compares typed values: tables, arrays, booleans vs integers, decimals."""
    ch = ctx.confirm_channel(ctx.connect())
    x = ctx.exchange()
    ch.exchange_declare(x, "headers")
    bindings: dict[str, Any] = {
        "table": {"t": {"a": 1}},
        "array": {"l": [1, "two"]},
        "bool": {"b": True},
        "int1": {"b": 1},
        "decimal": {"d": Decimal("1.50")},
        "long": {"n": 2**40},
    }
    queues = {}
    for label, args in bindings.items():
        q = ctx.queue(label)
        ch.queue_declare(q)
        ch.queue_bind(q, x, "", arguments=args)
        queues[label] = q
    msgs: dict[str, Any] = {
        "table": {"t": {"a": 1}},
        "table_other": {"t": {"a": 2}},
        "array": {"l": [1, "two"]},
        "array_order": {"l": ["two", 1]},
        "true": {"b": True},
        "one": {"b": 1},
        "decimal": {"d": Decimal("1.50")},
        "decimal_scale": {"d": Decimal("1.5")},
        "long": {"n": 2**40},
    }
    for body, headers in msgs.items():
        ch.basic_publish(x, "", body.encode(), pika.BasicProperties(headers=headers))
    return {label: bodies(ch, q) for label, q in queues.items()}


def _handshake_until_tune(raw: RawAmqp) -> commands.Connection.Tune:
    raw.greet()
    return raw.login(product="hb")


@scenario
def scenario_tune_ok_limits(ctx: Ctx) -> Any:
    """tune-ok above the server's frame_max or channel_max, and methods sent before connection.open."""
    out: dict[str, Any] = {}
    for label, kwargs in {
        "frame_max_above": {"frame_max": 131072 * 2, "channel_max": 2047},
        "channel_max_above": {"frame_max": 131072, "channel_max": 4000},
        "channel_max_zero": {"frame_max": 131072, "channel_max": 0},
        "frame_max_zero": {"frame_max": 0, "channel_max": 2047},
    }.items():
        raw = ctx.raw(handshake=False)
        _handshake_until_tune(raw)
        raw.send(0, commands.Connection.TuneOk(heartbeat=0, **kwargs))
        raw.send(0, commands.Connection.Open(virtual_host="/"))
        out[label] = _converse(raw, 0.4)
    raw = ctx.raw(handshake=False)
    tune = _handshake_until_tune(raw)
    raw.send(
        0, commands.Connection.TuneOk(channel_max=tune.channel_max, frame_max=tune.frame_max, heartbeat=0)
    )
    raw.send(1, commands.Channel.Open())
    out["channel_before_open"] = _converse(raw, 0.4)
    raw = ctx.raw()
    raw.send(0, commands.Connection.Open(virtual_host="/"))
    out["open_twice"] = _converse(raw, 0.4)
    return out


@scenario
def scenario_amqplain_and_odd_auth(ctx: Ctx) -> Any:
    """AMQPLAIN login (a field table without its length prefix), a PLAIN response without the
    separators, and connection.open of the empty vhost name."""
    import struct

    from pamqp import encode

    def start(mechanism: str, response: bytes) -> list[Any]:
        raw = ctx.raw(handshake=False)
        raw.greet()
        args = (
            encode.field_table({"product": "hb"})
            + encode.short_string(mechanism)
            + struct.pack(">I", len(response))
            + response
            + encode.short_string("en_US")
        )
        payload = struct.pack(">HH", 10, 11) + args
        raw.send_bytes(struct.pack(">BHI", 1, 0, len(payload)) + payload + b"\xce")
        frames = _converse(raw, 0.5)
        return [f[:2] if f[1] == "Connection.Tune" else f for f in frames]

    table = encode.field_table({"LOGIN": "guest", "PASSWORD": "guest"})[4:]
    bad_table = encode.field_table({"LOGIN": "guest", "PASSWORD": "nope"})[4:]
    out: dict[str, Any] = {
        "amqplain": start("AMQPLAIN", table),
        "amqplain_bad_password": start("AMQPLAIN", bad_table),
        "plain_no_separators": start("PLAIN", b"guestguest"),
        "plain_empty": start("PLAIN", b""),
    }
    raw = ctx.raw(handshake=False)
    tune = _handshake_until_tune(raw)
    raw.send(
        0, commands.Connection.TuneOk(channel_max=tune.channel_max, frame_max=tune.frame_max, heartbeat=0)
    )
    raw.send(0, commands.Connection.Open(virtual_host=""))
    out["open_empty_vhost"] = _converse(raw, 0.5)
    return out


@scenario
def scenario_headers_exchange_binding(ctx: Ctx) -> Any:
    """Exchange-to-exchange bindings from a headers exchange match on headers; a bad x-match on an
    exchange binding is refused like on a queue binding."""
    conn = ctx.connect()
    ch = ctx.confirm_channel(conn)
    hx, dst = ctx.exchange("hx"), ctx.exchange("dst")
    q = ctx.queue()
    ch.exchange_declare(hx, "headers")
    ch.exchange_declare(dst, "fanout")
    ch.queue_declare(q)
    ch.queue_bind(q, dst)
    ch.exchange_bind(dst, hx, "", arguments={"x-match": "any", "a": "1", "b": "2"})
    ch.basic_publish(hx, "", b"a", pika.BasicProperties(headers={"a": "1"}))
    ch.basic_publish(hx, "", b"none", pika.BasicProperties(headers={"c": "3"}))
    routed = bodies(ch, q)
    c = conn.channel()
    bad = attempt(lambda: c.exchange_bind(dst, hx, "", arguments={"x-match": "either"}) and "ok")
    c = conn.channel()
    unbind_other_args = attempt(lambda: c.exchange_unbind(dst, hx, "", arguments={"x-match": "all"}) and "ok")
    ch.basic_publish(hx, "", b"still", pika.BasicProperties(headers={"b": "2"}))
    return {
        "routed": routed,
        "bad_match": bad,
        "unbind_other_args": unbind_other_args,
        "after": bodies(ch, q),
    }


@scenario
def scenario_cancel_after_server_cancel(ctx: Ctx) -> Any:
    """After the server cancelled a consumer (its queue was deleted), the client's own basic.cancel of
    that tag is answered cancel-ok and the tag can be reused; the unacked delivery can still be acked."""
    raw = ctx.raw()
    q, q2 = ctx.queue("q"), ctx.queue("q2")
    raw.open_channel(1)
    raw.open_channel(2)
    raw.call(1, commands.Queue.Declare(queue=q), commands.Queue.DeclareOk)
    raw.call(1, commands.Queue.Declare(queue=q2), commands.Queue.DeclareOk)
    raw.publish(1, "", q, b"m")
    raw.call(1, commands.Queue.Declare(queue=q, passive=True), commands.Queue.DeclareOk)
    raw.send(1, commands.Basic.Consume(queue=q, consumer_tag="t"))
    consumed = _converse(raw, 0.4)
    raw.send(2, commands.Queue.Delete(queue=q))
    deleted = _converse(raw, 0.4)
    raw.send(1, commands.Basic.Cancel(consumer_tag="t"))
    cancel = _converse(raw, 0.4)
    raw.send(1, commands.Basic.Ack(delivery_tag=1))
    raw.send(1, commands.Basic.Consume(queue=q2, consumer_tag="t"))
    reuse = _converse(raw, 0.4)
    return {"consumed": consumed, "deleted": sorted(map(str, deleted)), "cancel": cancel, "reuse": reuse}


@scenario
def scenario_tx_routing_time(ctx: Ctx) -> Any:
    """In a transaction, is a publish routed when published or at commit? Bind/unbind/delete between."""
    conn = ctx.connect()
    ch = conn.channel()
    x = ctx.exchange()
    q1, q2 = ctx.queue("q1"), ctx.queue("q2")
    ch.exchange_declare(x, "fanout")
    ch.queue_declare(q1)
    ch.queue_declare(q2)
    ch.queue_bind(q1, x)
    tch = conn.channel()
    tch.tx_select()
    tch.basic_publish(x, "", b"in-tx")
    ch.queue_unbind(q1, x)
    ch.queue_bind(q2, x)
    tch.tx_commit()
    wait_for_count(ch, q1, 1, timeout=0.5)
    first = {"q1": bodies(ch, q1), "q2": bodies(ch, q2)}
    tch.basic_publish(x, "", b"exchange-deleted")
    ch.exchange_delete(x)
    commit = attempt(lambda: tch.tx_commit() and "ok")
    wait_for_count(ch, q2, 1, timeout=0.5)
    return {"first": first, "commit_after_delete": commit, "q2": bodies(ch, q2)}


@scenario
def scenario_empty_name_shortcuts(ctx: Ctx) -> Any:
    """Empty queue names: passive declare with and without a previously declared queue; bind with
    empty queue and key (key becomes the queue name); unbind likewise; delete/purge of ''."""
    conn = ctx.connect()
    out: dict[str, Any] = {}
    fresh = conn.channel()
    out["passive_fresh"] = attempt(lambda: method_obs(fresh.queue_declare("", passive=True)))
    q = ctx.queue()
    pch = conn.channel()
    pch.queue_declare(q)
    out["passive_after_declare"] = attempt(lambda: method_obs(pch.queue_declare("", passive=True)))
    ch = ctx.confirm_channel(conn)
    ch.queue_declare(q)
    ch.queue_bind("", "amq.direct")
    ch.basic_publish("amq.direct", q, b"key-is-queue-name")
    ch.basic_publish("amq.direct", "", b"empty-key")
    out["routed"] = bodies(ch, q)
    ch.queue_unbind("", "amq.direct")
    ch.basic_publish("amq.direct", q, b"after-unbind")
    out["after_unbind"] = bodies(ch, q)
    return out


@scenario
def scenario_expiration_zero_per_message(ctx: Ctx) -> Any:
    """Per-message expiration '0': delivered to a consumer that can take it at once, otherwise expired
    (dead-lettered with original-expiration); a blocked consumer (prefetch full) does not count."""
    conn = ctx.connect()
    ch = ctx.confirm_channel(conn)
    q, dlq = ctx.queue("q"), ctx.queue("dlq")
    ch.queue_declare(dlq)
    ch.queue_declare(q, arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
    zero = pika.BasicProperties(expiration="0")
    ch.basic_publish("", q, b"no-consumer", zero)
    got: list[str] = []
    cch = conn.channel()
    cch.basic_qos(prefetch_count=1)
    cch.basic_consume(q, lambda _c, _m, _p, b: got.append(b.decode()))
    pump(conn, 0.2)
    ch.basic_publish("", q, b"consumer-ready", zero)
    pump(conn, 0.3)
    ch.basic_publish("", q, b"consumer-blocked", zero)
    pump(conn, 0.3)
    wait_for_count(ch, dlq, 2)
    dead = []
    while True:
        m, props, body = ch.basic_get(dlq, auto_ack=True)
        if m is None:
            break
        dead.append([body.decode(), x_death_obs(props.headers)])
    return {"got": got, "dead": dead}


@scenario
def scenario_amq_exchange_redeclare_flags(ctx: Ctx) -> Any:
    """Redeclaring a pre-declared amq.* exchange with other flags: internal, auto-delete, non-durable,
    arguments; binding an amq.* exchange as an e2e destination."""
    return attempt_each(
        ctx,
        {
            "internal": lambda c: c.exchange_declare("amq.direct", "direct", durable=True, internal=True),
            "auto_delete": lambda c: c.exchange_declare(
                "amq.fanout", "fanout", durable=True, auto_delete=True
            ),
            "non_durable": lambda c: c.exchange_declare("amq.topic", "topic"),
            "args": lambda c: c.exchange_declare("amq.headers", "headers", durable=True, arguments={"x": 1}),
            "trace_same": lambda c: c.exchange_declare(
                "amq.rabbitmq.trace", "topic", durable=True, internal=True
            ),
            "e2e_dest_amq": lambda c: (
                c.exchange_bind("amq.fanout", "amq.direct", "zz"),
                c.exchange_unbind("amq.fanout", "amq.direct", "zz"),
            ),
        },
    )


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("name", "target"), registry.params())
def test_differential(name: str, target: str, request: pytest.FixtureRequest) -> None:
    run_differential(registry, name, target, request)
