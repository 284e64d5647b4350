"""Quorum queues' counts as a client reads them, RabbitMQ 3.10.8 against hashbroker.

Declare-Ok's consumer_count of a quorum queue is the size of rabbit_fifo's consumer map: an
unsettled basic.get and a cancelled consumer still holding unacked messages are in it, the waiting
consumers of a single-active-consumer queue are not. Get-Ok's message_count is read after the
expired heads were dropped; an expired message returned by a reject waits for its turn at the head.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.differential_support import Registry, run_differential

registry = Registry()
scenario = registry.scenario

QUORUM = {"x-queue-type": "quorum"}


def _counts(ch: Any, queue: str) -> list[int]:
    ok = ch.queue_declare(queue, durable=True, arguments=QUORUM, passive=True).method
    return [ok.message_count, ok.consumer_count]


def _applied() -> None:
    """Settlements reach a quorum queue asynchronously (the channel pipelines them to the Raft
    leader, and a closed channel's are seen when its process is gone), while queue.declare reads
    the leader's state at once: give RabbitMQ time to apply them before counting."""
    time.sleep(0.3)


def _settled(ch: Any, queue: str) -> list[int]:
    """`_counts` once settlements already sent were applied."""
    _applied()
    return _counts(ch, queue)


def _quorum_queue_with(ctx: Any, n: int) -> tuple[Any, Any, str]:
    """A connection, a confirming channel on it and a quorum queue holding messages m.0 .. m.<n-1>."""
    conn = ctx.connect()
    ch = conn.channel()
    ch.confirm_delivery()
    q = ctx.queue()
    ch.queue_declare(q, durable=True, arguments=QUORUM)
    for i in range(n):
        ch.basic_publish("", q, f"m.{i}".encode())
    return conn, ch, q


def _with_channel_closed(out: dict[str, Any], closing: Any, reader: Any, queue: str) -> dict[str, Any]:
    """`out` with the counts `reader` sees once the channel `closing` is closed ("channel_closed")."""
    closing.close()
    out["channel_closed"] = _settled(reader, queue)
    return out


def _reads(ch: Any, queue: str, auto_ack: bool) -> list[Any]:
    """Three basic.gets: [body, message_count] each, None for get-empty."""
    reads = []
    for _ in range(3):
        m, _, body = ch.basic_get(queue, auto_ack=auto_ack)
        reads.append(None if m is None else [body.decode(), m.message_count])
    return reads


def _pump_until(conn: Any, got: list[Any], n: int) -> None:
    """Dispatch deliveries until `got` holds `n` (5 s at most)."""
    deadline = time.monotonic() + 5
    while len(got) < n and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)


@scenario
def scenario_unsettled_get_counts_as_consumer(ctx: Any) -> Any:
    conn, ch, q = _quorum_queue_with(ctx, 4)
    out: dict[str, Any] = {"start": _counts(ch, q)}
    m1, _, _ = ch.basic_get(q, auto_ack=False)
    out["one_get"] = _counts(ch, q)
    m2, _, _ = ch.basic_get(q, auto_ack=False)
    out["two_gets_same_channel"] = _counts(ch, q)
    other = ctx.channel(conn)
    m3, _, _ = other.basic_get(q, auto_ack=False)
    out["get_on_other_channel"] = _counts(ch, q)
    ch.basic_ack(m1.delivery_tag)
    out["first_acked"] = _settled(ch, q)
    ch.basic_ack(m2.delivery_tag)
    out["second_acked"] = _settled(ch, q)
    other.basic_nack(m3.delivery_tag, requeue=True)
    out["other_nacked"] = _settled(ch, q)
    ch.basic_get(q, auto_ack=True)
    out["no_ack_get"] = _counts(ch, q)
    ch.basic_get(q, auto_ack=False)
    out["get_before_close"] = _counts(ch, q)
    return _with_channel_closed(out, ch, other, q)


