"""Quorum queues on hashbroker against RabbitMQ 3.10.8: the scenarios of tests/qs_scenarios.py run
against an embedded hashbroker (with its management API) and compared with the observation recorded
on the live RabbitMQ (tests/data/quorum_stream_observations.json), and, where RabbitMQ is reachable,
with a fresh run there too (tests marked live)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.differential_support import assert_same_observation
from tests.qs_scenarios import QsCtx, _hash_destinations, recorded, registry

RECORDED = recorded()

#: Quorum scenarios that match the recording exactly on hashbroker.
QUORUM_SCENARIOS = [
    "qq_declare_ok_and_passive",
    "qq_redeclare_equivalence",
    "qq_delivery_count_basic_get",
    "qq_delivery_count_consumer",
    "qq_requeue_order_no_limit",
    "qq_requeue_order_with_limit",
    "qq_delivery_limit_drop",
    "qq_dead_letter_reasons",
    "qq_message_ttl",
    "qq_expires",
    "qq_drop_head",
    "qq_reject_publish",
    "qq_unsupported_operations",
    "qq_consumer_priority",
    "qq_cancel_and_purge",
]


#: Declaration scenarios that also read each queue back from the management API.
DECLARE_SCENARIOS = ["qq_declare_flags", "qq_declare_arguments"]


def _without_mgmt(obs: dict[str, Any]) -> dict[str, Any]:
    return {k: {f: v for f, v in case.items() if f != "mgmt"} for k, case in obs.items()}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", QUORUM_SCENARIOS)
def test_quorum_matches_recording(name: str, qs_broker_url: str) -> None:
    assert_same_observation(name, registry.run(name, qs_broker_url), RECORDED[name])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", DECLARE_SCENARIOS)
def test_quorum_declarations_match_recording(name: str, qs_broker_url: str) -> None:
    actual = _without_mgmt(registry.run(name, qs_broker_url))
    assert_same_observation(name, actual, _without_mgmt(RECORDED[name]))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", DECLARE_SCENARIOS)
def test_quorum_declarations_in_management_match_recording(name: str, qs_broker_url: str) -> None:
    assert_same_observation(name, registry.run(name, qs_broker_url), RECORDED[name])


#: The same scenarios against the live RabbitMQ, where the management API is not needed.
LIVE_SCENARIOS = QUORUM_SCENARIOS


@pytest.mark.live
@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", LIVE_SCENARIOS)
def test_quorum_matches_live_rabbitmq(name: str, qs_broker_url: str, rabbitmq_url: str) -> None:
    assert_same_observation(name, registry.run(name, qs_broker_url), registry.run(name, rabbitmq_url))


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("xtype", "weights"), [("x-consistent-hash", ("1", "2", "3")), ("x-modulus-hash", ("", "", ""))]
)
def test_hash_routing_into_quorum_queues_is_routing_into_classic(
    xtype: str, weights: tuple[str, str, str], qs_broker_url: str
) -> None:
    """1,000 keys through x-consistent-hash (weights 1, 2, 3) and x-modulus-hash into three quorum
    queues reach the same queue, key by key, as on RabbitMQ 3.10.8 into classic ones (recorded),
    and the same as into classic queues on hashbroker."""
    expected = RECORDED["hash_routing_into_quorum_and_stream"][xtype]["destinations_classic"]
    ctx = QsCtx(qs_broker_url)
    try:
        for tag, qargs in (("qq", {"x-queue-type": "quorum"}), ("cq", {})):
            kinds = [(w, qargs) for w in weights]
            got = _hash_destinations(ctx, f"{xtype[2:5]}_{tag}", xtype, kinds)
            assert got == expected, (
                f"{tag}: {sum(a != b for a, b in zip(got, expected, strict=True))} keys differ"
            )
    finally:
        ctx.cleanup()
