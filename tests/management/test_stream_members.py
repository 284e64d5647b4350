"""A stream in the management API has `members` and `online`, as RabbitMQ 3.10.8 shows them
(observed: both ["rabbit@localhost"] on a single node, and no `leader` key)."""

from __future__ import annotations

import pika

from broker.embedded import BrokerThread
from tests.management_support import call


def test_a_stream_shows_its_members_and_online_nodes() -> None:
    with BrokerThread(port=0, management_port=0) as b:
        connection = pika.BlockingConnection(pika.URLParameters(b.url))
        connection.channel().queue_declare("st", durable=True, arguments={"x-queue-type": "stream"})
        connection.close()
        status, q = call(f"http://127.0.0.1:{b.broker.management.port}", "GET", "/api/queues/%2F/st")
    assert status == 200
    assert q["members"] == q["online"] == ["rabbit@localhost"]
    assert "leader" not in q and q["node"] == "rabbit@localhost"
