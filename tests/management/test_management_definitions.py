"""`/api/definitions`: RabbitMQ 3.10.8's export imports into hashbroker and round-trips unchanged.

The live test declares a small topology on the reference RabbitMQ (an x-consistent-hash exchange
with weighted bindings, a hash-header one, a headers binding with arguments, an exchange-to-exchange
binding), exports it over RabbitMQ's management API, imports it into hashbroker, and checks that
hashbroker's export is the same and that it routes every key exactly as RabbitMQ and
`exchanges.predict` do.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pika
import pytest

import exchanges
from broker.embedded import BrokerThread
from tests.conftest import RABBITMQ_URL, rabbitmq_reachable
from tests.differential_support import pika_channel
from tests.management.test_management_api import RABBIT_API, http

TOP_LEVEL_KEYS = [
    "rabbit_version", "rabbitmq_version", "product_name", "product_version", "users", "vhosts",
    "permissions", "topic_permissions", "parameters", "global_parameters", "policies", "queues",
    "exchanges", "bindings",
]  # fmt: skip
KEYS = [str(i) for i in range(2000)]


@pytest.fixture
def hb() -> Iterator[tuple[BrokerThread, str]]:
    """A hashbroker with its management API; yields (broker, management base URL)."""
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        yield b, f"http://127.0.0.1:{b.broker.management.port}"


def live_api() -> str:
    if not rabbitmq_reachable():
        pytest.skip("no reference RabbitMQ on 127.0.0.1:5672")
    try:
        status, _, _ = http(RABBIT_API, "GET", "/api/overview")
    except OSError as exc:
        pytest.skip(f"reference RabbitMQ management API unreachable: {exc}")
    if status != 200:
        pytest.skip(f"reference RabbitMQ management API answered {status}")
    return RABBIT_API


def declare(url: str, p: str) -> None:
    """The test topology.

    RabbitMQ exports bindings sorted by (source, routing key, destination), not in the order they
    were made, so an export only carries an x-consistent-hash ring faithfully when the bindings were
    made in that sorted order: here a(1), c(2), b(3). (Bound a, b, c, RabbitMQ's own export re-imported
    anywhere, RabbitMQ included, builds a different ring.)
    """
    with pika_channel(url) as ch:
        ch.exchange_declare(f"{p}.hash", "x-consistent-hash")
        ch.exchange_declare(f"{p}.hh", "x-consistent-hash", arguments={"hash-header": "h"})
        ch.exchange_declare(f"{p}.hdr", "headers", durable=True)
        ch.exchange_declare(f"{p}.up", "fanout")
        for name, weight in (("a", "1"), ("c", "2"), ("b", "3")):
            ch.queue_declare(f"{p}.{name}", arguments={"x-max-length": 100000})
            ch.queue_bind(f"{p}.{name}", f"{p}.hash", weight)
            ch.queue_bind(f"{p}.{name}", f"{p}.hh", "5")
        ch.queue_bind(f"{p}.a", f"{p}.hdr", "", arguments={"x-match": "any", "k": "v"})
        ch.exchange_bind(f"{p}.hash", f"{p}.up")


def delete_live(p: str) -> None:
    with pika_channel(RABBITMQ_URL) as ch:
        for x in ("hash", "hh", "hdr", "up"):
            ch.exchange_delete(f"{p}.{x}")
        for name in "abc":
            ch.queue_delete(f"{p}.{name}")


def mine(defs: dict[str, Any], p: str) -> dict[str, list[dict[str, Any]]]:
    """The test's own objects (the reference broker is shared with other tests)."""
    return {
        "queues": sorted((q for q in defs["queues"] if q["name"].startswith(p)), key=lambda q: q["name"]),
        "exchanges": sorted(
            (x for x in defs["exchanges"] if x["name"].startswith(p)), key=lambda x: x["name"]
        ),
        "bindings": [b for b in defs["bindings"] if b["source"].startswith(p)],
    }


def publish_keys(url: str, exchange: str) -> None:
    with pika_channel(url) as ch:
        ch.confirm_delivery()
        for k in KEYS:
            ch.basic_publish(exchange, k, b"")


