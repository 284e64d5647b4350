"""Health checks answer as RabbitMQ 3.10.8's: the same status codes and bodies, healthy (compared
with the live RabbitMQ), for an unknown listener or a missing vhost (compared live), for arguments
the checks cannot parse (compared live), and with an alarm raised (compared with RabbitMQ's answer
as its rabbit_mgmt_wm_health_check_alarms / rabbit_alarm:format_as_maps write it: alarms are not
raised on the shared RabbitMQ).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from broker.embedded import BrokerThread
from tests import conftest
from tests.management.test_management_api import http
from tests.management_support import mgmt_base

RABBIT_API = conftest.RABBITMQ_API


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerThread]:
    with BrokerThread(port=0, management_port=0) as bt:
        yield bt


SAME_ANSWER = [
    "/api/health/checks/alarms",
    "/api/health/checks/local-alarms",
    "/api/health/checks/virtual-hosts",
    "/api/health/checks/node-is-quorum-critical",
    "/api/health/checks/node-is-mirror-sync-critical",
    "/api/health/checks/certificate-expiration/1/months",
    "/api/health/checks/certificate-expiration/1/foo",
    "/api/health/checks/certificate-expiration/x/days",
    "/api/health/checks/port-listener/abc",
    "/api/health/checks/protocol-listener/amqp",
    "/api/health/checks/protocol-listener/AMQP091",
    "/api/health/checks/protocol-listener/amqp0-9-1",
    "/api/health/checks/protocol-listener/http",
    "/api/aliveness-test/%2F",
    "/api/aliveness-test/no-such-vhost",
    "/api/healthchecks/node",
    "/api/healthchecks/node/rabbit@no-such-node",
    "/api/health/checks",
    "/api/health/checks/alarms/extra",
]


@pytest.mark.parametrize("path", SAME_ANSWER)
def test_same_answer_as_rabbitmq(broker: BrokerThread, rabbitmq_url: str, path: str) -> None:
    ours = http(mgmt_base(broker), "GET", path)
    theirs = http(RABBIT_API, "GET", path)
    assert (ours[0], ours[1]) == (theirs[0], theirs[1])
    assert ours[2]["content-type"] == theirs[2]["content-type"]


def test_listeners_as_rabbitmq_reports_them(broker: BrokerThread, rabbitmq_url: str) -> None:
    """Its own AMQP port is listening; an unknown port or protocol is a 503 naming what is missing
    and what is listening (the lists are each broker's own)."""
    for api, amqp_port in ((mgmt_base(broker), broker.port), (RABBIT_API, conftest.RABBITMQ_PORT)):
        assert http(api, "GET", f"/api/health/checks/port-listener/{amqp_port}")[:2] == (
            200,
            {"status": "ok", "port": amqp_port},
        )
        status, body, _ = http(api, "GET", "/api/health/checks/port-listener/1")
        assert status == 503
        assert body["status"] == "failed" and body["reason"] == "No active listener"
        assert body["missing"] == 1 and amqp_port in body["ports"]
        status, body, _ = http(api, "GET", "/api/health/checks/protocol-listener/mqtt")
        assert status == 503 and body["missing"] == "mqtt" and "amqp" in body["protocols"]
        assert list(body) == ["status", "reason", "missing", "protocols"]
    ours = http(mgmt_base(broker), "GET", "/api/health/checks/port-listener/1")[1]
    assert ours["ports"] == [broker.port, broker.broker.management.port]


def test_aliveness_needs_the_vhost(broker: BrokerThread) -> None:
    """Aliveness declares, publishes and gets as the caller: a user without the vhost is refused."""
    api = mgmt_base(broker)
    assert http(api, "PUT", "/api/users/alive-nobody", {"password": "p", "tags": "management"})[0] == 201
    try:
        status, body, _ = http(api, "GET", "/api/aliveness-test/%2F", auth=("alive-nobody", "p"))
        assert status == 401 and body["error"] == "not_authorised"
        assert http(api, "GET", "/api/health/checks/alarms", auth=("alive-nobody", "p"))[0] == 200
    finally:
        http(api, "DELETE", "/api/users/alive-nobody")


def recorded_alarm_answer(node: str, message: str, resources: list[str]) -> dict[str, Any]:
    """RabbitMQ 3.10.8's failure body: status, reason, alarms as rabbit_alarm:format_as_maps."""
    return {
        "status": "failed",
        "reason": message,
        "alarms": [{"resource": r, "node": node} for r in resources],
    }


def test_alarms_fail_the_checks_as_rabbitmq() -> None:
    with BrokerThread(port=0, management_port=0) as bt:
        api = mgmt_base(bt)
        node = bt.broker.cluster.local
        alarms = bt.broker.alarms
        bt.call(alarms.set, "disk", "test", "test")
        try:
            status, body, headers = http(api, "GET", "/api/health/checks/alarms")
            assert status == 503 and headers["content-type"] == "application/json"
            assert body == recorded_alarm_answer(
                node, "There are alarms in effect in the cluster", ["disk space"]
            )
            bt.call(alarms.set, "memory", "test", "test")
            status, body, _ = http(api, "GET", "/api/health/checks/local-alarms")
            assert status == 503
            assert body == recorded_alarm_answer(
                node, "There are alarms in effect on the node", ["memory", "disk space"]
            )
            status, body, _ = http(api, "GET", "/api/healthchecks/node")
            assert status == 200  # the old check says "failed" in a 200, as RabbitMQ's
            assert body == {
                "status": "failed",
                # io_lib's ~p breaks the list past 80 columns, aligned after its "["
                "reason": f"resource alarm(s) in effect:[{{resource_limit,memory,{node}}},\n"
                f"{' ' * 29}{{resource_limit,disk,{node}}}]",
            }
        finally:
            bt.call(alarms.clear, "memory", "", "test")
            bt.call(alarms.clear, "disk", "", "test")
        assert http(api, "GET", "/api/health/checks/alarms")[:2] == (200, {"status": "ok"})
        assert http(api, "GET", "/api/healthchecks/node")[:2] == (200, {"status": "ok"})
