"""Super streams over the broker's exchanges: the stream protocol's route and partitions answers
come from a direct exchange's bindings to stream queues, partitions in x-stream-partition-order
(the way RabbitMQ 3.10.8's rabbit_stream_manager reads them), whatever order they were bound in;
a deleted stream or exchange drops out."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pika

from broker.runtime.stream_adapter import BrokerStreams
from tests.integration.test_stream_protocol_amqp import running


def _declare(port: int) -> None:
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
    try:
        ch = conn.channel()
        ch.exchange_declare("orders", "direct", durable=True)
        for i in (2, 0, 1):
            ch.queue_declare(f"orders-{i}", durable=True, arguments={"x-queue-type": "stream"})
            ch.queue_bind(f"orders-{i}", "orders", f"k{i}", arguments={"x-stream-partition-order": i})
    finally:
        conn.close()


def _delete_queue(port: int, name: str) -> None:
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
    try:
        conn.channel().queue_delete(name)
    finally:
        conn.close()


async def test_route_and_partitions_follow_the_bindings(tmp_path: Path) -> None:
    async with running(tmp_path) as (broker, _port):
        streams = BrokerStreams(broker, loopback_users=(), advertised_host="127.0.0.1", advertised_port=0)
        await asyncio.to_thread(_declare, broker.port)
        assert streams.partitions("/", "orders") == ["orders-0", "orders-1", "orders-2"]
        assert streams.route("/", "orders", "k1") == ["orders-1"]
        assert streams.route("/", "orders", "other") == []
        assert streams.partitions("/", "missing") is None
        assert streams.route("/", "missing", "k1") is None
        await asyncio.to_thread(_delete_queue, broker.port, "orders-1")
        assert streams.partitions("/", "orders") == ["orders-0", "orders-2"]
        assert streams.route("/", "orders", "k1") == []
