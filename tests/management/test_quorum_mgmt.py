"""Quorum queues outside the entity layer, against RabbitMQ 3.10.8: the management API's queue
object (field names, value types, membership, dead-letter counts), which policy applies to a quorum
queue, and definitions export/import. Each scenario runs on an embedded hashbroker (with its
management API) and is compared with the recording of tests/data/quorum_stream_observations.json
and, where RabbitMQ is reachable, with a fresh run there (tests marked live)."""

from __future__ import annotations

import time
import urllib.parse
from typing import Any

import pytest

from tests.differential_support import assert_same_observation
from tests.qs_scenarios import (
    QQ,
    QsCtx,
    QsRegistry,
    confirm_channel,
    count,
    publish_confirmed,
    recorded,
    registry,
)

RECORDED = recorded()

#: Recorded scenarios that read quorum queues back from the management API.
MGMT_SCENARIOS = [
    "qq_management_fields",
    "qq_declare_arguments",
    "qq_policy",
    "qq_single_active_consumer",
    "qq_dead_letter_at_least_once",
]

local = QsRegistry()
local.mgmt_urls = registry.mgmt_urls  # the qs_broker_url fixture registers with registry


def _put_policy(ctx: QsCtx, label: str, pattern: str, definition: dict[str, Any], priority: int) -> Any:
    name = ctx.name_for(label)
    ctx.policies.append(name)
    body = {"pattern": pattern, "definition": definition, "apply-to": "queues", "priority": priority}
    return ctx.api_request("PUT", f"/api/policies/%2F/{urllib.parse.quote(name, safe='')}", body)


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


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", MGMT_SCENARIOS)
def test_quorum_management_matches_recording(name: str, qs_broker_url: str) -> None:
    assert_same_observation(name, registry.run(name, qs_broker_url), RECORDED[name])


@pytest.mark.live
@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", ["qq_management_fields", "qq_policy"])
def test_quorum_management_matches_live_rabbitmq(name: str, qs_broker_url: str, rabbitmq_url: str) -> None:
    assert_same_observation(name, registry.run(name, qs_broker_url), registry.run(name, rabbitmq_url))


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.timeout(120)
def test_policy_priority_falls_through_to_an_applicable_policy(qs_broker_url: str, rabbitmq_url: str) -> None:
    name = "qq_policy_priority_fallthrough"
    expected = local.run(name, rabbitmq_url)
    assert expected["quorum"]["policy"] == "<low>" and expected["quorum"]["count"] == 3, expected
    assert_same_observation(name, local.run(name, qs_broker_url), expected)


def _definitions_entry(ctx: QsCtx, name: str) -> dict[str, Any]:
    status, doc = ctx.api_request("GET", "/api/definitions")
    assert status == 200, (status, doc)
    return next(q for q in doc["queues"] if q["name"] == name)


@local.scenario
def scenario_qq_definitions_round_trip(ctx: QsCtx) -> Any:
    """A quorum queue in the definitions export (3.10.8: its type is only in `arguments`), then
    deleted and imported back from that entry: the same type, arguments and flags."""
    ch = ctx.channel()
    q = ctx.queue("qq")
    args = {**QQ, "x-delivery-limit": 3, "x-max-length": 10, "x-overflow": "reject-publish"}
    ch.queue_declare(q, durable=True, arguments=args)
    exported = _definitions_entry(ctx, q)
    ch.queue_delete(q)
    status, _body = ctx.api_request("POST", "/api/definitions", {"queues": [exported]})
    mq = ctx.mgmt_queue(q)
    reimported = {k: mq.get(k) for k in ("type", "durable", "auto_delete", "arguments", "leader", "members")}
    for n in reimported["members"] or []:
        ctx.node(n)
    if isinstance(reimported["leader"], str):
        ctx.node(reimported["leader"])
    redeclare = "ok"
    try:
        ch.queue_declare(q, durable=True, arguments=args)
    except Exception as exc:  # an import that lost the type or an argument makes this inequivalent
        redeclare = repr(exc)
    return {"exported": exported, "import": status, "reimported": reimported, "redeclare": redeclare}


@pytest.mark.timeout(60)
def test_quorum_definitions_round_trip(qs_broker_url: str) -> None:
    got = local.run("qq_definitions_round_trip", qs_broker_url)
    assert got["reimported"]["type"] == "quorum" and got["redeclare"] == "ok", got
    assert got["exported"]["arguments"] == got["reimported"]["arguments"]


@pytest.mark.live
@pytest.mark.timeout(120)
def test_quorum_definitions_round_trip_matches_live_rabbitmq(qs_broker_url: str, rabbitmq_url: str) -> None:
    name = "qq_definitions_round_trip"
    assert_same_observation(name, local.run(name, qs_broker_url), local.run(name, rabbitmq_url))


@pytest.mark.timeout(60)
def test_membership_on_emulated_nodes_in_management() -> None:
    """With --nodes a..e a quorum queue gets 3 members (x-quorum-initial-group-size or 3): the
    declaring node plus the nodes holding the fewest replicas; the leader is the declaring node, or
    with `balanced` the member leading the fewest queues. Management shows leader/node/members/
    online/open_files from that placement."""
    import pika

    from broker.embedded import BrokerThread

    nodes = ["rabbit@a", "rabbit@b", "rabbit@c", "rabbit@d", "rabbit@e"]
    with BrokerThread(port=0, management_port=0, nodes=nodes) as b:
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        ch = conn.channel()
        ch.queue_declare("m1", durable=True, arguments=QQ)
        ch.queue_declare("m2", durable=True, arguments=QQ)
        ch.queue_declare("m3", durable=True, arguments={**QQ, "x-quorum-initial-group-size": 5})
        ch.queue_declare("m4", durable=True, arguments={**QQ, "x-queue-leader-locator": "balanced"})
        conn.close()
        ctx = QsCtx(b.url, mgmt_url=str(b.broker.management.url))
        view = {n: ctx.mgmt_queue(n) for n in ("m1", "m2", "m3", "m4")}
    fields = {
        n: (q["leader"], q["node"], q["members"], q["online"], q["open_files"]) for n, q in view.items()
    }
    assert fields["m1"] == ("rabbit@a", "rabbit@a", ["rabbit@a", "rabbit@b", "rabbit@c"],
                            ["rabbit@a", "rabbit@b", "rabbit@c"],
                            {"rabbit@a": 0, "rabbit@b": 0, "rabbit@c": 0})  # fmt: skip
    assert fields["m2"][2] == ["rabbit@a", "rabbit@d", "rabbit@e"]
    assert fields["m3"][2] == nodes
    # balanced: a leads m1..m3, so the member leading the fewest queues (b, first in member order)
    assert fields["m4"][0] == fields["m4"][1] == "rabbit@b"
