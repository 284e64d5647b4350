"""Management writes run on the broker's loop as the HTTP user, with no AMQP connection of their own.

The first tests run everywhere on an embedded hashbroker; the comparisons drive the same requests
against the reference RabbitMQ 3.10.8 (management on 15672) and skip when it is unreachable.
"""

from __future__ import annotations

import base64
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from broker.embedded import BrokerThread
from tests import conftest
from tests.conftest import rabbitmq_reachable
from tests.management_support import GUEST, call, management_on_loop

RABBIT_API = conftest.RABBITMQ_API


@pytest.fixture
def mgmt(hashbroker_broker: BrokerThread) -> Iterator[tuple[BrokerThread, str]]:
    """A management server on the broker's own loop; yields the broker and the server's base URL."""
    with management_on_loop(hashbroker_broker) as base:
        yield hashbroker_broker, base


def _executor_threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith(("asyncio_", "ThreadPoolExecutor"))}


def test_writes_open_no_connection_and_no_thread(mgmt: tuple[BrokerThread, str]) -> None:
    b, base = mgmt
    opened: list[object] = []
    made = b.broker.connection_made

    def counting(conn: Any) -> None:
        opened.append(conn)
        made(conn)

    b.broker.connection_made = counting  # type: ignore[method-assign]
    threads = _executor_threads()
    steps: list[tuple[str, str, Any, int]] = [
        ("PUT", "/api/queues/%2F/wq", {"durable": False, "arguments": {"x-max-length": 10}}, 201),
        ("PUT", "/api/queues/%2F/wq", {"durable": False, "arguments": {"x-max-length": 10}}, 204),
        ("PUT", "/api/exchanges/%2F/wx", {"type": "topic"}, 201),
        ("POST", "/api/bindings/%2F/e/wx/q/wq", {"routing_key": "a.#"}, 201),
        ("POST", "/api/exchanges/%2F/wx/publish", _msg("a.b", "one", headers={"n": 1}), 200),
        ("POST", "/api/exchanges/%2F/wx/publish", _msg("zz", "lost"), 200),
        ("POST", "/api/exchanges/%2F/amq.default/publish", _msg("wq", "two"), 200),
        ("POST", "/api/queues/%2F/wq/get", _get(5, "ack_requeue_true"), 200),
        ("POST", "/api/queues/%2F/wq/get", _get(1, "ack_requeue_false"), 200),
        ("DELETE", "/api/queues/%2F/wq/contents", None, 204),
        ("DELETE", "/api/bindings/%2F/e/wx/q/wq/a.%2523", None, 204),
        ("DELETE", "/api/exchanges/%2F/wx", None, 204),
        ("DELETE", "/api/queues/%2F/wq", None, 204),
    ]
    answers = []
    for method, path, body, expected in steps:
        status, answer = call(base, method, path, body=body)
        assert status == expected, (method, path, answer)
        answers.append(answer)
        assert b.broker.connections == set()
    assert opened == []
    assert call(base, "GET", "/api/connections") == (200, [])
    assert _executor_threads() == threads
    assert [a["routed"] for a in answers[4:7]] == [True, False, True]
    got = answers[7]
    assert [(m["payload"], m["redelivered"], m["message_count"]) for m in got] == [
        ("one", False, 1),
        ("two", False, 0),
    ]
    assert got[0]["properties"] == {"headers": {"n": 1}}
    assert got[1]["properties"] == []
    again = answers[8]
    assert [(m["payload"], m["redelivered"], m["message_count"]) for m in again] == [("one", True, 1)]


def _msg(key: str, payload: str, **props: Any) -> dict[str, Any]:
    return {"routing_key": key, "properties": props, "payload": payload, "payload_encoding": "string"}


def _get(count: int, ackmode: str, **extra: Any) -> dict[str, Any]:
    return {"count": count, "ackmode": ackmode, "encoding": "auto", **extra}


