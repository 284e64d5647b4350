"""What the management API shows of exchanges, queues and connections, against RabbitMQ and the entities.

Each test failed before its fix: the exchange object lacked its policy, the single active consumer
was the first registered one even under "consistent-hash" selection, and connections lacked the
client's properties and socket counters.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pika
import pytest

from broker.embedded import BrokerThread
from broker.entities.queues.consumer_ring import HashRing
from broker.management.sessions import TracksClient
from tests.conftest import rabbitmq_reachable
from tests.management.test_management_api import RABBIT_API, http


@pytest.fixture
def base() -> Iterator[tuple[str, BrokerThread]]:
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        yield f"http://127.0.0.1:{b.broker.management.port}", b


def live() -> None:
    if not rabbitmq_reachable():
        pytest.skip("no reference RabbitMQ on 127.0.0.1:5672")


@pytest.mark.live
def test_exchange_names_its_policy_as_rabbitmq(base: tuple[str, BrokerThread]) -> None:
    live()
    ours, _b = base
    vhost = f"hbxpol-{uuid.uuid4().hex[:6]}"
    policy = {"pattern": "^ex", "definition": {"alternate-exchange": "ae"}, "apply-to": "exchanges"}
    seen = []
    for api in (RABBIT_API, ours):
        try:
            assert http(api, "PUT", f"/api/vhosts/{vhost}")[0] == 201
            for name in ("ex1", "other"):
                assert http(api, "PUT", f"/api/exchanges/{vhost}/{name}", {"type": "direct"})[0] == 201
            before = http(api, "GET", f"/api/exchanges/{vhost}/ex1")[1]
            assert http(api, "PUT", f"/api/policies/{vhost}/pe", policy)[0] == 201
            after = http(api, "GET", f"/api/exchanges/{vhost}/ex1")[1]
            listed = http(api, "GET", f"/api/exchanges/{vhost}?columns=name,policy")[1]
            seen.append((before.get("policy", "absent"), after.get("policy", "absent"), listed))
        finally:
            http(api, "DELETE", f"/api/vhosts/{vhost}")
    assert seen[0][:2] == ("absent", "pe")
    assert seen[1] == seen[0]


def test_consistent_hash_names_the_ring_owner_as_single_active_consumer() -> None:
    queue = "sac.q"
    with BrokerThread(
        host="127.0.0.1", port=0, management_port=0, active_consumer_selection="consistent-hash"
    ) as b:
        tags = [f"c{i}" for i in range(6)]
        owner = HashRing(tags).owner(queue)
        assert owner != tags[0]  # else this test could not tell the ring from registration order
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", b.port))
        ch = conn.channel()
        ch.queue_declare(queue, arguments={"x-single-active-consumer": True})
        for tag in tags:
            ch.basic_consume(queue, lambda *_: None, consumer_tag=tag)
        base = f"http://127.0.0.1:{b.broker.management.port}"
        q = http(base, "GET", f"/api/queues/%2F/{queue}")[1]
        conn.close()
    assert q["single_active_consumer_tag"] == owner
    active = {c["consumer_tag"]: c["active"] for c in q["consumer_details"]}
    assert active == {tag: tag == owner for tag in tags}
    statuses = {c["consumer_tag"]: c["activity_status"] for c in q["consumer_details"]}
    assert statuses == {tag: "single_active" if tag == owner else "waiting" for tag in tags}  # as RabbitMQ


def connection_named(api: str, name: str, wait: float) -> dict[str, Any]:
    """The connection once it is listed with its socket counters (RabbitMQ adds them with its first
    stats emission, up to 5 s after the connection is listed)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        for c in http(api, "GET", "/api/connections")[1]:
            if c.get("user_provided_name") == name and "recv_oct" in c and "recv_cnt" in c:
                return dict(c)
        time.sleep(0.2)
    pytest.fail(f"{api} never listed the connection {name!r}")


@pytest.mark.live
def test_connections_show_client_properties_and_counters_as_rabbitmq(base: tuple[str, BrokerThread]) -> None:
    live()
    ours, b = base
    conn_here = pika.BlockingConnection(
        pika.ConnectionParameters("127.0.0.1", b.port, client_properties={"connection_name": "hb-views"})
    )
    try:
        if not b.call(lambda: all(isinstance(c, TracksClient) for c in b.broker.connections)):
            pytest.skip("the session layer does not record client properties and traffic counters yet")
        conn_there = pika.BlockingConnection(
            pika.ConnectionParameters("127.0.0.1", 5672, client_properties={"connection_name": "hb-views"})
        )
        try:
            theirs = connection_named(RABBIT_API, "hb-views", 15)  # RabbitMQ emits stats every 5 s
            mine = connection_named(ours, "hb-views", 5)
        finally:
            conn_there.close()
    finally:
        conn_here.close()
    keys = [
        "client_properties",
        "user_provided_name",
        "connected_at",
        "recv_oct",
        "send_oct",
        "recv_cnt",
        "send_cnt",
    ]
    assert set(keys) <= set(mine)
    assert mine["client_properties"] == theirs["client_properties"]
    assert mine["user_provided_name"] == theirs["user_provided_name"] == "hb-views"
    for key in keys[2:]:
        assert type(mine[key]) is type(theirs[key]) is int, key
    assert abs(mine["connected_at"] - time.time() * 1000) < 60_000  # milliseconds since the epoch
    assert mine["recv_oct"] > 300 and mine["send_oct"] > 300  # a handshake's bytes each way
    assert mine["recv_cnt"] >= 3 and mine["send_cnt"] >= 3
    assert mine["recv_oct_details"] == {"rate": mine["recv_oct_details"]["rate"]}
