"""Round trips through real clients (pika blocking, aio-pika, aiormq) against the in-process broker."""

from __future__ import annotations

import asyncio
import time

import aio_pika
import aiormq
import pika
import pytest

from broker.server import Broker


def test_pika_declare_bind_publish_get_ack(hashbroker: str) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(hashbroker))
    ch = conn.channel()
    ch.exchange_declare("e", "direct")
    q = ch.queue_declare("", exclusive=True).method.queue
    assert q.startswith("amq.gen-")
    ch.queue_bind(q, "e", "k")
    ch.confirm_delivery()
    props = pika.BasicProperties(
        content_type="text/plain",
        headers={"a": 1, "s": "x"},
        message_id="m1",
        delivery_mode=2,
        priority=3,
        timestamp=1700000000,
    )
    ch.basic_publish("e", "k", b"hello", props, mandatory=True)
    method, got_props, body = ch.basic_get(q)
    assert body == b"hello" and method.routing_key == "k" and method.exchange == "e"
    assert got_props.headers == {"a": 1, "s": "x"} and got_props.message_id == "m1"
    assert got_props.timestamp == 1700000000 and got_props.priority == 3
    ch.basic_nack(method.delivery_tag, requeue=True)
    method, _p, _b = ch.basic_get(q)
    assert method.redelivered
    ch.basic_ack(method.delivery_tag)
    assert ch.basic_get(q) == (None, None, None)
    conn.close()


def test_pika_consume_prefetch_and_requeue_order(hashbroker: str) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(hashbroker))
    ch = conn.channel()
    ch.queue_declare("q")
    for i in range(5):
        ch.basic_publish("", "q", str(i).encode())
    ch.basic_qos(prefetch_count=2)
    seen: list[tuple[bytes, bool, int]] = []
    ch.basic_consume("q", lambda c, m, p, b: seen.append((b, m.redelivered, m.delivery_tag)))
    deadline = time.time() + 5
    while len(seen) < 2 and time.time() < deadline:
        conn.process_data_events(0.05)
    conn.process_data_events(0.2)
    assert [s[0] for s in seen] == [b"0", b"1"]  # prefetch 2 holds the rest back
    ch.basic_nack(seen[1][2], multiple=True, requeue=True)
    deadline = time.time() + 5
    while len(seen) < 4 and time.time() < deadline:
        conn.process_data_events(0.05)
    # requeued messages keep their original position and are flagged redelivered
    assert seen[2][:2] == (b"0", True) and seen[3][:2] == (b"1", True)
    conn.close()


def test_pika_mandatory_return_and_large_body(hashbroker: str) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(hashbroker))
    ch = conn.channel()
    ch.confirm_delivery()
    with pytest.raises(pika.exceptions.UnroutableError):
        ch.basic_publish("amq.direct", "nowhere", b"x", mandatory=True)
    ch.queue_declare("big", auto_delete=False)
    body = bytes(range(256)) * 2000  # 512000 bytes: split over several frames
    ch.basic_publish("", "big", body)
    _m, _p, got = ch.basic_get("big", auto_ack=True)
    assert got == body
    conn.close()


def test_dead_letter_and_ttl(hashbroker: str) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(hashbroker))
    ch = conn.channel()
    ch.exchange_declare("dlx", "fanout")
    ch.queue_declare("dead")
    ch.queue_bind("dead", "dlx")
    ch.queue_declare("work", arguments={"x-dead-letter-exchange": "dlx", "x-message-ttl": 50})
    ch.basic_publish("", "work", b"a")
    time.sleep(0.3)
    conn.process_data_events(0.1)
    _method, props, body = ch.basic_get("dead", auto_ack=True)
    assert body == b"a"
    death = props.headers["x-death"][0]
    assert death["reason"] == "expired" and death["queue"] == "work" and death["count"] == 1
    assert props.headers["x-first-death-reason"] == "expired"
    conn.close()


