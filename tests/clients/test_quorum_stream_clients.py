"""Real clients on quorum queues and streams, against hashbroker and RabbitMQ 3.10.8.

* aio-pika reads a stream as its users do: ``basic.qos`` then a manual-ack consumer with
  ``x-stream-offset`` ``first``, a numeric offset, a timestamp (AMQP ``T``, a ``datetime``) and an
  interval string (``"1h"``, and one of a few seconds that falls between two batches). The same
  test runs on both brokers (parametrised) and asserts the same values: offsets in each delivery's
  ``x-stream-offset`` header, bodies, delivery tags, ``redelivered`` false, credit = prefetch.
* The RabbitMQ Java client (``java/QueueTypesJavaClient.java``) and Node's amqplib
  (``node/queue_types.js``) each declare one quorum queue (confirmed publishes, prefetch 2,
  manual acks, one nack-requeue whose redelivery carries ``x-delivery-count`` 1) and one stream
  (confirmed publishes, consume from ``first`` and from offset 3 with ``x-stream-offset`` checked).
  Their output against the live RabbitMQ and against hashbroker must be equal (for Node including
  the raw content-header frames); the key facts are also pinned on hashbroker alone.

Java and Node skip with the reason when the JDK / ``amqp-client.jar`` or ``node`` / the pinned
amqplib (``npm ci --prefix tests/clients/node``) are missing.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aio_pika
import pytest
from aio_pika.abc import AbstractIncomingMessage
from pamqp.commands import Basic

from tests.clients.test_clients_java import compile_java
from tests.clients.test_clients_node import NODE_DIR, _node_available
from tests.differential_support import hashbroker_url

pytestmark = [pytest.mark.slow]

TARGETS = ["hashbroker", "rabbitmq"]
JAVA_DIR = Path(__file__).resolve().parent / "java"
#: How long a step waits for a delivery that must come.
WAIT = 15.0


def target_url(target: str, request: pytest.FixtureRequest) -> str:
    """The broker under test: a fresh embedded hashbroker, or the live RabbitMQ (skips if absent)."""
    if target == "rabbitmq":
        url: str = request.getfixturevalue("rabbitmq_url")
        return url
    return hashbroker_url(request)


def run(coro: Awaitable[Any], timeout: float = 90) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))


# --------------------------------------------------------------------------------------------------
# aio-pika on a stream
# --------------------------------------------------------------------------------------------------


class StreamReader:
    """One aio-pika consumer on its own channel with a prefetch; deliveries land in an asyncio queue."""

    def __init__(self, conn: aio_pika.abc.AbstractRobustConnection | aio_pika.abc.AbstractConnection) -> None:
        self.conn = conn
        self.inbox: asyncio.Queue[AbstractIncomingMessage] = asyncio.Queue()
        self.held: list[AbstractIncomingMessage] = []
        self.tag = ""

    async def start(self, queue_name: str, offset: Any, prefetch: int) -> StreamReader:
        self.channel = await self.conn.channel()
        await self.channel.set_qos(prefetch_count=prefetch)
        queue = await self.channel.get_queue(queue_name, ensure=False)
        self.queue = queue

        async def on_message(msg: AbstractIncomingMessage) -> None:
            await self.inbox.put(msg)

        self.tag = await queue.consume(on_message, no_ack=False, arguments={"x-stream-offset": offset})
        return self

    async def take(self, n: int, *, ack: bool = True) -> list[dict[str, Any]]:
        """The next ``n`` deliveries (acked one by one unless ``ack`` is false), as observed."""
        out = []
        for _ in range(n):
            msg = await asyncio.wait_for(self.inbox.get(), WAIT)
            headers = dict(msg.headers or {})
            out.append(
                {
                    "body": msg.body.decode(),
                    "offset": headers.get("x-stream-offset"),
                    "i": headers.get("i"),
                    "delivery_tag": msg.delivery_tag,
                    "redelivered": msg.redelivered,
                }
            )
            if ack:
                await msg.ack()
            else:
                self.held.append(msg)
        return out

    async def ack_held(self) -> None:
        for msg in self.held:
            await msg.ack()
        self.held.clear()

    async def stop(self) -> None:
        await self.queue.cancel(self.tag)
        await self.channel.close()


async def _stream(
    url: str, body: Callable[[aio_pika.abc.AbstractConnection, str, Any], Awaitable[Any]]
) -> Any:
    """Declare a uniquely named stream, run ``body(conn, name, publish)``, delete the stream."""
    name = f"qsclients.stream.{uuid.uuid4().hex[:12]}"
    conn = await aio_pika.connect(url, timeout=10)
    async with conn:
        ch = await conn.channel()  # publisher confirms on: each publish returns its Basic.Ack
        await ch.declare_queue(name, durable=True, arguments={"x-queue-type": "stream"})
        try:

            async def publish(bodies: list[str], start: int = 0) -> list[Any]:
                confirms = []
                for k, text in enumerate(bodies):
                    message = aio_pika.Message(text.encode(), headers={"i": start + k})
                    confirms.append(await ch.default_exchange.publish(message, routing_key=name))
                return confirms

            return await body(conn, name, publish)
        finally:
            await ch.queue_delete(name)


def _offsets(deliveries: list[dict[str, Any]]) -> list[int]:
    return [d["offset"] for d in deliveries]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("target", TARGETS)
def test_aio_pika_stream_from_first(target: str, request: pytest.FixtureRequest) -> None:
    """From ``first`` with prefetch 3: three deliveries until acks free credit, then the rest in
    offset order; a second consumer from offset 7 reads 7..9; a third from ``first`` re-reads all."""
    url = target_url(target, request)

    async def body(conn: Any, name: str, publish: Any) -> dict[str, Any]:
        confirms = await publish([f"m{i}" for i in range(10)])
        assert all(isinstance(c, Basic.Ack) for c in confirms), confirms
        reader = await StreamReader(conn).start(name, "first", prefetch=3)
        held = await reader.take(3, ack=False)
        await asyncio.sleep(0.5)  # a 4th delivery here would mean the prefetch was ignored
        beyond_credit = reader.inbox.qsize()
        await reader.ack_held()  # credit again: the other seven follow
        rest = await reader.take(7)
        await reader.stop()
        from_seven = await StreamReader(conn).start(name, 7, prefetch=2)
        seven = await from_seven.take(3)
        await from_seven.stop()
        again = await StreamReader(conn).start(name, "first", prefetch=5)
        reread = await again.take(10)
        await again.stop()
        return {"held": held, "beyond_credit": beyond_credit, "rest": rest, "seven": seven, "reread": reread}

    obs = run(_stream(url, body))
    assert obs["beyond_credit"] == 0, "more deliveries than the prefetch of 3 before any ack"
    first = obs["held"] + obs["rest"]
    assert _offsets(first) == list(range(10))
    assert [d["body"] for d in first] == [f"m{i}" for i in range(10)]
    assert [d["i"] for d in first] == list(range(10))  # the publisher's header is kept
    assert [d["delivery_tag"] for d in first] == list(range(1, 11))
    assert not any(d["redelivered"] for d in first)
    assert all(type(d["offset"]) is int for d in first)
    assert _offsets(obs["seven"]) == [7, 8, 9] and [d["body"] for d in obs["seven"]] == ["m7", "m8", "m9"]
    assert [d["delivery_tag"] for d in obs["seven"]] == [1, 2, 3]  # tags count per channel
    assert _offsets(obs["reread"]) == list(range(10))  # acks never take messages out of a stream


@pytest.mark.timeout(150)
@pytest.mark.parametrize("target", TARGETS)
def test_aio_pika_stream_from_timestamp(target: str, request: pytest.FixtureRequest) -> None:
    """Batch A, then (past a whole second T and a gap of at least 4 s) batch B. ``x-stream-offset``
    as the timestamp T reads B only; ``"1h"`` reads A and B; an interval of whole seconds reaching
    back to the middle of the gap reads B only. The gap leaves more than a second of margin either
    side of every boundary, so a loaded machine cannot move a message across it."""
    url = target_url(target, request)

    async def body(conn: Any, name: str, publish: Any) -> dict[str, Any]:
        await publish([f"a{i}" for i in range(5)])
        a_done = time.time()
        boundary = int(a_done) + 1  # a whole second after every message of A
        while time.time() < boundary + 4.0:
            await asyncio.sleep(0.1)
        b_start = time.time()
        await publish([f"b{i}" for i in range(5)], start=5)
        out: dict[str, Any] = {}
        since = datetime.fromtimestamp(boundary, tz=UTC)  # aio-pika sends a datetime as AMQP 'T'
        for label, offset in (("timestamp", since), ("hour", "1h")):
            reader = await StreamReader(conn).start(name, offset, prefetch=4)
            out[label] = await reader.take(5 if label == "timestamp" else 10)
            await asyncio.sleep(0.3)
            out[label + "_more"] = reader.inbox.qsize()
            await reader.stop()
        interval = round(time.time() - (a_done + b_start) / 2)
        reader = await StreamReader(conn).start(name, f"{interval}s", prefetch=4)
        out["interval"] = await reader.take(5)
        await asyncio.sleep(0.3)
        out["interval_more"] = reader.inbox.qsize()
        await reader.stop()
        return out

    obs = run(_stream(url, body), timeout=120)
    assert [d["body"] for d in obs["timestamp"]] == [f"b{i}" for i in range(5)]
    assert _offsets(obs["timestamp"]) == [5, 6, 7, 8, 9]
    assert obs["timestamp_more"] == 0
    assert _offsets(obs["hour"]) == list(range(10)) and obs["hour_more"] == 0
    assert _offsets(obs["interval"]) == [5, 6, 7, 8, 9] and obs["interval_more"] == 0
    assert not any(d["redelivered"] for key in ("timestamp", "hour", "interval") for d in obs[key])


# --------------------------------------------------------------------------------------------------
# Java and Node: one quorum queue and one stream each
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def java_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    """QueueTypesJavaClient compiled with HashbrokerJavaClient (it shares factory() and json())."""
    sources = (JAVA_DIR / "HashbrokerJavaClient.java", JAVA_DIR / "QueueTypesJavaClient.java")
    return compile_java(tmp_path_factory.mktemp("java-queue-types"), *sources)


@pytest.fixture(scope="module")
def node() -> None:
    reason = _node_available()
    if reason:
        pytest.skip(reason)


def _lines(proc: subprocess.CompletedProcess[str], suffix: str) -> list[dict[str, Any]]:
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    text = proc.stdout.replace(suffix, "<suffix>")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


#: (client, target) -> observation: one run per broker per session, shared by the tests below.
_OBSERVED: dict[tuple[str, str], list[dict[str, Any]]] = {}


def observed(
    client: str, target: str, request: pytest.FixtureRequest, classpath: str = ""
) -> list[dict[str, Any]]:
    key = (client, target)
    if key not in _OBSERVED:
        url = target_url(target, request)
        _OBSERVED[key] = java_observation(classpath, url) if client == "java" else node_observation(url)
    return _OBSERVED[key]


def java_observation(classpath: str, url: str) -> list[dict[str, Any]]:
    suffix = uuid.uuid4().hex[:12]
    proc = subprocess.run(
        ["java", "-cp", classpath, "QueueTypesJavaClient", url, suffix],
        capture_output=True,
        text=True,
        timeout=150,
    )
    return _lines(proc, suffix)


def node_observation(url: str) -> list[dict[str, Any]]:
    suffix = f"n{uuid.uuid4().hex[:10]}z"
    proc = subprocess.run(
        ["node", "queue_types.js", url, suffix], cwd=NODE_DIR, capture_output=True, text=True, timeout=150
    )
    return _lines(proc, suffix)


def _step(obs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(o for o in obs if o["step"] == name)


def _header(delivery: dict[str, Any], key: str) -> Any:
    """The header's value as the client gave it (Java: tagged with its class, e.g. {"Long": 3})."""
    if "headers" in delivery:  # Java
        return delivery["headers"].get(key)
    value = delivery[key]  # Node: the value, and the AMQP type letter from the raw frame
    return None if value is None else {delivery["field_type"]: value}


