"""A stream in the management API has `members` and `online`, as RabbitMQ 3.10.8 shows them (a
single node: both ["rabbit@localhost"], and no `leader` key), compared with the live broker."""

from __future__ import annotations

import time
import uuid

import pika
import pytest

from broker.embedded import BrokerThread
from tests import conftest
from tests.management_support import call


def stream_object(amqp_url: str, api: str, name: str) -> dict[str, object]:
    """Declare stream `name`, then read its management object once its replicas are reported
    (RabbitMQ adds them with its first stats emission, up to 5 s after the declare)."""
    connection = pika.BlockingConnection(pika.URLParameters(amqp_url))
    try:
        connection.channel().queue_declare(name, durable=True, arguments={"x-queue-type": "stream"})
        deadline = time.monotonic() + 15
        while True:
            status, q = call(api, "GET", f"/api/queues/%2F/{name}")
            assert status == 200
            if "members" in q or time.monotonic() > deadline:
                return dict(q)
            time.sleep(0.5)
    finally:
        connection.channel().queue_delete(name)
        connection.close()


@pytest.mark.slow
def test_a_stream_shows_its_members_and_online_nodes(rabbitmq_url: str) -> None:
    name = f"hb.st.members.{uuid.uuid4().hex[:6]}"
    theirs = stream_object(rabbitmq_url, conftest.RABBITMQ_API, name)
    with BrokerThread(port=0, management_port=0) as b:
        mine = stream_object(b.url, f"http://127.0.0.1:{b.broker.management.port}", name)
    for q in (theirs, mine):
        assert q["members"] == q["online"] == [q["node"]]
        assert "leader" not in q
