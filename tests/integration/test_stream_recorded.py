"""Streams on hashbroker against RabbitMQ 3.10.8's recorded observations.

Each stream scenario of `tests/qs_scenarios.py` runs against an embedded hashbroker (with its
management API) and must give exactly the observation `tools/probe_quorum_streams.py` recorded on
the live RabbitMQ 3.10.8 in `tests/data/quorum_stream_observations.json`. The recording is
deterministic (the probe writes byte-identical files on two runs), so comparing with it costs one
run; `tests/differential/test_stream_differential.py` runs scenarios against the live broker as well.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.embedded import BrokerThread
from tests.qs_scenarios import registry

RECORDED: dict[str, Any] = json.loads(
    (Path(__file__).parents[1] / "data" / "quorum_stream_observations.json").read_text()
)

#: The stream scenarios of the recording.
STREAM_SCENARIOS = (
    "st_declare_flags",
    "st_declare_arguments",
    "st_redeclare_and_passive",
    "st_consume_rules",
    pytest.param("st_offsets", marks=pytest.mark.slow),  # 20 consumers, each waits out a quiet spell
    "st_next_and_last_then_publish",
    "st_prefetch_and_acks",
    "st_retention_segments",
    # with a quorum queue or a classic queue beside the stream, for contrast
    "st_headers_and_properties",
    "st_delete_with_consumers",
    pytest.param("hash_routing_into_quorum_and_stream", marks=pytest.mark.slow),  # 8 topologies, 1,000 keys
)


@pytest.fixture(scope="module")
def hashbroker_urls() -> Iterator[tuple[str, str]]:
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        yield b.url, f"http://127.0.0.1:{b.broker.management.port}"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", STREAM_SCENARIOS)
def test_stream_scenario_matches_recording(name: str, hashbroker_urls: tuple[str, str]) -> None:
    url, mgmt = hashbroker_urls
    registry.mgmt_urls[url] = mgmt
    actual = registry.run(name, url)
    expected = RECORDED[name]
    assert actual == expected, (
        f"--- rabbitmq\n{json.dumps(expected, indent=1, sort_keys=True)}\n"
        f"--- hashbroker\n{json.dumps(actual, indent=1, sort_keys=True)}"
    )
