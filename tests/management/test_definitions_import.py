"""Definitions import as RabbitMQ 3.10.8 takes it: a real export of the live RabbitMQ is accepted
(`amq.*` queues and exchanges in it skipped with a warning, as rabbit_definitions skips them), users
with a password hash that is not base64 or tags of the wrong type are refused with RabbitMQ's 400
(compared live), and a broken file changes nothing at all (hashbroker checks the whole file first).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pika
import pytest

from broker.embedded import BrokerThread
from tests import conftest
from tests.management.test_management_api import http
from tests.management_support import mgmt_base

RABBIT_API = conftest.RABBITMQ_API
SHA256 = "rabbit_password_hashing_sha256"


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerThread]:
    with BrokerThread(port=0, management_port=0) as bt:
        yield bt


def test_live_export_imports(
    broker: BrokerThread, rabbitmq_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    suffix = uuid.uuid4().hex[:8]
    conn = pika.BlockingConnection(pika.URLParameters(rabbitmq_url))
    ch = conn.channel()
    server_named = ""
    try:
        ch.queue_declare(f"imp-q-{suffix}", durable=True, arguments={"x-max-length": 10})
        ch.queue_declare(f"imp-qq-{suffix}", durable=True, arguments={"x-queue-type": "quorum"})
        server_named = ch.queue_declare("", durable=False, exclusive=False).method.queue
        ch.exchange_declare(f"imp-x-{suffix}", "x-consistent-hash", durable=True)
        ch.queue_bind(f"imp-q-{suffix}", f"imp-x-{suffix}", "7")
        status, export, _ = http(RABBIT_API, "GET", "/api/definitions")
    finally:
        for q in (f"imp-q-{suffix}", f"imp-qq-{suffix}", server_named):
            if q:
                ch.queue_delete(q)
        ch.exchange_delete(f"imp-x-{suffix}")
        conn.close()
    assert status == 200 and export["rabbitmq_version"] == "3.10.8"
    assert server_named.startswith("amq.gen-") and server_named in [q["name"] for q in export["queues"]]
    with caplog.at_level("WARNING", logger="hashbroker.management.definitions"):
        got = http(mgmt_base(broker), "POST", "/api/definitions", export)
    assert got[0] == 204, got[1]
    api = mgmt_base(broker)
    q = http(api, "GET", f"/api/queues/%2F/imp-q-{suffix}")[1]
    assert q["durable"] is True and q["arguments"] == {"x-max-length": 10}
    assert http(api, "GET", f"/api/queues/%2F/imp-qq-{suffix}")[1]["type"] == "quorum"
    assert http(api, "GET", f"/api/queues/%2F/{server_named}")[0] == 404
    assert f"name: {server_named}" in caplog.text
    assert http(api, "GET", f"/api/exchanges/%2F/imp-x-{suffix}")[1]["type"] == "x-consistent-hash"
    bound = http(api, "GET", f"/api/exchanges/%2F/imp-x-{suffix}/bindings/source")[1]
    assert [(b["destination"], b["routing_key"]) for b in bound] == [(f"imp-q-{suffix}", "7")]


def bad_user(name: str, password_hash: Any, tags: Any) -> dict[str, Any]:
    return {"name": name, "password_hash": password_hash, "hashing_algorithm": SHA256, "tags": tags}


@pytest.mark.parametrize(
    ("password_hash", "tags"),
    [("!!not base64!!", ""), ("YWJj", 42), ("YWJj", ["a", {"x": 1}])],
)
def test_bad_users_refused_as_rabbitmq(
    broker: BrokerThread, rabbitmq_url: str, password_hash: str, tags: Any
) -> None:
    name = "imp-bad-" + uuid.uuid4().hex[:8]
    doc = {"users": [bad_user(name, password_hash, tags)]}
    ours = http(mgmt_base(broker), "POST", "/api/definitions", doc)
    theirs = http(RABBIT_API, "POST", "/api/definitions", doc)
    assert ours[:2] == theirs[:2]
    assert ours[0] == 400
    assert http(RABBIT_API, "GET", f"/api/users/{name}")[0] == 404
    assert http(mgmt_base(broker), "GET", f"/api/users/{name}")[0] == 404


def test_broken_file_changes_nothing(broker: BrokerThread) -> None:
    suffix = uuid.uuid4().hex[:8]
    doc = {
        "users": [bad_user(f"imp-ok-{suffix}", "YWJjZA==", "management")],
        "vhosts": [{"name": f"imp-vh-{suffix}"}],
        "queues": [
            {"name": f"imp-q-{suffix}", "vhost": "/", "durable": True, "auto_delete": False, "arguments": {}}
        ],
        "policies": [
            {
                "vhost": "/",
                "name": f"imp-p-{suffix}",
                "pattern": "^x$",
                "apply-to": "queues",
                "definition": {"max-length": 1},
                "priority": 0,
            }
        ],
        "exchanges": [{"name": f"imp-x-{suffix}", "vhost": f"imp-missing-{suffix}", "type": "direct"}],
    }
    api = mgmt_base(broker)
    before = {p: json.dumps(http(api, "GET", p)[1], sort_keys=True) for p in ("/api/users", "/api/vhosts")}
    status, body, _ = http(api, "POST", "/api/definitions", doc)
    assert status == 400 and f"imp-missing-{suffix}" in body["reason"]
    for path, seen in before.items():
        assert json.dumps(http(api, "GET", path)[1], sort_keys=True) == seen
    assert http(api, "GET", f"/api/queues/%2F/imp-q-{suffix}")[0] == 404
    assert http(api, "GET", f"/api/policies/%2F/imp-p-{suffix}")[0] == 404
