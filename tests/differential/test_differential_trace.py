"""The firehose tracer, live-compared: `amq.rabbitmq.trace` in a vhost with tracing on.

The same scenario (tests/trace_support.py) runs against RabbitMQ 3.10.8 and an embedded hashbroker:
a fresh vhost, tracing switched on through the management API, publishes of every kind (all
properties set, unroutable, to the default exchange, with CC and BCC headers, a timestamp wider
than 32 bits) and deliveries of every kind (basic.get, a requeued redelivery, a consumer); then
the trace queue is read with a raw basic.get. Routing keys, every header with its wire type, the
trace messages' own properties and bodies must be equal, modulo the node name and the
connections' names (compared by their "host:port -> host:port" shape).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from broker.embedded import BrokerThread
from tests.rabbitmq_probe import MANAGEMENT, Target
from tests.trace_support import call, firehose_scenario, q

pytestmark = pytest.mark.rabbitmq_plugins(MANAGEMENT)

_TARGET = Target.from_env()
_RABBIT: dict[str, Any] = {}


def _rabbit_api() -> str:
    host, port = _TARGET.management or ("127.0.0.1", 15672)
    return f"http://{host}:{port}"


def _rabbit_node() -> str:
    status, nodes = call(_rabbit_api(), "GET", "/api/nodes")
    assert status == 200, nodes
    return str(nodes[0]["name"])


@pytest.fixture(scope="module")
def hashbroker_mgmt() -> Iterator[BrokerThread]:
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        yield b


def _compare(scenario: Any, target: str, rabbitmq_url: str, hb: BrokerThread) -> None:
    key = scenario.__name__
    if target == "rabbitmq" or key not in _RABBIT:
        amqp = _TARGET.amqp or ("127.0.0.1", 5672)
        _RABBIT[key] = scenario(_rabbit_api(), amqp[1], _rabbit_node())
    if target == "rabbitmq":
        return
    ours = scenario(f"http://127.0.0.1:{hb.broker.management.port}", hb.port, hb.broker.cluster.local)
    assert ours == _RABBIT[key]


def tracing_switch(api: str, _amqp_port: int, _node: str) -> list[Any]:
    """PUT /api/vhosts/<v> with `tracing` values RabbitMQ accepts and refuses (nothing is created on a
    refusal); a PUT without `tracing` leaves it as it was."""
    vhost = f"tracer-test-switch-{uuid.uuid4().hex[:8]}"
    path = f"/api/vhosts/{q(vhost)}"
    out: list[Any] = []
    try:
        for value in ("yes", 1, None, "true"):
            out.append([value, call(api, "PUT", path, {"tracing": value}), call(api, "GET", path)[0]])
        out.append(call(api, "PUT", path, {"description": "kept"}))
        out.append(call(api, "GET", path)[1]["tracing"])
        out.append(call(api, "PUT", path, {"tracing": "false"}))
        out.append(call(api, "GET", path)[1]["tracing"])
    finally:
        call(api, "PUT", path, {"tracing": False})
        call(api, "DELETE", path)
    return out


@pytest.mark.parametrize("target", ["rabbitmq", "hashbroker"])
def test_firehose_trace_messages_as_rabbitmq(
    target: str, rabbitmq_url: str, hashbroker_mgmt: BrokerThread
) -> None:
    _compare(firehose_scenario, target, rabbitmq_url, hashbroker_mgmt)


@pytest.mark.parametrize("target", ["rabbitmq", "hashbroker"])
def test_tracing_switch_as_rabbitmq(target: str, rabbitmq_url: str, hashbroker_mgmt: BrokerThread) -> None:
    _compare(tracing_switch, target, rabbitmq_url, hashbroker_mgmt)
