"""broker.entities.sharding and broker.entities.cluster against the live RabbitMQ 3.10.8 sharding
plugin's behaviour.

The observations come from tools/probe_rabbitmq_sharding.py (tests/data/sharding_observations.json).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import exchanges
from broker.entities.cluster import Cluster, ClusterError, validate_node_name
from broker.entities.sharding import (
    ShardingConfig,
    ShardingError,
    is_sharded,
    node_added,
    parse_shard_queue_name,
    policy_changed,
    rewrite_queue_method,
    select_shard,
    shard_bindings,
    shard_names,
    shard_queue_name,
)

OBS = json.loads((Path(__file__).parents[1] / "data" / "sharding_observations.json").read_text())
NODE = OBS["node"]


def test_names_as_observed() -> None:
    observed = [q["name"] for q in OBS["names"]["queues_names"]]
    ours = shard_names("hbshard.names", [NODE], 12)
    assert sorted(observed) == sorted(ours)
    assert shard_queue_name("images", "rabbit@a", 10) == "sharding: images - rabbit@a - 10"
    assert parse_shard_queue_name("sharding: a - b - c - rabbit@x - 11") == ("a - b - c", "rabbit@x", 11)
    assert parse_shard_queue_name("images") is None
    for row in OBS["names"]["queues_names"]:
        assert row["durable"] is True and row["auto_delete"] is False and row["arguments"] == []
    # the transient exchange's shard: durability follows the exchange
    (transient,) = OBS["names"]["queues_transient"]
    assert transient["durable"] is False
    assert OBS["names"]["bindings_transient"] == [[shard_queue_name("hbshard.transient", NODE, 0), "rk"]]
    assert sorted(OBS["names"]["bindings_names"]) == sorted([q, ""] for q in ours)


def test_config_from_policy() -> None:
    assert ShardingConfig.from_definition({"shards-per-node": 2}) == ShardingConfig(2, "")
    assert ShardingConfig.from_definition({"shards-per-node": 3, "routing-key": "k"}) == ShardingConfig(
        3, "k"
    )
    assert ShardingConfig.from_definition({"max-length": 3}) is None
    assert ShardingConfig.from_definition(None) is None
    assert ShardingConfig.from_definition({"shards-per-node": 1.5}) == ShardingConfig(0, "")
    assert (
        is_sharded({"shards-per-node": 0}) and not is_sharded({"routing-key": "x"}) and not is_sharded(None)
    )


@pytest.mark.parametrize("case", ["spn2", "spn3", "spn12"])
def test_attachment_sequence(case: str) -> None:
    steps = OBS["attach"][case]
    spn = int(case[3:])
    exchange = f"hbshard.att{spn}"
    config = ShardingConfig(spn)
    counts = dict.fromkeys(shard_names(exchange, [NODE], spn), 0)
    for step in steps:
        chosen = rewrite_queue_method("basic.consume", exchange, config, NODE, counts)
        assert chosen == step["queue"], step
        counts[chosen] += 1
        assert counts == step["consumers_per_shard"]


def test_ties_by_name_bytes() -> None:
    counts = dict.fromkeys(shard_names("x", ["rabbit@a"], 12), 0)
    order = []
    for _ in range(12):
        q = select_shard("x", "rabbit@a", ShardingConfig(12), counts)
        assert q is not None
        order.append(parse_shard_queue_name(q)[2])  # type: ignore[index]
        counts[q] += 1
    assert order == [0, 1, 10, 11, 2, 3, 4, 5, 6, 7, 8, 9]


def test_only_local_existing_shards_are_candidates() -> None:
    cfg = ShardingConfig(2)
    counts = {shard_queue_name("x", "rabbit@b", 0): 0, shard_queue_name("x", "rabbit@a", 1): 5}
    assert select_shard("x", "rabbit@a", cfg, counts) == shard_queue_name("x", "rabbit@a", 1)
    assert select_shard("x", "rabbit@c", cfg, counts) is None


def test_pseudo_queue_errors_and_declare() -> None:
    pq = OBS["pseudo_queue"]
    cfg = ShardingConfig(3, "r")
    counts = dict.fromkeys(shard_names("hbshard.pq", [NODE], 3), 0)
    for method, key in [
        ("queue.bind", "bind"),
        ("queue.unbind", "unbind"),
        ("queue.purge", "purge"),
        ("queue.delete", "delete"),
    ]:
        with pytest.raises(ShardingError) as info:
            rewrite_queue_method(method, "hbshard.pq", cfg, NODE, counts)
        assert pq[key]["scope"] == info.value.scope == "connection"
        assert (info.value.reply_code, info.value.reply_text) == (
            pq[key]["reply_code"],
            pq[key]["reply_text"],
        )
        assert info.value.detail == f'Can\'t {key} sharded queue: <<"hbshard.pq">>'
    shard0 = shard_queue_name("hbshard.pq", NODE, 0)
    assert rewrite_queue_method("queue.declare", "hbshard.pq", cfg, NODE, counts) == shard0
    assert pq["declare_passive"]["result"]["queue"] == shard0
    assert (
        pq["declare_passive"]["result"]["message_count"] == pq["messages_per_shard"][shard0] - 1
    )  # 1 unacked
    assert pq["declare_passive"]["result"]["consumer_count"] == 1
    # a non-durable declare hits shard 0's durability check like any other queue
    assert pq["declare_non_durable"]["ok"] is False and pq["declare_non_durable"]["reply_code"] == 406
    # binding a normal queue to the sharded exchange is allowed (only the queue side is intercepted)
    assert pq["bind_to_pseudo_exchange_ok"]["ok"] is True
    # not sharded -> untouched
    assert rewrite_queue_method("queue.bind", "plain", None, NODE, counts) == "plain"


def test_get_goes_to_least_consumers_shard() -> None:
    pq = OBS["pseudo_queue"]
    cfg = ShardingConfig(3, "r")
    counts = dict.fromkeys(shard_names("hbshard.pq", [NODE], 3), 0)
    counts[pq["holder_on"]] += 1
    target = rewrite_queue_method("basic.get", "hbshard.pq", cfg, NODE, counts)
    index = parse_shard_queue_name(target)[2]  # type: ignore[index]
    assert pq["get"]["result"]["body"].startswith(f"{index}-")


def test_no_shards_error() -> None:
    pq = OBS["pseudo_queue"]
    assert pq["zero_shards_queues"] == []
    with pytest.raises(ShardingError) as info:
        rewrite_queue_method("basic.consume", "hbshard.zero", ShardingConfig(0), NODE, {})
    assert (info.value.reply_code, info.value.reply_text) == (
        pq["zero_consume"]["reply_code"],
        pq["zero_consume"]["reply_text"],
    )
    assert pq["zero_get"]["reply_text"] == info.value.reply_text
    assert info.value.detail == 'Error finding sharded queue for: <<"hbshard.zero">>'
    # declare on it is rewritten to shard 0, which the declare then creates
    assert pq["zero_declare"]["result"]["queue"] == shard_queue_name("hbshard.zero", NODE, 0)


def _apply(state: dict[str, list[list[str]]], actions: object, exchange: str) -> None:
    bindings = state.setdefault("bindings", [])
    for q, k in actions.unbind:  # type: ignore[attr-defined]
        if [q, k] in bindings:
            bindings.remove([q, k])
    for q, _durable in actions.declare:  # type: ignore[attr-defined]
        state.setdefault("queues", [])
        if q not in state["queues"]:
            state["queues"].append(q)  # type: ignore[arg-type]
    for q, k in actions.bind:  # type: ignore[attr-defined]
        if [q, k] not in bindings:
            bindings.append([q, k])


def test_policy_change_sequence_as_observed() -> None:
    obs = OBS["policy_changes"]
    x = "hbshard.chg"
    steps = [
        ("spn3_rk_a", ShardingConfig(3, "a")),
        ("spn2_rk_a", ShardingConfig(2, "a")),
        ("spn4_rk_a", ShardingConfig(4, "a")),
        ("spn4_rk_b", ShardingConfig(4, "b")),
        ("spn2_rk_c", ShardingConfig(2, "c")),
        ("policy_cleared", None),
        ("policy_reset_spn2_no_rk", ShardingConfig(2, "")),
    ]
    state: dict[str, list[list[str]]] = {"bindings": [], "queues": []}
    old: ShardingConfig | None = None
    for label, new in steps:
        _apply(state, policy_changed(x, True, old, new, [NODE]), x)
        assert sorted(state["queues"]) == sorted(obs[label]["queues"]), label  # type: ignore[type-var]
        assert sorted(state["bindings"]) == sorted(obs[label]["bindings"]), label
        old = new
    # consume after lowering to 2: only shards 0..1 are candidates
    assert set(obs["consume_after_lowering"].values()) <= set(shard_names(x, [NODE], 2))
    # after the policy is cleared the exchange is no longer sharded: consume on the name is a plain
    # consume on a missing queue, declare creates a real queue of that name
    assert obs["consume_after_clear"]["reply_code"] == 404
    assert obs["declare_after_clear"]["result"]["queue"] == x


def test_node_added_and_cluster() -> None:
    cluster = Cluster(["rabbit@a"])
    cfg = ShardingConfig(2, "k")
    assert cluster.add("rabbit@b") and not cluster.add("rabbit@b")
    actions = node_added("images", True, cfg, "rabbit@b")
    assert actions.declare == [
        ("sharding: images - rabbit@b - 0", True),
        ("sharding: images - rabbit@b - 1", True),
    ]
    assert shard_bindings("images", cluster.nodes, cfg) == [
        ("sharding: images - rabbit@a - 0", "k"),
        ("sharding: images - rabbit@a - 1", "k"),
        ("sharding: images - rabbit@b - 0", "k"),
        ("sharding: images - rabbit@b - 1", "k"),
    ]
    assert cluster.local == "rabbit@a"
    cluster.set_local("rabbit@b")
    with pytest.raises(ClusterError):
        cluster.remove("rabbit@b")
    cluster.remove("rabbit@a")
    assert cluster.nodes == ["rabbit@b"]
    for bad in ["rabbit", "@host", "rabbit@", "rab bit@h", "a@b@c"]:
        with pytest.raises(ClusterError):
            validate_node_name(bad)
    assert validate_node_name("rabbit@localhost") == "rabbit@localhost"
    with pytest.raises(ClusterError):
        Cluster([])


@pytest.mark.parametrize("exchange_type", ["x-modulus-hash", "x-consistent-hash"])
def test_hash_routing_over_shards_matches_live(exchange_type: str) -> None:
    rec = OBS["hash"][exchange_type]
    x = "hbshard.mod" if exchange_type == "x-modulus-hash" else "hbshard.ch"
    cfg = ShardingConfig(rec["policy"]["shards-per-node"], rec["policy"]["routing-key"])
    bindings = shard_bindings(x, [NODE], cfg)
    assert sorted(map(list, bindings)) == sorted(rec["bindings"])
    keys = [str(k) for k in range(rec["keys"])]
    routed = exchanges.predict(exchange_type, bindings, keys)
    ours = "".join(str(parse_shard_queue_name(r[0])[2]) if r else "-" for r in routed)  # type: ignore[index]
    assert "-" not in rec["shard_index"]
    assert ours == rec["shard_index"]