def check_pinned(obs: list[dict[str, Any]], long_tag: str) -> None:
    """What RabbitMQ 3.10.8 was observed to give both clients (``long_tag``: how the client shows
    an AMQP long: Java "Long", Node "l")."""
    assert [o["step"] for o in obs] == [
        "qq_declare",
        "qq_published",
        "qq_after_publish",
        "qq_deliveries",
        "qq_after_acks",
        "qq_delete",
        "st_declare",
        "st_published",
        "st_from_first",
        "st_from_3",
        "st_delete",
    ]
    assert _step(obs, "qq_published")["confirmed"] == 5
    assert _step(obs, "qq_after_publish")["message_count"] == 5
    qq = _step(obs, "qq_deliveries")["deliveries"]
    # no delivery limit: the nacked q0 goes to the back and returns with x-delivery-count 1
    assert [d["body"] for d in qq] == ["q0", "q1", "q2", "q3", "q4", "q0"]
    assert [d["redelivered"] for d in qq] == [False] * 5 + [True]
    assert [_header(d, "x-delivery-count") for d in qq] == [None] * 5 + [{long_tag: 1}]
    assert [d["delivery_tag"] for d in qq] == [1, 2, 3, 4, 5, 6]
    assert _step(obs, "qq_after_acks")["message_count"] == 0 and _step(obs, "qq_after_acks")["get_empty"]
    assert _step(obs, "st_declare")["message_count"] == 0
    first = _step(obs, "st_from_first")["deliveries"]
    assert [d["body"] for d in first] == [f"s{i}" for i in range(5)]
    assert [_header(d, "x-stream-offset") for d in first] == [{long_tag: i} for i in range(5)]
    assert [d["n"] for d in first] == list(range(5))
    assert not any(d["redelivered"] for d in first)
    from3 = _step(obs, "st_from_3")["deliveries"]
    assert [_header(d, "x-stream-offset") for d in from3] == [{long_tag: 3}, {long_tag: 4}]
    assert [d["delivery_tag"] for d in from3] == [1, 2]


