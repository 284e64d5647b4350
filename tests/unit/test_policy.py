"""broker.entities.policy: RabbitMQ 3.10.8 policy validation texts, selection and value merging.

Error texts are checked against `rabbitmqctl set_policy` on the live broker, recorded in
tests/data/sharding_observations.json by tools/probe_rabbitmq_sharding.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from broker.entities.policy import (
    Policy,
    PolicyError,
    PolicyNotFound,
    PolicyStore,
    alternate_exchange,
    erlang_p,
    merge_operator_value,
    queue_settings,
    resolve,
)

OBS = json.loads((Path(__file__).parents[1] / "data" / "sharding_observations.json").read_text())


def _set(store: PolicyStore, definition: str, **kw: Any) -> str | None:
    try:
        store.set("p", r"^hbprobe\.nomatch$", definition, **kw)
    except PolicyError as exc:
        return exc.message
    return None


@pytest.mark.parametrize("definition", sorted(OBS["policy_validation"]["definitions"]))
def test_validation_texts_match_rabbitmqctl(definition: str) -> None:
    observed = OBS["policy_validation"]["definitions"][definition]
    if definition == "[]":  # RabbitMQ crashes ({badmap, []}); we refuse with a clean message
        assert _set(PolicyStore(), definition) is not None
        return
    got = _set(PolicyStore(), definition)
    assert got == observed["error"]


def test_options_validation() -> None:
    opts = OBS["policy_validation"]["options"]
    assert _set(PolicyStore(), '{"max-length":1}', apply_to="foo") == opts["apply-to foo"]["error"]
    assert _set(PolicyStore(), '{"max-length":1}', priority=-3) is None
    with pytest.raises(PolicyError) as info:
        PolicyStore().set("p", "^hb(", '{"max-length":1}')
    assert info.value.message == opts["bad regex ^hb("]["error"]


def test_json_error_is_not_a_validation_failure() -> None:
    with pytest.raises(PolicyError) as info:
        PolicyStore().set("p", "^x$", "{bad")
    assert not info.value.validation_failed
    assert info.value.message == "JSON decoding error. Reason: badarg"


def test_list_policies_rows() -> None:
    store = PolicyStore()
    store.set("hbprobe.err", "^x$", '{"shards-per-node":2,"max-length":1}', priority=-3, apply_to="exchanges")
    assert store.list_policies() == OBS["policy_validation"]["list_policies_json"]
    assert store.list_policies_table() == OBS["policy_validation"]["list_policies_table"]
    store.clear("hbprobe.err")
    with pytest.raises(PolicyNotFound):
        store.clear("hbprobe.err")
    assert OBS["policy_validation"]["clear_missing"]["error"] == PolicyNotFound.message


def test_effective_priority_apply_to_and_vhost() -> None:
    store = PolicyStore()
    store.set("low", "^orders", {"max-length": 5}, priority=1)
    store.set("high", "orders", {"max-length": 6}, priority=2, apply_to="queues")
    store.set("xonly", "^orders$", {"alternate-exchange": "ae"}, priority=9, apply_to="exchanges")
    store.set("other-vhost", ".*", {"max-length": 1}, priority=100, vhost="v2")
    assert store.effective("queue", "orders").name == "high"  # type: ignore[union-attr]
    assert store.effective("exchange", "orders").name == "xonly"  # type: ignore[union-attr]
    assert store.effective("exchange", "orders.eu").name == "low"  # type: ignore[union-attr]
    assert store.effective("queue", "billing") is None
    assert store.effective("queue", "billing", vhost="v2").name == "other-vhost"  # type: ignore[union-attr]
    # unanchored search, like re:run
    assert store.effective("queue", "eu.orders.x").name == "high"  # type: ignore[union-attr]


def test_priority_and_ties_as_observed() -> None:
    prio = OBS["policy_priority"]
    assert prio["higher_priority_wins"] == "hbprobe.prio.high"
    for case in prio["equal_priority"]:
        store = PolicyStore()
        for name in (case["created_first"], case["created_second"]):
            store.set(name, "^q$", {"max-length": 5}, apply_to="queues")
        # RabbitMQ's tie order is its table order; we document byte order of names and record
        # whether the live broker agreed in these cases.
        winner = store.effective("queue", "q").name  # type: ignore[union-attr]
        assert winner == min(case["created_first"], case["created_second"])


def test_set_replaces_and_returns_old() -> None:
    store = PolicyStore()
    old, new = store.set("p", "^a$", {"shards-per-node": 2})
    assert old is None and new.get("shards-per-node") == 2
    old2, _ = store.set("p", "^a$", {"shards-per-node": 3, "routing-key": "k"})
    assert old2 == new
    assert [p.name for p in store.policies()] == ["p"]


def test_policy_vs_arguments() -> None:
    pol = Policy(
        "p", ".*", {"message-ttl": 500, "max-length": 10, "dead-letter-exchange": "pdlx", "expires": 9000}
    )
    args = {"x-message-ttl": 1000, "x-max-length": 3, "x-dead-letter-exchange": "adlx"}
    assert queue_settings(pol, args) == {
        "message-ttl": 500,  # lower wins
        "max-length": 3,  # lower wins
        "dead-letter-exchange": "adlx",  # argument wins
        "expires": 9000,  # only the policy
    }
    assert resolve("overflow", "drop-head", "reject-publish") == "reject-publish"
    assert resolve("max-length-bytes", None, 7) == 7
    assert queue_settings(None, {}) == {}
    ae = Policy("ae", ".*", {"alternate-exchange": "from-policy"})
    assert alternate_exchange(ae, {"alternate-exchange": "from-arg"}) == "from-arg"
    assert alternate_exchange(ae, {}) == "from-policy"
    assert merge_operator_value("max-length", 10, 4) == 4
    assert merge_operator_value("expires", 100, 400) == 100


def test_erlang_p() -> None:
    assert erlang_p("x") == '<<"x">>'
    assert erlang_p(5) == "5"
    assert erlang_p(1.5) == "1.5"
    assert erlang_p(1e-5) == "1.0e-5"
    assert erlang_p(True) == "true"
    assert erlang_p(None) == "null"
    assert erlang_p([1, "a"]) == '[1,<<"a">>]'