def queue_counts(base: str, p: str, total: int = len(KEYS)) -> dict[str, int]:
    """Messages per test queue, once they add up to `total` (RabbitMQ's stats lag up to ~5 s)."""
    deadline = time.monotonic() + 20
    while True:
        status, queues, _ = http(base, "GET", "/api/queues/%2F?columns=name,messages")
        assert status == 200
        counts = {q["name"]: q.get("messages", 0) for q in queues if q["name"].startswith(p)}
        if sum(counts.values()) == total or time.monotonic() > deadline:
            return counts
        time.sleep(0.5)


@pytest.mark.slow
@pytest.mark.live
def test_rabbitmq_export_imports_into_hashbroker_and_round_trips(hb: tuple[BrokerThread, str]) -> None:
    rabbit = live_api()
    broker, base = hb
    p = f"hbdef.{uuid.uuid4().hex[:8]}"
    declare(RABBITMQ_URL, p)
    try:
        status, live_defs, _ = http(rabbit, "GET", "/api/definitions")
        assert status == 200
        assert list(live_defs) == TOP_LEVEL_KEYS
        expected = mine(live_defs, p)
        assert len(expected["bindings"]) == 8
        hash_order = [b["destination"] for b in expected["bindings"] if b["source"] == f"{p}.hash"]
        assert hash_order == [f"{p}.a", f"{p}.c", f"{p}.b"]
        # import: the live users/vhosts/permissions (guest on /) exist on hashbroker; other tests'
        # objects are left out so the comparison is exact
        doc = {k: v for k, v in live_defs.items() if k not in ("queues", "exchanges", "bindings", "policies")}
        doc.update(expected)
        status, body, _ = http(base, "POST", "/api/definitions", doc)
        assert status == 204, body

        status, hb_defs, _ = http(base, "GET", "/api/definitions")
        assert status == 200
        assert list(hb_defs) == TOP_LEVEL_KEYS
        assert hb_defs["product_name"] == "hashbroker" and hb_defs["rabbit_version"] == "3.10.8"
        for key in ("users", "vhosts", "permissions"):
            assert [sorted(x) for x in hb_defs[key]] == [sorted(x) for x in live_defs[key]], key
        assert mine(hb_defs, p) == expected  # same objects, fields, arguments, and binding order

        # routing: hashbroker == exchanges.predict == the live RabbitMQ, key by key counts
        ring = [
            (b["destination"], b["routing_key"]) for b in expected["bindings"] if b["source"] == f"{p}.hash"
        ]
        predicted = Counter(q for qs in exchanges.predict("x-consistent-hash", ring, KEYS) for q in qs)
        publish_keys(broker.url, f"{p}.up")  # through the exchange-to-exchange binding
        assert queue_counts(base, p) == {f"{p}.{n}": predicted.get(f"{p}.{n}", 0) for n in "abc"}
        publish_keys(RABBITMQ_URL, f"{p}.up")
        assert queue_counts(rabbit, p) == queue_counts(base, p)
    finally:
        delete_live(p)


