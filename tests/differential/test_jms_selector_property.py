"""JMS selectors, generated: `exchanges`' evaluation against rabbitmq_jms_topic_exchange 3.10.8's.

Each case binds four generated selector terms (comparisons across types, NULL logic, LIKE with and
without escapes, IN, BETWEEN in both forms, arithmetic, oddities such as LIKE's three-element form)
and publishes four messages with generated typed headers; the outcome is which selectors took
each message, or the 541 crash. Recorded on the live plugin (tests/data/jms_selector_cases.json,
seeds 0..199; re-record with `python -m tests.differential.test_jms_selector_property`), compared
with the library and, for some, with a running hashbroker; where the live plugin is on, hypothesis
draws new cases there (a few everyday, many more in the slow run).
"""

from __future__ import annotations

import json
import random
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.jms_selector_cases import BrokerRunner, case_from_json, case_to_json, make_case, predict
from tests.xtypes_support import JMS_TOPIC, xtypes_broker

RECORDING = Path(__file__).resolve().parent.parent / "data" / "jms_selector_cases.json"
RECORDED_SEEDS = range(200)


def recorded() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(RECORDING.read_text())
    return data


def test_the_library_matches_every_recorded_case() -> None:
    cases = recorded()
    assert len(cases) == len(RECORDED_SEEDS)
    outcomes = [o for c in cases for o in c["outcome"]]
    assert outcomes.count("crash") > 50 and sum(len(o) for o in outcomes if o != "crash") > 50
    mismatches = [
        (c["selectors"], c["messages"], c["outcome"], predict(case_from_json(c)))
        for c in cases
        if predict(case_from_json(c)) != c["outcome"]
    ]
    assert not mismatches, mismatches[:3]


def test_the_recorded_cases_are_the_seeded_ones() -> None:
    """The generator still makes what was recorded (else re-record)."""
    for seed, case in zip(RECORDED_SEEDS, recorded(), strict=True):
        assert case_to_json(make_case(random.Random(seed))) == {k: case[k] for k in ("selectors", "messages")}


@pytest.mark.timeout(120)
def test_a_running_hashbroker_matches_recorded_cases() -> None:
    with xtypes_broker() as b:
        runner = BrokerRunner(b.url, "hb-jms")
        try:
            for case in recorded()[:40]:
                assert runner.run(case_from_json(case)) == case["outcome"], case
        finally:
            runner.close()


@pytest.fixture
def live_runner(rabbitmq_url: str) -> Iterator[BrokerRunner]:
    runner = BrokerRunner(rabbitmq_url, f"hb-xtypes-{uuid.uuid4().hex[:8]}")
    yield runner
    runner.close()


def _check(runner: BrokerRunner, rng: random.Random) -> None:
    case = make_case(rng)
    assert predict(case) == runner.run(case), case_to_json(case)


@pytest.mark.live
@pytest.mark.rabbitmq_plugins(JMS_TOPIC)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rng=st.randoms(use_true_random=False))
def test_generated_selectors_match_the_live_plugin(live_runner: BrokerRunner, rng: random.Random) -> None:
    _check(live_runner, rng)


@pytest.mark.live
@pytest.mark.slow
@pytest.mark.rabbitmq_plugins(JMS_TOPIC)
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rng=st.randoms(use_true_random=False))
def test_many_generated_selectors_match_the_live_plugin(
    live_runner: BrokerRunner, rng: random.Random
) -> None:
    _check(live_runner, rng)


def record(url: str) -> None:
    runner = BrokerRunner(url, f"hb-xtypes-{uuid.uuid4().hex[:8]}")
    try:
        out = []
        for seed in RECORDED_SEEDS:
            case = make_case(random.Random(seed))
            out.append({**case_to_json(case), "outcome": runner.run(case)})
    finally:
        runner.close()
    RECORDING.write_text("[\n" + ",\n".join(json.dumps(c, separators=(",", ":")) for c in out) + "\n]\n")


if __name__ == "__main__":
    record(sys.argv[1] if len(sys.argv) > 1 else "amqp://guest:guest@127.0.0.1:5672/%2F")
