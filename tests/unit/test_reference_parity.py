"""Every key of every topology recorded from RabbitMQ 3.10.8 routes to the same queue here."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

import exchanges
from tests.conftest import load_reference

BIG = sorted(load_reference()["big"])
SMALL = sorted(load_reference()["small_keys_0_19"])


def _bindings(topology: dict[str, Any]) -> list[tuple[str, str]]:
    return [(b["queue"], b["binding_key"]) for b in topology["bindings_in_order"]]


@pytest.mark.parametrize("name", BIG)
def test_100k_keys_route_exactly_as_recorded(reference: dict[str, Any], name: str) -> None:
    topology = reference["big"][name]
    bindings = _bindings(topology)
    index = {queue: i for i, (queue, _) in enumerate(bindings)}
    keys = [str(i) for i in range(100_000)]
    routed = exchanges.predict(
        topology["exchange_type"], bindings, keys, arguments=topology["exchange_arguments"]
    )
    assert all(len(dests) == 1 for dests in routed)
    per_key = "".join(str(index[dests[0]]) for dests in routed)
    assert hashlib.sha256(per_key.encode()).hexdigest() == topology["per_key_queue_index_sha256"]
    recorded = topology["per_key_queue_index"]
    mismatches = [i for i, (a, b) in enumerate(zip(per_key, recorded, strict=True)) if a != b]
    assert mismatches == []
    counts = {queue: 0 for queue, _ in bindings}
    for dests in routed:
        counts[dests[0]] += 1
    assert counts == topology["per_queue_counts"]


@pytest.mark.parametrize("name", SMALL)
def test_20_key_tables(reference: dict[str, Any], name: str) -> None:
    topology = reference["small_keys_0_19"][name]
    table = topology["routing_key_to_queue"]
    routed = exchanges.predict(topology["exchange_type"], _bindings(topology), list(table))
    assert {key: dests[0] for key, dests in zip(table, routed, strict=True)} == table
