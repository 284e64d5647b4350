"""Super-stream routing: the same routing keys land in the same partitions on hashbroker as on
RabbitMQ 3.10.8.

The super stream is made as 3.10.8 supports it (it has no create-super-stream command): a direct
exchange and one stream per partition, each bound with its binding key and an
`x-stream-partition-order` argument, bound out of order, plus one key bound to two partitions.
The program asks the route and partitions commands over a raw socket with hashbroker's own frame
codec (tests/stream_raw.py: rstream 1.1.1 cannot decode 3.10.8's route and partitions responses),
then publishes like a
super-stream producer of the official clients: each message to the partition the murmur3 hash
of its routing key picks from the partitions answer (rstream's HashRoutingMurmurStrategy), and
each message with a bound key to the partitions the route answer names (its
RoutingKeyRoutingStrategy). It reads every partition back and returns the answers and what each
partition holds, names relative to the super stream.

RabbitMQ's answers are recorded in tests/data/stream_protocol/superstream_rabbitmq_3.10.8.json
(tests/differential/test_stream_superstream_differential.py checks the recording against the live
broker and writes it with HB_RECORD=1); here hashbroker is compared with the recording.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import mmh3
import pika
import rstream
from rstream import AMQPMessage, Producer

from broker.streamproto import frames as F
from tests.integration.test_stream_protocol_amqp import running
from tests.stream_raw import RawStream
from tests.stream_recording import jsonable, recorded

USER = PASSWORD = "guest"
PARTITIONS = 3
BOUND_ORDER = (2, 0, 1)  # bound out of order: partitions come in x-stream-partition-order
SHARED_KEY = "shared"  # bound to two partitions
KEYS = [str(i) for i in range(PARTITIONS)] + [SHARED_KEY, "unbound", ""]
HASHED = [f"customer-{i}" for i in range(24)]
RECORDED = "superstream_rabbitmq_3.10.8.json"


def declare(amqp_port: int, name: str) -> None:
    """The super stream as RabbitMQ 3.10.8 takes it: a direct exchange, bound streams."""
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", amqp_port))
    try:
        ch = conn.channel()
        ch.exchange_declare(name, "direct", durable=True)
        for i in BOUND_ORDER:
            ch.queue_declare(f"{name}-{i}", durable=True, arguments={"x-queue-type": "stream"})
            ch.queue_bind(f"{name}-{i}", name, str(i), arguments={"x-stream-partition-order": i})
        for i in (2, 0):
            ch.queue_bind(f"{name}-{i}", name, SHARED_KEY, arguments={"x-stream-partition-order": i})
    finally:
        conn.close()


def delete(amqp_port: int, name: str) -> None:
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", amqp_port))
    try:
        ch = conn.channel()
        for i in range(PARTITIONS):
            ch.queue_delete(f"{name}-{i}")
        ch.exchange_delete(name)
    finally:
        conn.close()


def murmur_partition(key: str, partitions: list[str]) -> str:
    """The partition the official clients' hash strategy picks (rstream HashRoutingMurmurStrategy:
    murmur3 x64 128 of the UTF-16 key, seed 104729, its first 16 bytes little-endian)."""
    digest = mmh3.hash_bytes(key.encode("utf-16"), 104729)
    return partitions[int.from_bytes(digest, "little") % len(partitions)]


async def _read_all(port: int, stream: str) -> list[str]:
    """Every body of `stream` from the first offset (until nothing came for half a second)."""
    got: list[str] = []

    async def on_message(msg: AMQPMessage, ctx: rstream.MessageContext) -> None:
        got.append(bytes(msg.body if isinstance(msg.body, bytes) else b"".join(msg.body)).decode())

    consumer = rstream.Consumer("127.0.0.1", port=port, username=USER, password=PASSWORD)
    await consumer.start()
    try:
        spec = rstream.ConsumerOffsetSpecification(rstream.OffsetType.FIRST, None)
        await consumer.subscribe(stream, on_message, decoder=rstream.amqp_decoder, offset_specification=spec)
        seen = -1
        while seen != len(got):
            seen = len(got)
            await asyncio.sleep(0.5)
    finally:
        await consumer.close()
    return got


async def program(stream_port: int, name: str) -> dict[str, Any]:
    """Routing answers and partition contents for the super stream `name` (declared already);
    stream names are given relative to it ("{ss}-0")."""

    def rel(streams: list[str]) -> list[str]:
        return [s.replace(name, "{ss}", 1) for s in streams]

    out: dict[str, Any] = {"route": {}}
    raw = await RawStream.open(stream_port)
    try:
        code, partitions = await raw.streams(F.Partitions(raw.next(), name))
        out["partitions"] = [code, rel(partitions)]
        routes: dict[str, list[str]] = {}
        for key in KEYS:
            code, routes[key] = await raw.streams(F.Route(raw.next(), key, name))
            out["route"][key] = [code, rel(routes[key])]
        out["missing super stream"] = {
            "partitions": list(await raw.streams(F.Partitions(raw.next(), f"{name}-missing"))),
            "route": list(await raw.streams(F.Route(raw.next(), "0", f"{name}-missing"))),
        }
    finally:
        await raw.close()
    async with Producer("127.0.0.1", port=stream_port, username=USER, password=PASSWORD) as producer:
        for key in HASHED:
            await producer.send_wait(
                murmur_partition(key, partitions), AMQPMessage(body=f"hash:{key}".encode())
            )
        for key in KEYS:
            for stream in routes[key]:
                await producer.send_wait(stream, AMQPMessage(body=f"key:{key}".encode()))
    unique = sorted(set(partitions))
    held = await asyncio.gather(*(_read_all(stream_port, p) for p in unique))
    out["held"] = {rel([p])[0]: bodies for p, bodies in zip(unique, held, strict=True)}
    return out


async def run_hashbroker(data_dir: Path, name: str) -> dict[str, Any]:
    async with running(data_dir) as (broker, port):
        await asyncio.to_thread(declare, broker.port, name)
        return jsonable(await program(port, name))


async def test_super_stream_routing_as_recorded_on_rabbitmq(tmp_path: Path) -> None:
    ours = await asyncio.wait_for(run_hashbroker(tmp_path, "hb-stream1-orders"), 60)
    assert ours == recorded(RECORDED)
    held = ours["held"]
    assert sum(len(v) for v in held.values()) == len(HASHED) + PARTITIONS + 2  # "shared" twice
    assert all(v for v in held.values())  # the hash spreads the keys over every partition
