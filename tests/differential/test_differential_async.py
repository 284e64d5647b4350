"""Differential scenarios driven by the asyncio clients (aio-pika, aiormq).

They exercise what pika does not: pamqp's full field-table types (floats, byte arrays, nested arrays),
aio-pika's confirm/return handling, aiormq's raw method results, and direct reply-to. Each scenario is
still a plain function of the URL (it runs its own event loop) with a hard ``asyncio.wait_for``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections.abc import AsyncIterator, Awaitable
from decimal import Decimal
from typing import Any, TypeVar

import aio_pika
import aiormq
import aiormq.exceptions
import pytest
from pamqp import commands

from tests.differential_support import ALL_PROPERTIES, Ctx, Registry, jsonable, run_differential

registry = Registry()
scenario = registry.scenario


@contextlib.asynccontextmanager
async def _aio_pika_queue(
    ctx: Ctx, q: str, *, auto_delete: bool = False, **channel_args: Any
) -> AsyncIterator[tuple[Any, Any, Any]]:
    """An aio-pika connection to the broker under test, a channel on it and queue `q` declared."""
    conn = await aio_pika.connect(ctx.url, timeout=5)
    async with conn:
        ch = await conn.channel(**channel_args)
        yield conn, ch, await ch.declare_queue(q, auto_delete=auto_delete)


T = TypeVar("T")
LIMIT = 15.0


def _run(coro: Awaitable[T]) -> T:
    """Run a coroutine with a hard deadline so a silent broker fails the scenario."""

    async def bounded() -> T:
        return await asyncio.wait_for(coro, LIMIT)

    return asyncio.run(bounded())


def _typed(value: Any) -> Any:
    """A value with its Python type, so int/float/bool/bytes/str confusions show up."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [_typed(v) for v in value]
    return [type(value).__name__, jsonable(value)]


def _channel_error(exc: BaseException) -> Any:
    """aiormq wraps Channel.Close in exceptions whose args carry the frame or the text."""
    frame = exc.args[0] if exc.args else None
    if isinstance(frame, commands.Channel.Close | commands.Connection.Close):
        return [type(exc).__name__, frame.reply_code, frame.reply_text]
    return [type(exc).__name__, [str(a) for a in exc.args]]


#: The properties the aio-pika round trip sets and reads back.
ASYNC_PROPERTIES = ("content_type", "priority", "correlation_id", "message_id", "type", "app_id")


@scenario
def scenario_aiopika_header_types_roundtrip(ctx: Ctx) -> Any:
    """Every AMQP field-table type survives the broker unchanged (type and value)."""
    q = ctx.queue()

    async def main() -> Any:
        async with _aio_pika_queue(ctx, q) as (_conn, ch, queue):
            headers = {
                "str": "text",
                "int": 7,
                "neg": -7,
                "big": 2**40,
                "float": 1.25,
                "bool": True,
                "false": False,
                "bytes": bytearray(b"\x00\x01raw"),
                "decimal": Decimal("3.14"),
                "list": [1, "a", [2, 3], {"k": "v"}],
                "dict": {"nested": {"deep": 1}},
                "none": None,
                "ts": datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=datetime.UTC),
            }
            props = {k: ALL_PROPERTIES[k] for k in ASYNC_PROPERTIES}
            await ch.default_exchange.publish(
                aio_pika.Message(b"body", headers=headers, **props), routing_key=q
            )
            msg = await queue.get(timeout=5)
            await msg.ack()
            return {
                "headers": _typed(dict(msg.headers)),
                "props": [getattr(msg, k) for k in ASYNC_PROPERTIES],
                "body": msg.body.decode(),
                "redelivered": msg.redelivered,
            }

    return _run(main())


@scenario
def scenario_aiopika_confirms_and_returns(ctx: Ctx) -> Any:
    """aio-pika publisher confirms: a mandatory unroutable publish surfaces the basic.return."""
    q = ctx.queue()

    async def main() -> Any:
        async with _aio_pika_queue(ctx, q, publisher_confirms=True, on_return_raises=True) as (_conn, ch, _q):
            ok = await ch.default_exchange.publish(aio_pika.Message(b"ok"), routing_key=q, mandatory=True)
            try:
                await ch.default_exchange.publish(
                    aio_pika.Message(b"lost"), routing_key="nowhere-" + q, mandatory=True
                )
                returned: Any = "no error"
            except aio_pika.exceptions.DeliveryError as exc:
                frame = exc.frame
                returned = [
                    type(frame).__name__,
                    getattr(frame, "reply_code", None),
                    getattr(frame, "reply_text", None),
                    exc.message.body.decode() if exc.message else None,
                ]
            return {"ok": type(ok).__name__, "returned": returned}

    return _run(main())