def test_export_keeps_binding_order_so_the_ring_survives_a_round_trip() -> None:
    """Bound in non-sorted order: the export lists that order, and a re-import rebuilds the same ring."""
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as src:
        base = f"http://127.0.0.1:{src.broker.management.port}"
        conn = pika.BlockingConnection(pika.URLParameters(src.url))
        ch = conn.channel()
        ch.exchange_declare("ring", "x-consistent-hash", durable=True)
        for name, weight in (("z", "2"), ("m", "1"), ("a", "4")):
            ch.queue_declare(name)
            ch.queue_bind(name, "ring", weight)
        ch.queue_declare("excl", exclusive=True)  # never exported, like RabbitMQ
        _, defs, _ = http(base, "GET", "/api/definitions")
        _, ring_before, _ = http(base, "GET", "/api/hashbroker/exchanges/%2F/ring/ring")
        conn.close()
    assert [b["destination"] for b in defs["bindings"]] == ["z", "m", "a"]
    assert "excl" not in {q["name"] for q in defs["queues"]}
    assert not any(x["name"].startswith("amq.") or x["name"] == "" for x in defs["exchanges"])
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as dst:
        base = f"http://127.0.0.1:{dst.broker.management.port}"
        status, body, _ = http(base, "POST", "/api/definitions", defs)
        assert status == 204, body
        _, ring_after, _ = http(base, "GET", "/api/hashbroker/exchanges/%2F/ring/ring")
        _, again, _ = http(base, "GET", "/api/definitions")
    assert ring_after["state"]["segments"] == ring_before["state"]["segments"]
    expected = [[0, 2, "queue", "z"], [2, 1, "queue", "m"], [3, 4, "queue", "a"]]
    assert ring_after["state"]["segments"] == expected
    assert {k: again[k] for k in ("queues", "exchanges", "bindings")} == {
        k: defs[k] for k in ("queues", "exchanges", "bindings")
    }


def test_vhost_definitions_and_import_into_a_vhost(hb: tuple[BrokerThread, str]) -> None:
    _, base = hb
    doc = {
        "queues": [{"name": "vq", "vhost": "ignored", "durable": True, "auto_delete": False,
                    "arguments": {}}],
        "exchanges": [{"name": "vx", "type": "topic", "durable": True, "auto_delete": False,
                       "internal": False, "arguments": {}}],
        "bindings": [{"source": "vx", "destination": "vq", "destination_type": "queue",
                      "routing_key": "a.#", "arguments": {}}],
    }  # fmt: skip
    status, body, _ = http(base, "POST", "/api/definitions/%2F", doc)
    assert status == 204, body
    status, defs, _ = http(base, "GET", "/api/definitions/%2F")
    assert status == 200
    assert set(defs) == {"rabbit_version", "rabbitmq_version", "product_name", "product_version",
                         "parameters", "policies", "queues", "exchanges", "bindings"}  # fmt: skip
    assert defs["queues"] == [{"name": "vq", "durable": True, "auto_delete": False, "arguments": {}}]
    assert defs["bindings"] == [{"source": "vx", "destination": "vq", "destination_type": "queue",
                                 "routing_key": "a.#", "arguments": {}}]  # fmt: skip
    assert http(base, "GET", "/api/definitions/nope")[0] == 404


def test_import_of_unsupported_definitions_is_refused_whole(hb: tuple[BrokerThread, str]) -> None:
    _, base = hb
    doc = {
        "users": [
            {"name": "alice", "password_hash": "x", "hashing_algorithm": "rabbit_password_hashing_md5"}
        ],
        "parameters": [{"component": "federation-upstream", "name": "up", "vhost": "/", "value": {}}],
        "queues": [{"name": "never", "vhost": "/", "durable": False, "auto_delete": False, "arguments": {}}],
    }
    status, body, _ = http(base, "POST", "/api/definitions", doc)
    assert status == 400
    assert "alice" in body["reason"] and "federation-upstream/up" in body["reason"]
    _, queues, _ = http(base, "GET", "/api/queues")
    assert queues == []  # nothing was applied


def test_import_error_names_the_failing_object(hb: tuple[BrokerThread, str]) -> None:
    _, base = hb
    doc = {
        "exchanges": [{"name": "hx", "vhost": "/", "type": "x-consistent-hash", "durable": False,
                       "auto_delete": False, "internal": False, "arguments": {}}],
        "queues": [{"name": "q", "vhost": "/", "durable": False, "auto_delete": False, "arguments": {}}],
        "bindings": [{"source": "hx", "vhost": "/", "destination": "q", "destination_type": "queue",
                      "routing_key": "abc", "arguments": {}}],
    }  # fmt: skip
    status, body, _ = http(base, "POST", "/api/definitions", json.loads(json.dumps(doc)))
    assert status == 400
    assert body["reason"].startswith("binding 'hx' -> queue 'q': ")
    assert "The binding key must be an integer" in body["reason"]