@scenario
def scenario_cancelled_consumer_with_unacked_counts(ctx: Any) -> Any:
    conn, ch, q = _quorum_queue_with(ctx, 3)
    cch = ctx.channel(conn)
    cch.basic_qos(prefetch_count=2)
    got: list[Any] = []
    tag = cch.basic_consume(q, lambda c, m, p, b: got.append(m), consumer_tag=ctx.token("ctag"))
    _pump_until(conn, got, 2)
    out: dict[str, Any] = {"consuming": _counts(ch, q), "got": len(got)}
    cch.basic_cancel(tag)
    out["cancelled"] = _counts(ch, q)
    cch.basic_ack(got[0].delivery_tag)
    out["one_acked"] = _settled(ch, q)
    cch.basic_nack(got[1].delivery_tag, requeue=True)
    out["all_settled"] = _settled(ch, q)
    # a second consumer, cancelled with unacked messages, then its channel closes
    tag2 = cch.basic_consume(q, lambda c, m, p, b: got.append(m), consumer_tag=ctx.token("ctag2"))
    _pump_until(conn, got, 4)
    cch.basic_cancel(tag2)
    out["second_cancelled"] = _counts(ch, q)
    return _with_channel_closed(out, cch, ch, q)


@scenario
def scenario_single_active_consumer_count(ctx: Any) -> Any:
    ch = ctx.channel()
    q = ctx.queue()
    args = {**QUORUM, "x-single-active-consumer": True}
    ch.queue_declare(q, durable=True, arguments=args)
    out: dict[str, Any] = {}
    tags = []
    for i in range(3):
        tags.append(ch.basic_consume(q, lambda *a: None, consumer_tag=ctx.token(f"c{i}")))
        out[f"consumers_{i + 1}"] = _counts(ch, q)
    ch.basic_cancel(tags[1])
    out["waiting_cancelled"] = _counts(ch, q)
    ch.basic_cancel(tags[0])
    out["active_cancelled"] = _counts(ch, q)
    ch.basic_cancel(tags[2])
    out["none"] = _counts(ch, q)
    return out


@scenario
def scenario_get_ok_count_after_expired_heads(ctx: Any) -> Any:
    """A settled (no-ack) basic.get's count leaves out the expired messages the fetch brought to
    the head; an unsettled one's still counts them (they go at the next command)."""
    ch = ctx.confirm_channel(ctx.connect())
    out: dict[str, Any] = {}
    for auto_ack in (True, False):
        q = ctx.queue(f"q_{auto_ack}")
        ch.queue_declare(q, durable=True, arguments=QUORUM)
        ch.basic_publish("", q, b"m.0")
        for i in (1, 2):
            ch.basic_publish("", q, f"m.{i}".encode(), properties=_expiring("50"))
        ch.basic_publish("", q, b"m.3")
        time.sleep(0.4)
        out[f"auto_ack_{auto_ack}"] = {"reads": _reads(ch, q, auto_ack), "after": _counts(ch, q)}
    return out


@scenario
def scenario_expired_message_rejected_with_requeue(ctx: Any) -> Any:
    _conn, ch, q = _quorum_queue_with(ctx, 0)
    ch.basic_publish("", q, b"m.0", properties=_expiring("200"))
    ch.basic_publish("", q, b"m.1")
    m, _, body = ch.basic_get(q, auto_ack=False)
    out: dict[str, Any] = {"got": [body.decode(), m.message_count]}
    time.sleep(0.4)
    ch.basic_reject(m.delivery_tag, requeue=True)
    out["after_reject"] = _settled(ch, q)
    out["reads"] = _reads(ch, q, auto_ack=True)
    out["after"] = _counts(ch, q)
    return out


def _expiring(ms: str) -> Any:
    import pika

    return pika.BasicProperties(expiration=ms)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("name", "target"), registry.params())
def test_differential(name: str, target: str, request: pytest.FixtureRequest) -> None:
    run_differential(registry, name, target, request)
