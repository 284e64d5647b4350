"""Streams on hashbroker against RabbitMQ 3.10.8's recorded observations.

Each stream scenario of `tests/qs_scenarios.py` runs against an embedded hashbroker (with its
management API) and must give exactly the observation `tools/probe_quorum_streams.py` recorded on
the live RabbitMQ 3.10.8 in `tests/data/quorum_stream_observations.json`. The recording is
deterministic (the probe writes byte-identical files on two runs), so comparing with it costs one
run; `tests/differential/test_stream_differential.py` runs scenarios against the live broker as well.
"""

from __future__ import annotations

import pytest

from tests.differential_support import assert_same_observation
from tests.qs_scenarios import recorded, registry

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


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", STREAM_SCENARIOS)
def test_stream_scenario_matches_recording(name: str, qs_broker_url: str) -> None:
    assert_same_observation(name, registry.run(name, qs_broker_url), recorded()[name])
