"""Where a server-sent basic.cancel falls on the wire when a synchronous method cancels consumers.

RabbitMQ 3.10.8's queue process tells a consumer's channel that its queue went away by message,
so the channel that asked for the deletion sends its reply first and the basic.cancel after it
(py-amqp, kombu and Celery rely on it: a cancel inside `queue_delete()` raises ConsumerCancelled).
The scenarios talk raw frames (pamqp) and record the server's frames in order.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from pamqp import commands, frame, header

from tests.differential_support import Ctx, Registry, frame_obs, run_differential

registry = Registry()
scenario = registry.scenario

CANCEL_NOTIFY = {"capabilities": {"consumer_cancel_notify": True}}


def _connect(ctx: Ctx) -> Any:
    raw = ctx.raw(handshake=False)
    # the capability must be announced for RabbitMQ to send basic.cancel at all
    raw.sock.sendall(frame.marshal(header.ProtocolHeader(), 0))
    raw.expect(commands.Connection.Start)
    raw.send(
        0,
        commands.Connection.StartOk(
            client_properties={"product": "hashbroker-tests", **CANCEL_NOTIFY},
            response=f"\0{raw.user}\0{raw.password}",
        ),
    )
    tune = raw.expect(commands.Connection.Tune)
    raw.send(
        0, commands.Connection.TuneOk(channel_max=tune.channel_max, frame_max=tune.frame_max, heartbeat=0)
    )
    raw.send(0, commands.Connection.Open(virtual_host=raw.vhost))
    raw.expect(commands.Connection.OpenOk)
    return raw


def _declare(raw: Any, channel: int, queue: str, **kw: Any) -> None:
    raw.call(channel, commands.Queue.Declare(queue=queue, **kw), commands.Queue.DeclareOk)


def _consume(raw: Any, channel: int, queue: str, tag: str) -> None:
    raw.call(channel, commands.Basic.Consume(queue=queue, consumer_tag=tag), commands.Basic.ConsumeOk)


def _frames(raw: Any) -> list[Any]:
    return [frame_obs(ch, value) for ch, value in raw.frames_until_quiet(0.5)]


def _channel_with_queue(ctx: Ctx, **declare: Any) -> tuple[Any, str]:
    """A raw connection announcing consumer_cancel_notify, channel 1 open, and a queue declared on
    it with `declare`'s queue.declare fields."""
    raw = _connect(ctx)
    raw.open_channel(1)
    q = ctx.queue()
    _declare(raw, 1, q, **declare)
    return raw, q


def _delete_while_consuming(declare: dict[str, Any], tags: tuple[str, ...]) -> Any:
    """The scenario: consumers `tags` on channel 1, which then deletes their queue."""

    def run(ctx: Ctx) -> Any:
        raw, q = _channel_with_queue(ctx, **declare)
        for tag in tags:
            _consume(raw, 1, q, ctx.token(tag))
        raw.send(1, commands.Queue.Delete(queue=q))
        return _frames(raw)

    return run


#: Deletes on the channel that consumes: (scenario, queue.declare fields, consumer tags).
DELETES_ON_THE_CONSUMING_CHANNEL: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
    ("delete_on_the_consuming_channel", {}, ("ctag",)),
    (
        "delete_of_a_quorum_queue_on_the_consuming_channel",
        {"durable": True, "arguments": {"x-queue-type": "quorum"}},
        ("ctag",),
    ),
    ("delete_with_two_consumers_on_the_channel", {}, ("ctag1", "ctag2")),
    ("delete_of_an_exclusive_auto_delete_queue", {"exclusive": True, "auto_delete": True}, ("ctag",)),
]
for _name, _declared, _tags in DELETES_ON_THE_CONSUMING_CHANNEL:
    registry.add(_name, _delete_while_consuming(_declared, _tags))


@scenario
def scenario_delete_on_another_channel(ctx: Ctx) -> Any:
    raw = _connect(ctx)
    raw.open_channel(1)
    raw.open_channel(2)
    q = ctx.queue()
    _declare(raw, 1, q)
    _consume(raw, 2, q, ctx.token("ctag"))
    raw.send(1, commands.Queue.Delete(queue=q))
    # two channels' frames interleave in either order on RabbitMQ (each channel process writes its
    # own): only the order within each channel is compared
    frames = _frames(raw)
    return {str(n): [f for f in frames if f[0] == n] for n in (1, 2)}


@scenario
def scenario_py_amqp_queue_delete_returns_then_sees_the_cancel(ctx: Ctx) -> Any:
    """py-amqp (under kombu and Celery) deleting the queue its channel consumes: queue_delete()
    returns the count, and the cancel arrives with the next read."""
    import amqp

    host, port = ctx.url.split("@", 1)[1].split("/", 1)[0].split(":")
    conn = amqp.Connection(f"{host}:{port}", userid="guest", password="guest", connect_timeout=5)
    conn.connect()
    try:
        ch = conn.channel()
        q = ctx.queue()
        ch.queue_declare(q)
        cancelled: list[str] = []
        tag = ctx.token("ctag")
        ch.basic_consume(q, consumer_tag=tag, callback=lambda m: None, on_cancel=cancelled.append)
        out: dict[str, Any] = {}
        try:
            out["queue_delete"] = ch.queue_delete(q)
        except amqp.exceptions.ConsumerCancelled as exc:
            out["queue_delete"] = f"raised {type(exc).__name__}"
        out["cancelled_by_then"] = list(cancelled)
        with contextlib.suppress(TimeoutError):
            conn.drain_events(timeout=1)
        out["cancelled_after_a_read"] = list(cancelled)
        # without on_cancel (kombu's consumers), the cancel raises where it is read
        q2 = ctx.queue("q2")
        ch.queue_declare(q2)
        ch.basic_consume(q2, consumer_tag=ctx.token("ctag2"), callback=lambda m: None)
        try:
            out["plain_queue_delete"] = ch.queue_delete(q2)
        except amqp.exceptions.ConsumerCancelled as exc:
            out["plain_queue_delete"] = f"raised {type(exc).__name__}"
        try:
            conn.drain_events(timeout=1)
            out["plain_next_read"] = "nothing raised"
        except amqp.exceptions.ConsumerCancelled as exc:
            out["plain_next_read"] = f"raised {type(exc).__name__}"
        except TimeoutError:
            out["plain_next_read"] = "timeout"
        return ctx.scrub(out)
    finally:
        conn.close()


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("name", "target"), registry.params())
def test_differential(name: str, target: str, request: pytest.FixtureRequest) -> None:
    run_differential(registry, name, target, request)
