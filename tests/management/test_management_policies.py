"""`/api/policies`: validated, stored and applied by the broker's policy engine, shaped as RabbitMQ."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from broker.embedded import BrokerThread
from tests.conftest import rabbitmq_reachable
from tests.management.test_management_api import RABBIT_API, http


@pytest.fixture
def base() -> Iterator[str]:
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        yield f"http://127.0.0.1:{b.broker.management.port}"


def test_put_get_delete(base: str) -> None:
    body = {"pattern": "^hb\\.", "definition": {"max-length": 10}, "apply-to": "queues", "priority": 2}
    assert http(base, "PUT", "/api/policies/%2F/p1", body)[0] == 201
    assert http(base, "PUT", "/api/policies/%2F/p1", body)[0] == 204
    expected = {"vhost": "/", "name": "p1", "pattern": "^hb\\.", "apply-to": "queues",
                "definition": {"max-length": 10}, "priority": 2}  # fmt: skip
    assert http(base, "GET", "/api/policies/%2F/p1")[1] == expected
    assert http(base, "GET", "/api/policies")[1] == [expected]
    assert http(base, "GET", "/api/policies/%2F")[1] == [expected]
    assert http(base, "GET", "/api/definitions")[1]["policies"] == [expected]
    assert http(base, "DELETE", "/api/policies/%2F/p1")[0] == 204
    assert http(base, "GET", "/api/policies/%2F/p1")[0] == 404
    assert http(base, "DELETE", "/api/policies/%2F/p1")[0] == 204  # as RabbitMQ
    assert http(base, "GET", "/api/policies/nosuch")[0] == 404


BAD_BODIES = [
    {"definition": {"max-length": 1}},
    {"pattern": "^hbpol\\.nomatch$"},
    {"pattern": "^hbpol\\.nomatch$", "definition": {"foo": 1}},
    {"pattern": "^hbpol\\.nomatch$", "definition": {"max-length": 1}, "apply-to": "bogus"},
    {"pattern": "^hbpol\\.nomatch$", "definition": {"max-length": 1}, "priority": "x"},
    {"pattern": "^hbpol\\.nomatch$", "definition": {"max-length": "abc"}},
    {"pattern": "^hbpol\\.nomatch$", "definition": {"message-ttl": -5, "expires": 0}},
    {"pattern": "^hbpol\\.nomatch$", "definition": {"shards-per-node": "x"}},
]


@pytest.mark.parametrize("body", BAD_BODIES)
def test_validation_errors_match_rabbitmq(base: str, body: dict[str, object]) -> None:
    status, got, _ = http(base, "PUT", "/api/policies/%2F/bad", body)
    assert status == 400
    if not rabbitmq_reachable():
        pytest.skip("no reference RabbitMQ to compare the error text with")
    name = f"hbpol.{uuid.uuid4().hex[:8]}"
    live_status, live, _ = http(RABBIT_API, "PUT", f"/api/policies/%2F/{name}", body)
    http(RABBIT_API, "DELETE", f"/api/policies/%2F/{name}")
    assert (status, got) == (live_status, live)


@pytest.mark.live
def test_shape_matches_rabbitmq(base: str) -> None:
    if not rabbitmq_reachable():
        pytest.skip("no reference RabbitMQ on 127.0.0.1:5672")
    name = f"hbpol.{uuid.uuid4().hex[:8]}"
    body = {"pattern": "^hbpol\\.nomatch$", "definition": {"max-length": 3}}
    try:
        assert http(RABBIT_API, "PUT", f"/api/policies/%2F/{name}", body)[0] == 201
        live = http(RABBIT_API, "GET", f"/api/policies/%2F/{name}")[1]
    finally:
        http(RABBIT_API, "DELETE", f"/api/policies/%2F/{name}")
    assert http(base, "PUT", f"/api/policies/%2F/{name}", body)[0] == 201
    ours = http(base, "GET", f"/api/policies/%2F/{name}")[1]
    assert ours == live
    assert list(ours) == list(live)


NOMATCH = "^hbpol\\.nomatch$"
MORE_BODIES = [  # accepted by RabbitMQ 3.10.8 (stream, quorum and mirroring keys), or refused/crashed
    {"pattern": NOMATCH, "definition": {"max-age": "1D"}},
    {"pattern": NOMATCH, "definition": {"max-age": "5"}},
    {"pattern": NOMATCH, "definition": {"max-age": "abc"}},
    {"pattern": NOMATCH, "definition": {"stream-max-segment-size-bytes": 5, "initial-cluster-size": 3}},
    {"pattern": NOMATCH, "definition": {"stream-max-segment-size-bytes": "x"}},
    {"pattern": NOMATCH, "definition": {"queue-leader-locator": "balanced", "delivery-limit": 4}},
    {"pattern": NOMATCH, "definition": {"dead-letter-strategy": "at-least-once", "max-in-memory-length": 3}},
    {"pattern": NOMATCH, "definition": {"max-in-memory-bytes": -1}},
    {"pattern": NOMATCH, "definition": {"ha-mode": "exactly", "ha-params": 2, "ha-sync-mode": "automatic"}},
    {"pattern": NOMATCH, "definition": {"ha-mode": "all", "ha-params": 2}},
    {"pattern": NOMATCH, "definition": {"ha-sync-mode": "manual"}},
    {"pattern": NOMATCH, "definition": {"queue-master-locator": "x"}},
    {"pattern": NOMATCH, "definition": {"federation-upstream": "u"}},
    {"pattern": NOMATCH, "definition": {"max-length": 1}, "priority": 1.5},
    {"pattern": NOMATCH, "definition": {"max-length": 1}, "priority": "5"},
    {"pattern": 5, "definition": {"max-length": 1}},
    {"pattern": NOMATCH, "definition": '{"max-length":1}'},
    {"pattern": "^hb(", "definition": {"foo": 1}, "apply-to": "foo", "priority": "a"},
    {"pattern": "^hb(", "definition": {}, "apply-to": "foo"},
]


@pytest.fixture(scope="module")
def rabbit_vhost() -> Iterator[str]:
    """A throwaway vhost on the reference RabbitMQ, so policies there re-evaluate nothing else."""
    if not rabbitmq_reachable():
        pytest.skip("no reference RabbitMQ to compare with")
    vhost = f"hbpol-{uuid.uuid4().hex[:6]}"
    assert http(RABBIT_API, "PUT", f"/api/vhosts/{vhost}")[0] == 201
    yield vhost
    http(RABBIT_API, "DELETE", f"/api/vhosts/{vhost}")


@pytest.mark.live
@pytest.mark.parametrize("body", MORE_BODIES)
def test_accepted_and_refused_as_rabbitmq(base: str, rabbit_vhost: str, body: dict[str, object]) -> None:
    live = http(RABBIT_API, "PUT", f"/api/policies/{rabbit_vhost}/p", body)
    http(RABBIT_API, "DELETE", f"/api/policies/{rabbit_vhost}/p")
    ours = http(base, "PUT", "/api/policies/%2F/p", body)
    http(base, "DELETE", "/api/policies/%2F/p")
    assert ours[:2] == live[:2]