def test_reject_requeue_false_dead_letters_and_truncate(mgmt: tuple[BrokerThread, str]) -> None:
    _, base = mgmt
    assert call(base, "PUT", "/api/queues/%2F/dlq", body={})[0] == 201
    args = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"}
    assert call(base, "PUT", "/api/queues/%2F/src", body={"arguments": args})[0] == 201
    raw = base64.b64encode(b"\xff\xfe-binary").decode()
    body = {"routing_key": "src", "properties": {}, "payload": raw, "payload_encoding": "base64"}
    assert call(base, "POST", "/api/exchanges/%2F/amq.default/publish", body=body) == (200, {"routed": True})
    status, got = call(
        base, "POST", "/api/queues/%2F/src/get", body=_get(3, "reject_requeue_false", truncate=2)
    )
    assert status == 200
    assert [(m["payload"], m["payload_encoding"], m["payload_bytes"]) for m in got] == [
        (base64.b64encode(b"\xff\xfe").decode(), "base64", 9)
    ]
    status, dead = call(base, "POST", "/api/queues/%2F/dlq/get", body=_get(1, "ack_requeue_false"))
    assert status == 200 and len(dead) == 1
    assert dead[0]["properties"]["headers"]["x-death"][0]["reason"] == "rejected"
    assert call(base, "GET", "/api/queues/%2F/src")[1]["messages"] == 0


# -- compared with the reference RabbitMQ ---------------------------------------------------------


def _sequence(base: str, vhost: str, admin: str) -> list[tuple[str, int, Any]]:
    """Writes as an administrator without permissions on `vhost`, then a definitions import."""
    v = urllib.parse.quote(vhost, safe="")
    doc = {
        "queues": [{"name": "dq", "durable": True, "auto_delete": False, "arguments": {}}],
        "exchanges": [
            {
                "name": "dx",
                "type": "fanout",
                "durable": True,
                "auto_delete": False,
                "internal": False,
                "arguments": {},
            }
        ],
        "bindings": [
            {
                "source": "dx",
                "destination": "dq",
                "destination_type": "queue",
                "routing_key": "",
                "arguments": {},
            }
        ],
    }
    out: list[tuple[str, int, Any]] = []

    def step(label: str, method: str, path: str, auth: str, body: Any = None) -> None:
        status, answer = call(base, method, path, body, auth)
        out.append((label, status, answer))

    step("declare without permissions", "PUT", f"/api/queues/{v}/pq", admin, {"durable": True})
    step(
        "publish without permissions",
        "POST",
        f"/api/exchanges/{v}/amq.default/publish",
        admin,
        _msg("x", "y"),
    )
    step("import into the vhost", "POST", f"/api/definitions/{v}", admin, doc)
    step("imported queue", "GET", f"/api/queues/{v}/dq", GUEST)
    step("imported binding", "GET", f"/api/bindings/{v}/e/dx/q/dq", GUEST)
    glob = {"queues": [{**doc["queues"][0], "name": "gq", "vhost": vhost}]}
    step("global import", "POST", "/api/definitions", admin, glob)
    step("globally imported queue", "GET", f"/api/queues/{v}/gq", GUEST)
    return [(label, status, _shape(label, answer)) for label, status, answer in out]


def _shape(label: str, answer: Any) -> Any:
    """Only what both brokers must agree on: error bodies whole, objects by their declared fields."""
    if isinstance(answer, dict) and "name" in answer:
        return {k: answer[k] for k in ("name", "durable", "auto_delete", "arguments")}
    if isinstance(answer, list):
        return [{k: b[k] for k in ("source", "destination", "routing_key")} for b in answer]
    return answer


@pytest.fixture
def throwaway() -> Iterator[tuple[str, str]]:
    """(vhost, "user:password") of an administrator with no permissions on the vhost, on both brokers."""
    run = uuid.uuid4().hex[:6]
    yield f"hbw-{run}", f"hbw-admin-{run}"


def _make(base: str, vhost: str, user: str) -> None:
    assert call(base, "PUT", f"/api/vhosts/{urllib.parse.quote(vhost, safe='')}")[0] in (201, 204)
    body = {"password": "pw", "tags": "administrator"}
    assert call(base, "PUT", f"/api/users/{user}", body=body)[0] in (201, 204)
    # a new vhost grants its creator (guest) full permissions; the administrator gets none
    assert call(base, "GET", f"/api/permissions/{urllib.parse.quote(vhost, safe='')}/{user}")[0] == 404


def _drop(base: str, vhost: str, user: str) -> None:
    call(base, "DELETE", f"/api/vhosts/{urllib.parse.quote(vhost, safe='')}")
    call(base, "DELETE", f"/api/users/{user}")


