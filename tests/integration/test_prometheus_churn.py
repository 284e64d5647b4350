"""The churn counters on /metrics follow what clients do, as RabbitMQ 3.10.8 counts them.

Connections and channels opened and closed, queues declared (every non-passive queue.declare),
created and deleted, messages routed (one per queue reached) and received on confirm-mode
channels: the difference between two scrapes around a scripted session. The expected deltas are
what the same session moves on the live RabbitMQ (tests/differential/test_differential_events.py
runs it there too).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import urllib.request
from collections.abc import Iterator

import pika
import pytest

from broker.embedded import BrokerThread
from broker.plugins.prometheus import PrometheusServer, start_prometheus

CHURN = (
    "rabbitmq_connections_opened_total",
    "rabbitmq_connections_closed_total",
    "rabbitmq_channels_opened_total",
    "rabbitmq_channels_closed_total",
    "rabbitmq_queues_declared_total",
    "rabbitmq_queues_created_total",
    "rabbitmq_queues_deleted_total",
    "rabbitmq_global_messages_routed_total",
    "rabbitmq_global_messages_received_confirm_total",
)

EXPECTED = {
    "rabbitmq_connections_opened_total": 1,
    "rabbitmq_connections_closed_total": 2,  # the refused login's connection is closed, never opened
    "rabbitmq_channels_opened_total": 2,
    "rabbitmq_channels_closed_total": 2,
    "rabbitmq_queues_declared_total": 3,  # the second declare of q1 counts; a passive one does not
    "rabbitmq_queues_created_total": 2,
    "rabbitmq_queues_deleted_total": 2,
    "rabbitmq_global_messages_routed_total": 3,  # 1 + 2 (fanout to both queues) + 0 (unroutable)
    "rabbitmq_global_messages_received_confirm_total": 2,
}


def churn(base: str) -> dict[str, float]:
    text = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
    out = {}
    for name in CHURN:
        m = re.search(rf"^{name}(?:{{[^}}]*protocol=\"amqp091\"[^}}]*}})? (\S+)$", text, re.M)
        assert m is not None, name
        out[name] = float(m.group(1))
    return out


def session(host: str, port: int, prefix: str) -> None:
    """The scripted session: the same against any broker."""
    params = pika.ConnectionParameters(host, port)
    refused = pika.ConnectionParameters(host, port, credentials=pika.PlainCredentials("guest", "wrong"))
    with contextlib.suppress(pika.exceptions.ProbableAuthenticationError):
        pika.BlockingConnection(refused)
    conn = pika.BlockingConnection(params)
    ch = conn.channel()
    q1, q2, x = f"{prefix}.q1", f"{prefix}.q2", f"{prefix}.x"
    ch.queue_declare(q1)
    ch.queue_declare(q1)
    ch.queue_declare(q1, passive=True)
    ch.queue_declare(q2)
    ch.exchange_declare(x, "fanout")
    ch.queue_bind(q1, x)
    ch.queue_bind(q2, x)
    ch.basic_publish("", q1, b"one")
    ch2 = conn.channel()
    ch2.confirm_delivery()
    ch2.basic_publish(x, "", b"two")
    ch2.basic_publish("amq.direct", f"{prefix}.nowhere", b"three")
    ch2.close()
    ch.exchange_delete(x)
    ch.queue_delete(q1)
    ch.queue_delete(q2)
    ch.close()
    conn.close()


@pytest.fixture(scope="module")
def broker() -> Iterator[tuple[BrokerThread, PrometheusServer]]:
    with BrokerThread(host="127.0.0.1", port=0) as b:
        assert b.loop is not None
        server = asyncio.run_coroutine_threadsafe(start_prometheus(b.broker, "127.0.0.1", 0), b.loop).result(
            10
        )
        yield b, server


def test_churn_counters_follow_a_session(broker: tuple[BrokerThread, PrometheusServer]) -> None:
    b, server = broker
    base = f"http://127.0.0.1:{server.port}"
    before = churn(base)
    session("127.0.0.1", b.broker.port, "churn")
    deadline = 50
    after = churn(base)
    while (
        after["rabbitmq_connections_closed_total"] - before["rabbitmq_connections_closed_total"] < 2
        and deadline
    ):
        deadline -= 1
        asyncio.run(asyncio.sleep(0.1))
        after = churn(base)
    assert {k: after[k] - before[k] for k in CHURN} == EXPECTED
