"""Quorum queues outside the entity layer, against RabbitMQ 3.10.8: the management API's queue
object (field names, value types, membership, dead-letter counts), which policy applies to a quorum
queue, and definitions export/import. Each scenario runs on an embedded hashbroker (with its
management API) and is compared with the recording of tests/data/quorum_stream_observations.json
and, where RabbitMQ is reachable, with a fresh run there (tests marked live)."""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.qs_scenarios import QQ, QsCtx, QsRegistry, confirm_channel, count, publish_confirmed, registry

RECORDED: dict[str, Any] = json.loads(
    (Path(__file__).parent / "data" / "quorum_stream_observations.json").read_text()
)

#: Recorded scenarios that read quorum queues back from the management API.
MGMT_SCENARIOS = [
    "qq_management_fields",
    "qq_declare_arguments",
    "qq_policy",
    "qq_single_active_consumer",
    "qq_dead_letter_at_least_once",
]

local = QsRegistry()


def _put_policy(ctx: QsCtx, label: str, pattern: str, definition: dict[str, Any], priority: int) -> Any:
    name = ctx._name(label)
    ctx.policies.append(name)
    body = {"pattern": pattern, "definition": definition, "apply-to": "queues", "priority": priority}
    return ctx._request("PUT", f"/api/policies/%2F/{urllib.parse.quote(name, safe='')}", body)


def _wait_policy(ctx: QsCtx, q: str) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    mq = ctx.mgmt_queue(q)
    while "effective_policy_definition" not in mq and time.monotonic() < deadline:
        time.sleep(0.5)
        mq = ctx.mgmt_queue(q)
    return mq


@local.scenario
def scenario_qq_policy_priority_fallthrough(ctx: QsCtx) -> Any:
    """The highest-priority policy holds a key quorum queues refuse: the next matching one the type
    accepts applies (rabbit_policy:matches/2 filters by is_policy_applicable before sorting); a
    classic queue under the same policies takes the highest one."""
    conn = ctx.connect()
    ch = confirm_channel(conn)
    qq, cq = ctx.queue("qq"), ctx.queue("cq")
    pattern = f"^({qq}|{cq})$"
    out: dict[str, Any] = {
        "put_high": _put_policy(ctx, "high", pattern, {"max-length": 1, "queue-mode": "lazy"}, 10),
        "put_low": _put_policy(ctx, "low", pattern, {"max-length": 3}, 1),
    }
    ch.queue_declare(qq, durable=True, arguments=QQ)
    ch.queue_declare(cq, durable=True)
    time.sleep(0.3)
    for label, q in (("quorum", qq), ("classic", cq)):
        publish_confirmed(ch, q, ["a", "b", "c", "d", "e"])
        mq = _wait_policy(ctx, q)
        out[label] = {
            "count": count(ch, q),
            "policy": mq.get("policy"),
            "effective_policy_definition": mq.get("effective_policy_definition"),
        }
    return out


@pytest.fixture(scope="module")
def broker_url() -> Iterator[str]:
    from broker.embedded import BrokerThread

    with BrokerThread(port=0, management_port=0) as b:
        registry.mgmt_urls[b.url] = str(b.broker.management.url)
        local.mgmt_urls[b.url] = str(b.broker.management.url)
        yield b.url


def _compare(name: str, actual: Any, expected: Any) -> None:
    if actual != expected:
        pytest.fail(
            f"hashbroker differs from RabbitMQ 3.10.8 in scenario {name!r}\n--- rabbitmq\n"
            f"{json.dumps(expected, indent=1, sort_keys=True)}\n--- hashbroker\n"
            f"{json.dumps(actual, indent=1, sort_keys=True)}",
            pytrace=False,
        )


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", MGMT_SCENARIOS)
def test_quorum_management_matches_recording(name: str, broker_url: str) -> None:
    _compare(name, registry.run(name, broker_url), RECORDED[name])


@pytest.mark.live
@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", ["qq_management_fields", "qq_policy"])
def test_quorum_management_matches_live_rabbitmq(name: str, broker_url: str, rabbitmq_url: str) -> None:
    _compare(name, registry.run(name, broker_url), registry.run(name, rabbitmq_url))


@pytest.mark.live
@pytest.mark.timeout(120)
def test_policy_priority_falls_through_to_an_applicable_policy(broker_url: str, rabbitmq_url: str) -> None:
    name = "qq_policy_priority_fallthrough"
    expected = local.run(name, rabbitmq_url)
    assert expected["quorum"]["policy"] == "<low>" and expected["quorum"]["count"] == 3, expected
    _compare(name, local.run(name, broker_url), expected)