def test_admin_without_permissions_as_rabbitmq(
    mgmt: tuple[BrokerThread, str], throwaway: tuple[str, str]
) -> None:
    if not rabbitmq_reachable():
        pytest.skip("reference RabbitMQ not reachable on 127.0.0.1:5672/15672")
    _, ours = mgmt
    vhost, user = throwaway
    results = {}
    for base in (RABBIT_API, ours):
        _make(base, vhost, user)
        try:
            results[base] = _sequence(base, vhost, f"{user}:pw")
        finally:
            _drop(base, vhost, user)
    theirs = results[RABBIT_API]
    assert theirs[0][1:] == (401, {"error": "not_authorised", "reason": "Access refused."})
    assert theirs[2][1] == 204  # the import acts as the internal superuser
    assert results[ours] == theirs


PROPERTY_CASES: list[dict[str, Any]] = [
    {"priority": "x"},
    {"timestamp": "x"},
    {"message_id": 5},
    {"delivery_mode": "2"},
    {"delivery_mode": 2.0},
    {"expiration": 60000},
    {"unknownprop": 1},
    {
        "priority": 5,
        "timestamp": 1700000000,
        "delivery_mode": 2,
        "content_type": "text/plain",
        "message_id": "m1",
        "headers": {"a": [1, "b", {"c": 2.5}], "t": True, "s": "x"},
    },
]


def _publish_and_get(base: str, queue: str) -> list[tuple[int, Any]]:
    out = []
    for props in PROPERTY_CASES:
        body = {"routing_key": queue, "properties": props, "payload": "p", "payload_encoding": "string"}
        out.append(call(base, "POST", "/api/exchanges/%2F/amq.default/publish", body=body))
    out.append(call(base, "POST", "/api/bindings/hbw-no-such-vhost/e/x/q/q", body={"routing_key": "k"}))
    for name in ("amq.rabbitmq.reply-to", "amq.rabbitmq.reply-to.abc", "amq.foo"):
        out.append(call(base, "PUT", f"/api/queues/%2F/{name}", body={}))
    status, got = call(base, "POST", f"/api/queues/%2F/{queue}/get", body=_get(10, "ack_requeue_false"))
    out.append((status, got))
    return out


def test_publish_properties_and_rendering_as_rabbitmq(mgmt: tuple[BrokerThread, str]) -> None:
    if not rabbitmq_reachable():
        pytest.skip("reference RabbitMQ not reachable on 127.0.0.1:5672/15672")
    _, ours = mgmt
    queue = f"hbw-props-{uuid.uuid4().hex[:6]}"
    results = {}
    for base in (RABBIT_API, ours):
        assert (
            call(base, "PUT", f"/api/queues/%2F/{queue}", body={"arguments": {"x-max-priority": 9}})[0] == 201
        )
        try:
            results[base] = _publish_and_get(base, queue)
        finally:
            call(base, "DELETE", f"/api/queues/%2F/{queue}")
    theirs = results[RABBIT_API]
    assert theirs[0] == (400, {"error": "bad_request", "reason": ["not_int", "priority"]})
    assert len(theirs[-1][1]) == 2  # the unknown property's message and the full one
    assert results[ours] == theirs


def test_persistent_publish_waits_for_the_store_and_survives_a_restart(tmp_path: Any) -> None:
    """A persistent message to a durable queue is answered after its commit, as a confirm is."""
    for round_ in (1, 2):
        with (
            BrokerThread(host="127.0.0.1", port=0, data_dir=str(tmp_path)) as b,
            management_on_loop(b) as base,
        ):
            if round_ == 1:
                assert call(base, "PUT", "/api/queues/%2F/dur", body={"durable": True})[0] == 201
                msg = _msg("dur", "kept", delivery_mode=2)
                assert call(base, "POST", "/api/exchanges/%2F/amq.default/publish", body=msg) == (
                    200,
                    {"routed": True},
                )
                got = call(base, "POST", "/api/queues/%2F/dur/get", body=_get(1, "ack_requeue_true"))[1]
                assert [m["payload"] for m in got] == ["kept"]
            else:
                got = call(base, "POST", "/api/queues/%2F/dur/get", body=_get(1, "ack_requeue_false"))[1]
                assert [(m["payload"], m["redelivered"]) for m in got] == [("kept", True)]