@scenario
def scenario_aiormq_get_nack_qos(ctx: Ctx) -> Any:
    """aiormq raw results: declare-ok counts, get-ok/get-empty, nack requeue, qos-ok, purge-ok."""
    q = ctx.queue()

    async def main() -> Any:
        conn = await aiormq.connect(ctx.url)
        try:
            ch = await conn.channel()
            declare = await ch.queue_declare(q)
            for i in range(3):
                await ch.basic_publish(f"m{i}".encode(), routing_key=q)
            qos = await ch.basic_qos(prefetch_count=5)
            got = await ch.basic_get(q)
            await ch.basic_nack(got.delivery.delivery_tag, requeue=True)
            again = await ch.basic_get(q, no_ack=True)
            rest = [await ch.basic_get(q, no_ack=True) for _ in range(3)]
            purge = await ch.queue_purge(q)
            return {
                "declare": [declare.message_count, declare.consumer_count],
                "qos": type(qos).__name__,
                "first": [got.body.decode(), got.delivery.redelivered, got.delivery.message_count],
                "again": [again.body.decode(), again.delivery.redelivered],
                "rest": [[type(r.delivery).__name__, r.body.decode() if r.body else None] for r in rest],
                "purge": purge.message_count,
            }
        finally:
            await conn.close()

    return _run(main())


@scenario
def scenario_aiormq_channel_errors(ctx: Ctx) -> Any:
    """aiormq surfaces channel closes as exceptions carrying RabbitMQ's code and text."""
    q, x = ctx.queue(), ctx.exchange()

    async def main() -> Any:
        conn = await aiormq.connect(ctx.url)
        out: dict[str, Any] = {}
        try:
            for label, op in [
                ("passive_queue", lambda c: c.queue_declare(q, passive=True)),
                ("passive_exchange", lambda c: c.exchange_declare(x, passive=True)),
                ("bind_missing", lambda c: c.queue_bind(q, x, routing_key="k")),
                ("default_delete", lambda c: c.exchange_delete("")),
            ]:
                ch = await conn.channel()
                try:
                    await op(ch)
                    out[label] = "ok"
                except aiormq.exceptions.AMQPError as exc:
                    out[label] = _channel_error(exc)
            return out
        finally:
            await conn.close()

    return _run(main())


@scenario
def scenario_direct_reply_to(ctx: Ctx) -> Any:
    """Direct reply-to: consume amq.rabbitmq.reply-to (no-ack), publish with reply_to, get the reply."""
    q = ctx.queue("rpc")

    async def main() -> Any:
        async with _aio_pika_queue(ctx, q, auto_delete=True) as (conn, server_ch, server_q):

            async def serve(msg: aio_pika.abc.AbstractIncomingMessage) -> None:
                async with msg.process():
                    await server_ch.default_exchange.publish(
                        aio_pika.Message(b"pong:" + msg.body, correlation_id=msg.correlation_id),
                        routing_key=msg.reply_to or "",
                    )

            await server_q.consume(serve)
            client_ch = await conn.channel()
            reply_q = await client_ch.get_queue("amq.rabbitmq.reply-to", ensure=False)
            replies: asyncio.Queue[aio_pika.abc.AbstractIncomingMessage] = asyncio.Queue()
            await reply_q.consume(replies.put, no_ack=True)
            await client_ch.default_exchange.publish(
                aio_pika.Message(b"ping", correlation_id="c1", reply_to="amq.rabbitmq.reply-to"),
                routing_key=q,
            )
            reply = await asyncio.wait_for(replies.get(), 5)
            return {
                "body": reply.body.decode(),
                "correlation_id": reply.correlation_id,
                "routing_key_prefix": (reply.routing_key or "")[:22],
            }

    return _run(main())


@scenario
def scenario_aiopika_consumer_cancel_on_delete(ctx: Ctx) -> Any:
    """Deleting a queue with a consumer sends basic.cancel to it (consumer_cancel_notify)."""
    q = ctx.queue()

    async def main() -> Any:
        conn = await aiormq.connect(ctx.url + "?name=cancel-test")
        try:
            ch = await conn.channel()
            await ch.queue_declare(q)

            async def ignore(_message: Any) -> None:
                return None

            ok = await ch.basic_consume(q, ignore, consumer_tag="watch")
            other = await conn.channel()
            deleted = await other.queue_delete(q)
            await asyncio.sleep(0.3)
            consumers = sorted(ch.consumers)  # aiormq drops a consumer when basic.cancel arrives
            return {
                "consume_ok": ok.consumer_tag,
                "deleted": deleted.message_count,
                "consumers_left": consumers,
            }
        finally:
            await conn.close()

    return _run(main())


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("name", "target"), registry.params())
def test_differential(name: str, target: str, request: pytest.FixtureRequest) -> None:
    run_differential(registry, name, target, request)