def test_max_length_drop_head_and_reject_publish(hashbroker: str) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(hashbroker))
    ch = conn.channel()
    ch.queue_declare("ml", arguments={"x-max-length": 2})
    for i in range(4):
        ch.basic_publish("", "ml", str(i).encode())
    assert ch.queue_declare("ml", passive=True).method.message_count == 2
    assert ch.basic_get("ml", auto_ack=True)[2] == b"2"
    ch.queue_declare("rp", arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    ch.confirm_delivery()
    ch.basic_publish("", "rp", b"1")
    with pytest.raises(pika.exceptions.NackError):
        ch.basic_publish("", "rp", b"2")
    conn.close()


def test_priority_queue(hashbroker: str) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(hashbroker))
    ch = conn.channel()
    ch.queue_declare("pq", arguments={"x-max-priority": 5})
    for prio in (1, 5, 3):
        ch.basic_publish("", "pq", str(prio).encode(), pika.BasicProperties(priority=prio))
    got = [ch.basic_get("pq", auto_ack=True)[2] for _ in range(3)]
    assert got == [b"5", b"3", b"1"]
    conn.close()


def test_queue_delete_cancels_consumer(hashbroker: str) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(hashbroker))
    ch = conn.channel()
    ch.queue_declare("gone")
    cancelled: list[object] = []
    ch.add_on_cancel_callback(cancelled.append)
    ch.basic_consume("gone", lambda *a: None)
    other = conn.channel()
    other.queue_delete("gone")
    deadline = time.time() + 3
    while not cancelled and time.time() < deadline:
        conn.process_data_events(0.05)
    assert cancelled
    conn.close()


def test_tx_commit_and_rollback(hashbroker: str) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(hashbroker))
    ch = conn.channel()
    ch.queue_declare("tx")
    ch.tx_select()
    ch.basic_publish("", "tx", b"rolled back")
    ch.tx_rollback()
    ch.basic_publish("", "tx", b"committed")
    assert ch.queue_declare("tx", passive=True).method.message_count == 0
    ch.tx_commit()
    assert ch.basic_get("tx", auto_ack=True)[2] == b"committed"
    conn.close()


def test_direct_reply_to(hashbroker: str) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(hashbroker))
    client = conn.channel()
    server = conn.channel()
    server.queue_declare("rpc")
    replies: list[bytes] = []
    client.basic_consume("amq.rabbitmq.reply-to", lambda c, m, p, b: replies.append(b), auto_ack=True)
    client.basic_publish("", "rpc", b"ping", pika.BasicProperties(reply_to="amq.rabbitmq.reply-to"))
    _m, props, _b = server.basic_get("rpc", auto_ack=True)
    assert props.reply_to.startswith("amq.rabbitmq.reply-to.")
    server.basic_publish("", props.reply_to, b"pong")
    deadline = time.time() + 3
    while not replies and time.time() < deadline:
        conn.process_data_events(0.05)
    assert replies == [b"pong"]
    conn.close()


async def test_aio_pika_roundtrip() -> None:
    async with Broker(port=0) as broker:
        conn = await aio_pika.connect(broker.url)
        async with conn:
            channel = await conn.channel()
            exchange = await channel.declare_exchange("fx", aio_pika.ExchangeType.FANOUT)
            q1 = await channel.declare_queue("a", exclusive=True)
            q2 = await channel.declare_queue("b", exclusive=True)
            await q1.bind(exchange)
            await q2.bind(exchange)
            await exchange.publish(aio_pika.Message(b"fan", headers={"h": "v"}), routing_key="")
            for q in (q1, q2):
                msg = await q.get(timeout=5)
                assert msg.body == b"fan" and msg.headers == {"h": "v"}
                await msg.ack()
            async with q1.iterator() as it:
                await exchange.publish(aio_pika.Message(b"again"), routing_key="")
                async for msg in it:
                    async with msg.process():
                        assert msg.body == b"again"
                    break


async def test_aiormq_roundtrip() -> None:
    async with Broker(port=0) as broker:
        conn = await aiormq.connect(broker.url)
        channel = await conn.channel()
        await channel.confirm_delivery()
        declare = await channel.queue_declare("raw", auto_delete=False)
        assert declare.queue == "raw"
        await channel.basic_publish(
            b"body", routing_key="raw", properties=aiormq.spec.Basic.Properties(correlation_id="c1")
        )
        got: asyncio.Future[aiormq.abc.DeliveredMessage] = asyncio.get_running_loop().create_future()
        await channel.basic_consume("raw", got.set_result)
        msg = await asyncio.wait_for(got, 5)
        assert msg.body == b"body" and msg.header.properties.correlation_id == "c1"
        await channel.basic_ack(msg.delivery.delivery_tag)
        await conn.close()
