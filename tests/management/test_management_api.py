"""Management HTTP API: counts match what was published, shapes match a live RabbitMQ 3.10.8.

The hashbroker side runs everywhere; the comparison tests use the reference RabbitMQ (AMQP on
5672, management on 15672) and skip with a reason when it is unreachable.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pika
import pytest

from broker.embedded import BrokerThread
from tests import conftest
from tests.management_support import management_on_loop

RABBIT_API = conftest.RABBITMQ_API
GUEST = ("guest", "guest")

#: What a queue was declared with: both brokers must report the same values.
QUEUE_DECLARED = ("name", "vhost", "durable", "auto_delete", "exclusive", "arguments")
# Fields monitoring tools and test helpers actually read; both brokers must have all of them.
QUEUE_FIELDS = {
    *QUEUE_DECLARED,
    "messages",
    "messages_ready",
    "messages_unacknowledged",
    "consumers",
    "node",
    "state",
    "type",
    "message_bytes",
    "messages_details",
    "policy",
}
EXCHANGE_FIELDS = {"name", "vhost", "type", "durable", "auto_delete", "internal", "arguments"}
OVERVIEW_FIELDS = {
    "management_version",
    "rabbitmq_version",
    "product_name",
    "product_version",
    "object_totals",
    "queue_totals",
    "message_stats",
    "node",
    "listeners",
    "exchange_types",
    "cluster_name",
}
# RabbitMQ fields hashbroker deliberately leaves out: Erlang VM internals, and idle_since (not tracked).
ERLANG_ONLY = {
    "backing_queue_status",
    "garbage_collection",
    "reductions",
    "reductions_details",
    "idle_since",
    "message_stats",
    "consumer_details",
    "deliveries",
    "incoming",
}


def http(
    base: str, method: str, path: str, body: Any = None, auth: tuple[str, str] | None = GUEST
) -> tuple[int, Any, dict[str, str]]:
    """One request; returns (status, decoded JSON or raw bytes, lower-cased headers)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, method=method, data=data)
    if data is not None:
        req.add_header("content-type", "application/json")
    if auth is not None:
        req.add_header("authorization", "Basic " + base64.b64encode(":".join(auth).encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            status, raw, headers = resp.status, resp.read(), resp.headers
    except urllib.error.HTTPError as err:
        status, raw, headers = err.code, err.read(), err.headers
    try:
        decoded: Any = json.loads(raw) if raw else raw
    except ValueError:
        decoded = raw
    return status, decoded, {k.lower(): v for k, v in headers.items()}


@pytest.fixture
def mgmt(hashbroker_broker: BrokerThread) -> Iterator[tuple[BrokerThread, str]]:
    """A management server on the broker's own loop; yields the broker and the server's base URL."""
    with management_on_loop(hashbroker_broker) as base:
        yield hashbroker_broker, base


def declare_topology(url: str, suffix: str, published: int) -> None:
    """exchange x -> queue q (key k, plus a binding with arguments), an idle queue, `published` messages."""
    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        ch = conn.channel()
        ch.exchange_declare(f"mx{suffix}", "direct")
        ch.queue_declare(f"mq{suffix}", arguments={"x-max-length": 100})
        ch.queue_declare(f"mi{suffix}")
        ch.queue_bind(f"mq{suffix}", f"mx{suffix}", "k")
        ch.queue_bind(f"mi{suffix}", f"mx{suffix}", "with args", arguments={"a": "b", "n": 7, "t": True})
        ch.confirm_delivery()
        for i in range(published):
            ch.basic_publish(
                f"mx{suffix}",
                "k",
                f"m{i}".encode(),
                pika.BasicProperties(content_type="text/plain", headers={"i": i}),
            )
    finally:
        conn.close()


def delete_topology(url: str, suffix: str) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        ch = conn.channel()
        ch.queue_delete(f"mq{suffix}")
        ch.queue_delete(f"mi{suffix}")
        ch.exchange_delete(f"mx{suffix}")
    finally:
        conn.close()


# -- hashbroker only --------------------------------------------------------------------------------


def test_auth_errors_match_rabbitmq(mgmt: tuple[BrokerThread, str]) -> None:
    _, base = mgmt
    status, body, headers = http(base, "GET", "/api/overview", auth=None)
    assert (status, body) == (401, b"")
    assert headers["www-authenticate"] == 'Basic realm="RabbitMQ Management"'
    status, body, _ = http(base, "GET", "/api/overview", auth=("guest", "wrong"))
    assert (status, body) == (401, {"error": "not_authorized", "reason": "Login failed"})
    status, body, _ = http(base, "GET", "/api/nonsense")
    assert (status, body) == (404, {"error": "Object Not Found", "reason": "Not Found"})
    status, _, headers = http(base, "POST", "/api/overview", body={})
    assert status == 405 and "GET" in headers["allow"]


def test_counts_equal_what_was_published(mgmt: tuple[BrokerThread, str]) -> None:
    b, base = mgmt
    declare_topology(b.url, "", published=5)

    status, q, _ = http(base, "GET", "/api/queues/%2F/mq")
    assert status == 200
    assert (q["name"], q["vhost"], q["state"], q["type"]) == ("mq", "/", "running", "classic")
    assert (q["messages"], q["messages_ready"], q["messages_unacknowledged"], q["consumers"]) == (5, 5, 0, 0)
    assert q["message_bytes"] == sum(len(f"m{i}") for i in range(5))
    assert q["arguments"] == {"x-max-length": 100}
    assert q["message_stats"]["publish"] == 5
    assert q["consumer_details"] == []

    status, idle, _ = http(base, "GET", "/api/queues/%2F/mi")
    assert status == 200 and idle["messages"] == 0
    assert "message_stats" not in idle  # as RabbitMQ: no stats before the first message

    _, queues, _ = http(base, "GET", "/api/queues")
    assert [x["name"] for x in queues] == ["mi", "mq"]
    assert http(base, "GET", "/api/queues/%2F")[1] == queues

    _, overview, _ = http(base, "GET", "/api/overview")
    assert overview["product_name"] == "hashbroker"
    assert overview["rabbitmq_version"] == "3.10.8"
    assert overview["queue_totals"]["messages"] == 5
    assert overview["object_totals"]["queues"] == 2
    assert overview["object_totals"]["exchanges"] == len(http(base, "GET", "/api/exchanges")[1])

    _, x, _ = http(base, "GET", "/api/exchanges/%2F/mx")
    assert (x["name"], x["type"], x["durable"], x["internal"]) == ("mx", "direct", False, False)
    _, default, _ = http(base, "GET", "/api/exchanges/%2F/amq.default")
    assert default["name"] == ""

    _, bindings, _ = http(base, "GET", "/api/bindings/%2F")
    explicit = [(bd["source"], bd["destination"], bd["routing_key"]) for bd in bindings if bd["source"]]
    assert explicit == [("mx", "mi", "with args"), ("mx", "mq", "k")]
    assert {bd["destination"] for bd in bindings if bd["source"] == ""} == {"mi", "mq"}

    assert http(base, "GET", "/api/vhosts")[1][0]["messages"] == 5
    assert http(base, "GET", "/api/users")[1][0]["name"] == "guest"
    assert http(base, "GET", "/api/permissions")[1] == [
        {"user": "guest", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}
    ]
    assert http(base, "GET", "/api/nodes")[1][0]["running"] is True
    for missing in (
        "/api/queues/%2F/nope",
        "/api/exchanges/%2F/nope",
        "/api/queues/novhost",
        "/api/bindings/nov",
    ):
        assert http(base, "GET", missing)[:2] == (404, {"error": "Object Not Found", "reason": "Not Found"})


def test_unacked_and_consumers(mgmt: tuple[BrokerThread, str]) -> None:
    b, base = mgmt
    declare_topology(b.url, "", published=4)
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    try:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=3)
        ch.basic_consume("mq", lambda *a: None, consumer_tag="c1")
        conn.process_data_events(time_limit=0.3)
        _, q, _ = http(base, "GET", "/api/queues/%2F/mq")
        counts = (q["messages_ready"], q["messages_unacknowledged"], q["messages"], q["consumers"])
        assert counts == (1, 3, 4, 1)
        assert [c["consumer_tag"] for c in q["consumer_details"]] == ["c1"]
        assert q["consumer_details"][0]["prefetch_count"] == 3
        _, overview, _ = http(base, "GET", "/api/overview")
        assert overview["object_totals"]["consumers"] == 1
        assert overview["object_totals"]["connections"] == 1
    finally:
        conn.close()


def test_get_publish_purge_via_api(mgmt: tuple[BrokerThread, str]) -> None:
    b, base = mgmt
    declare_topology(b.url, "", published=3)

    status, got, _ = http(
        base,
        "POST",
        "/api/queues/%2F/mq/get",
        {"count": 2, "ackmode": "ack_requeue_true", "encoding": "auto", "truncate": 50000},
    )
    assert status == 200
    seen = [(m["payload"], m["message_count"], m["redelivered"]) for m in got]
    assert seen == [("m0", 2, False), ("m1", 1, False)]
    assert got[0]["properties"] == {"content_type": "text/plain", "headers": {"i": 0}}
    assert http(base, "GET", "/api/queues/%2F/mq")[1]["messages"] == 3  # requeued

    _, got, _ = http(
        base,
        "POST",
        "/api/queues/%2F/mq/get",
        {"count": 1, "ackmode": "ack_requeue_false", "encoding": "base64"},
    )
    assert got[0]["payload"] == base64.b64encode(b"m0").decode() and got[0]["redelivered"] is True
    assert http(base, "GET", "/api/queues/%2F/mq")[1]["messages"] == 2

    routed = {"properties": {}, "routing_key": "k", "payload": "aGk=", "payload_encoding": "base64"}
    assert http(base, "POST", "/api/exchanges/%2F/mx/publish", routed)[:2] == (200, {"routed": True})
    unrouted = dict(routed, routing_key="nowhere")
    assert http(base, "POST", "/api/exchanges/%2F/mx/publish", unrouted)[:2] == (200, {"routed": False})
    assert http(base, "GET", "/api/queues/%2F/mq")[1]["messages"] == 3

    assert http(base, "DELETE", "/api/queues/%2F/mq/contents")[0] == 204
    assert http(base, "GET", "/api/queues/%2F/mq")[1]["messages"] == 0
    assert (
        http(
            base,
            "POST",
            "/api/queues/%2F/mq/get",
            {"count": 5, "ackmode": "ack_requeue_true", "encoding": "auto"},
        )[1]
        == []
    )

    # the management's own AMQP connections never show up
    assert http(base, "GET", "/api/connections")[1] == []


def test_declare_and_delete_via_api(mgmt: tuple[BrokerThread, str]) -> None:
    _, base = mgmt
    spec = {"durable": True, "arguments": {"x-max-length": 5}}
    assert http(base, "PUT", "/api/queues/%2F/made", spec)[0] == 201
    assert http(base, "PUT", "/api/queues/%2F/made", spec)[0] == 204
    status, body, _ = http(base, "PUT", "/api/queues/%2F/made", {"durable": False})
    assert status == 400 and body["error"] == "bad_request" and body["reason"].startswith("inequivalent arg")
    assert http(base, "GET", "/api/queues/%2F/made")[1]["arguments"] == {"x-max-length": 5}
    assert http(base, "PUT", "/api/exchanges/%2F/madex", {"type": "fanout"})[0] == 201
    assert http(base, "GET", "/api/exchanges/%2F/madex")[1]["type"] == "fanout"
    refused = (401, {"error": "not_authorised", "reason": "Access refused."})
    assert http(base, "DELETE", "/api/exchanges/%2F/amq.direct")[:2] == refused
    assert http(base, "DELETE", "/api/exchanges/%2F/madex")[0] == 204
    assert http(base, "DELETE", "/api/exchanges/%2F/madex")[0] == 404
    assert http(base, "DELETE", "/api/queues/%2F/made")[0] == 204
    assert http(base, "DELETE", "/api/queues/%2F/made")[0] == 404


# -- against the live RabbitMQ ---------------------------------------------------------------------------


@pytest.fixture
def both(mgmt: tuple[BrokerThread, str], rabbitmq_url: str) -> Iterator[tuple[str, str, str]]:
    """The same topology on hashbroker and RabbitMQ; yields (hashbroker API, RabbitMQ API, suffix)."""
    if http(RABBIT_API, "GET", "/api/overview")[0] != 200:
        pytest.skip(f"RabbitMQ management API not answering on {RABBIT_API}")
    b, base = mgmt
    suffix = "-" + uuid.uuid4().hex[:8]
    declare_topology(b.url, suffix, published=3)
    declare_topology(rabbitmq_url, suffix, published=3)
    try:
        wait_for_rabbit_stats(suffix, messages=3)
        yield base, RABBIT_API, suffix
    finally:
        delete_topology(rabbitmq_url, suffix)


def wait_for_rabbit_stats(suffix: str, messages: int, timeout: float = 20.0) -> None:
    """RabbitMQ's management only sees a new queue's counters after its stats emission (every 5 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        q = http(RABBIT_API, "GET", f"/api/queues/%2F/mq{suffix}")[1]
        idle = http(RABBIT_API, "GET", f"/api/queues/%2F/mi{suffix}")[1]
        if isinstance(q, dict) and q.get("messages") == messages and "messages" in idle:
            return
        time.sleep(0.25)
    pytest.fail(f"RabbitMQ management never reported {messages} messages in mq{suffix}")


def assert_fields(ours: dict[str, Any], theirs: dict[str, Any], tool_fields: set[str]) -> None:
    assert tool_fields <= set(theirs), f"test expectation wrong: {tool_fields - set(theirs)}"
    assert tool_fields <= set(ours), f"missing tool fields: {tool_fields - set(ours)}"
    unexplained = set(theirs) - set(ours) - ERLANG_ONLY
    assert not unexplained, f"fields RabbitMQ has and hashbroker lacks: {unexplained}"
    assert set(ours) - set(theirs) <= {"message_stats", "owner_pid_details"}, set(ours) - set(theirs)


def test_field_sets_match_rabbitmq(both: tuple[str, str, str]) -> None:
    ours, theirs, sfx = both
    for path in (f"/api/queues/%2F/mq{sfx}", f"/api/queues/%2F/mi{sfx}"):
        a, r = http(ours, "GET", path)[1], http(theirs, "GET", path)[1]
        deadline = time.monotonic() + 15  # RabbitMQ's queue stats (messages, state...) lag up to ~5 s
        while not set(r) >= QUEUE_FIELDS and time.monotonic() < deadline:
            time.sleep(0.5)
            r = http(theirs, "GET", path)[1]
        assert_fields(a, r, QUEUE_FIELDS)
        for key in (*QUEUE_DECLARED, "consumers", "state"):
            assert a[key] == r[key], key
    a_list = {q["name"]: q for q in http(ours, "GET", "/api/queues/%2F")[1]}
    r_list = {q["name"]: q for q in http(theirs, "GET", "/api/queues/%2F")[1]}
    assert_fields(a_list[f"mq{sfx}"], r_list[f"mq{sfx}"], QUEUE_FIELDS)

    path = f"/api/exchanges/%2F/mx{sfx}"
    a, r = http(ours, "GET", path)[1], http(theirs, "GET", path)[1]
    assert_fields(a, r, EXCHANGE_FIELDS)
    assert {k: a[k] for k in EXCHANGE_FIELDS} == {k: r[k] for k in EXCHANGE_FIELDS}

    a_b = [bd for bd in http(ours, "GET", "/api/bindings/%2F")[1] if sfx in bd["destination"]]
    r_b = [bd for bd in http(theirs, "GET", "/api/bindings/%2F")[1] if sfx in bd["destination"]]
    assert a_b == r_b  # same order, same properties_key (phash2 of the arguments) included

    a, r = http(ours, "GET", "/api/overview")[1], http(theirs, "GET", "/api/overview")[1]
    assert set(a) >= OVERVIEW_FIELDS
    assert set(r) >= OVERVIEW_FIELDS
    for key in ("object_totals", "queue_totals"):
        assert set(r[key]) <= set(a[key]), key
    assert set(http(ours, "GET", "/api/vhosts")[1][0]) >= set(http(theirs, "GET", "/api/vhosts")[1][0]) - {
        "recv_oct",
        "recv_oct_details",
        "send_oct",
        "send_oct_details",
    }
    for path in ("/api/users", "/api/permissions"):
        assert set(http(ours, "GET", path)[1][0]) == set(http(theirs, "GET", path)[1][0]), path


def test_get_and_publish_bodies_match_rabbitmq(both: tuple[str, str, str]) -> None:
    ours, theirs, sfx = both
    ask = {"count": 2, "ackmode": "ack_requeue_true", "encoding": "auto", "truncate": 50000}
    a = http(ours, "POST", f"/api/queues/%2F/mq{sfx}/get", ask)[1]
    r = http(theirs, "POST", f"/api/queues/%2F/mq{sfx}/get", ask)[1]
    assert a == r
    bodies: list[dict[str, Any]] = [
        {"properties": {}, "routing_key": "k", "payload": "hi", "payload_encoding": "string"},
        {"properties": {}, "routing_key": "zz", "payload": "hi", "payload_encoding": "string"},
        {"properties": {}, "routing_key": "zz"},
        {"properties": {}, "routing_key": "k", "payload": "hi", "payload_encoding": "nope"},
    ]
    for body in bodies:
        path = f"/api/exchanges/%2F/mx{sfx}/publish"
        assert http(ours, "POST", path, body)[:2] == http(theirs, "POST", path, body)[:2], body
    empty: dict[str, Any] = {"count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"}
    # an empty property list renders as [] on both
    a = http(ours, "POST", f"/api/queues/%2F/mq{sfx}/get", {**ask, "count": 10})[1]
    r = http(theirs, "POST", f"/api/queues/%2F/mq{sfx}/get", {**ask, "count": 10})[1]
    assert a == r and a[-1]["properties"] == []
    for path, body in (
        (f"/api/queues/%2F/nope{sfx}/get", empty),
        (f"/api/queues/%2F/mq{sfx}/get", {"count": 1}),
        (f"/api/queues/%2F/mq{sfx}/get", {**empty, "encoding": "zz"}),
        (
            f"/api/exchanges/%2F/nope{sfx}/publish",
            {"properties": {}, "routing_key": "k", "payload": "", "payload_encoding": "string"},
        ),
    ):
        assert http(ours, "POST", path, body)[:2] == http(theirs, "POST", path, body)[:2], path


def test_error_bodies_match_rabbitmq(both: tuple[str, str, str]) -> None:
    ours, theirs, sfx = both
    for method, path in (
        ("GET", f"/api/queues/%2F/nope{sfx}"),
        ("GET", "/api/queues/novhost"),
        ("GET", "/api/nonsense"),
        ("DELETE", f"/api/queues/%2F/nope{sfx}/contents"),
        ("DELETE", "/api/exchanges/%2F/amq.direct"),
    ):
        assert http(ours, method, path)[:2] == http(theirs, method, path)[:2], path
    assert (
        http(ours, "GET", "/api/overview", auth=("guest", "x"))[:2]
        == http(theirs, "GET", "/api/overview", auth=("guest", "x"))[:2]
    )
    status, body, _ = http(ours, "PUT", f"/api/queues/%2F/mq{sfx}", {"durable": True})
    assert (status, body) == http(theirs, "PUT", f"/api/queues/%2F/mq{sfx}", {"durable": True})[:2]