def _compare(client: str, expected: list[dict[str, Any]], actual: list[dict[str, Any]]) -> None:
    if actual != expected:
        pytest.fail(
            f"{client} sees hashbroker differ from RabbitMQ 3.10.8 on quorum/stream queues\n"
            f"--- rabbitmq\n{json.dumps(expected, indent=1)}\n--- hashbroker\n{json.dumps(actual, indent=1)}",
            pytrace=False,
        )


@pytest.mark.timeout(300)
@pytest.mark.parametrize("target", TARGETS)
def test_java_quorum_and_stream(target: str, java_classpath: str, request: pytest.FixtureRequest) -> None:
    check_pinned(observed("java", target, request, java_classpath), "Long")


@pytest.mark.live
@pytest.mark.timeout(300)
def test_java_quorum_and_stream_differential(java_classpath: str, request: pytest.FixtureRequest) -> None:
    rabbit = observed("java", "rabbitmq", request, java_classpath)
    _compare("the RabbitMQ Java client", rabbit, observed("java", "hashbroker", request, java_classpath))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("target", TARGETS)
def test_amqplib_quorum_and_stream(target: str, node: None, request: pytest.FixtureRequest) -> None:
    check_pinned(observed("node", target, request), "l")


@pytest.mark.live
@pytest.mark.timeout(300)
def test_amqplib_quorum_and_stream_differential(node: None, request: pytest.FixtureRequest) -> None:
    """Also byte for byte: each delivery carries its raw content-header frame."""
    _compare("amqplib", observed("node", "rabbitmq", request), observed("node", "hashbroker", request))
