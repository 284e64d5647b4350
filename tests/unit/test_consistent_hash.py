"""x-consistent-hash state rules (first binding wins, unbind renumbering, weights, hash inputs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import exchanges
from exchanges import AmqpError, Binding, Destination, Field, FieldTable, SimpleMessage
from exchanges.compat import WEIGHT_CAP, Compat
from exchanges.erlang.rand import jump_consistent_hash
from exchanges.erlang.terms import UNDEFINED, phash2
from exchanges.types.consistent_hash import ConsistentHashExchange

OBSERVATIONS = json.loads((Path(__file__).parents[1] / "data" / "rabbitmq_observations.json").read_text())


def q(name: str) -> Destination:
    return Destination.queue(name)


def bind(ex: ConsistentHashExchange, name: str, key: str) -> Binding:
    b = Binding(q(name), key)
    ex.validate_binding(b)
    ex.add_binding(b)
    return b


def test_buckets_follow_binding_order_and_weights() -> None:
    ex = ConsistentHashExchange()
    for name, key in [("a", "1"), ("b", "3"), ("c", "+2")]:
        bind(ex, name, key)
    assert [d.name for d in ex.ring] == ["a", "b", "b", "b", "c", "c"]


def test_first_binding_of_a_destination_wins() -> None:
    ex = ConsistentHashExchange()
    bind(ex, "a", "1")
    bind(ex, "a", "5")
    bind(ex, "b", "1")
    assert [d.name for d in ex.ring] == ["a", "b"]


def test_unbind_removes_the_destinations_buckets_and_shifts_later_ones_down() -> None:
    ex = ConsistentHashExchange()
    bind(ex, "a", "2")
    second = bind(ex, "b", "2")
    bind(ex, "c", "1")
    ex.remove_bindings([second])
    assert [d.name for d in ex.ring] == ["a", "a", "c"]


def test_unbinding_an_ignored_duplicate_removes_the_destination_as_rabbitmq_does() -> None:
    """Queue `a` bound with "2" then "1": removing the "1" binding drops both of a's buckets
    (the shift is by the buckets removed), though a's "2" binding still exists."""
    ex = ConsistentHashExchange()
    bind(ex, "a", "2")
    ignored = bind(ex, "a", "1")
    bind(ex, "b", "1")
    ex.remove_bindings([ignored])
    assert [d.name for d in ex.ring] == ["b"]
    assert ex.route(SimpleMessage(["k"])) == [q("b")]
    bind(ex, "a", "3")
    assert [d.name for d in ex.ring] == ["b", "a", "a", "a"]


@pytest.mark.parametrize(
    "observation",
    [o for o in OBSERVATIONS["binding_keys"] if o["outcome"] in ("ok", "channel_close")],
    ids=lambda o: repr(o["binding_key"])[:30],
)
def test_binding_key_validation_matches_rabbitmq(observation: dict[str, Any]) -> None:
    ex = ConsistentHashExchange()
    binding = Binding(q("x"), observation["binding_key"])
    if observation["outcome"] == "ok":
        ex.validate_binding(binding)
        return
    with pytest.raises(AmqpError) as info:
        ex.validate_binding(binding)
    assert info.value.reply_code == observation["reply_code"]
    wire = info.value.reply_text.encode("utf-8", "surrogateescape")
    assert wire.hex() == observation["reply_text_hex"]


def test_weight_cap() -> None:
    ex = ConsistentHashExchange()
    ex.validate_binding(Binding(q("x"), str(WEIGHT_CAP)))
    with pytest.raises(AmqpError) as info:
        ex.validate_binding(Binding(q("x"), str(WEIGHT_CAP + 1)))
    assert info.value.reply_code == 406
    assert info.value.reply_text == f"PRECONDITION_FAILED - The binding key must not exceed {WEIGHT_CAP}"


@pytest.mark.parametrize(
    "observation",
    [o for o in OBSERVATIONS["exchange_arguments"] if o["outcome"] != "ok"],
    ids=lambda o: json.dumps(o["arguments"]),
)
def test_declare_argument_errors_match_rabbitmq(observation: dict[str, Any]) -> None:
    with pytest.raises(AmqpError) as info:
        exchanges.create_exchange("x-consistent-hash", observation["arguments"])
    error = info.value
    assert error.reply_code == observation["reply_code"]
    assert error.reply_text == observation["reply_text"]
    assert error.hard == (observation["outcome"] == "connection_close")


def test_unknown_exchange_type_is_a_connection_error() -> None:
    observed = OBSERVATIONS["unknown_exchange_type"]
    with pytest.raises(AmqpError) as info:
        exchanges.create_exchange(observed.get("exchange_type", "x-no-such-type"))
    assert info.value.reply_code == observed["reply_code"] == 503
    assert info.value.reply_text == observed["reply_text"]
    assert info.value.hard


def test_missing_header_or_property_hashes_undefined() -> None:
    expected_bucket = jump_consistent_hash(phash2(UNDEFINED), 4)
    names = ["q0", "q1", "q2", "q3"]
    bindings = [(n, "1") for n in names]
    for args, kwargs in [
        ({"hash-header": "h"}, {}),
        ({"hash-header": "h"}, {"headers": {"other": "x"}}),
        ({"hash-property": "message_id"}, {"properties": {}}),
        ({"hash-property": "timestamp"}, {"properties": {"message_id": "m"}}),
    ]:
        routed = exchanges.predict("x-consistent-hash", bindings, ["a", "b", "c"], args, **kwargs)
        assert routed == [[names[expected_bucket]]] * 3


def test_header_hash_depends_on_the_wire_type_on_3_10_but_not_on_3_13() -> None:
    bindings = [(f"q{i}", "1") for i in range(16)]
    types = ["byte", "short", "signedint", "long"]
    typed = [
        exchanges.predict(
            "x-consistent-hash", bindings, ["rk"], {"hash-header": "h"}, headers={"h": Field(t, 7)}
        )[0][0]
        for t in types
    ]
    raw_compat = Compat.for_version("3.13.0")
    raw = [
        exchanges.predict(
            "x-consistent-hash",
            bindings,
            ["rk"],
            {"hash-header": "h"},
            headers={"h": Field(t, 7)},
            compat=raw_compat,
        )[0][0]
        for t in types
    ]
    assert len(set(raw)) == 1
    assert raw[0] == f"q{jump_consistent_hash(7, 16)}"  # 3.13 seeds integers directly
    assert len(set(typed)) > 1


def test_routing_key_only_first_of_cc_list_is_hashed() -> None:
    ex = exchanges.create_exchange("x-consistent-hash")
    for i in range(8):
        ex.add_binding(Binding(q(f"q{i}"), "1"))
    alone = ex.route(SimpleMessage(["key-1"]))
    with_cc = ex.route(SimpleMessage(["key-1", "cc-a", "cc-b"]))
    assert alone == with_cc and len(alone) == 1


def test_state_summary_lists_the_ring() -> None:
    ex = exchanges.create_exchange("x-consistent-hash", {"hash-property": "message_id"})
    ex.add_binding(Binding(q("a"), "2"))
    summary = ex.state_summary
    assert summary["segments"] == [[0, 2, "queue", "a"]]
    assert summary["ring_size"] == 2
    assert summary["hash_on"] == "property:message_id"


def test_field_table_round_trip() -> None:
    table = FieldTable.from_python({"s": "x", "i": 5, "l": 2**40, "b": True, "t": {"n": [1, "a"]}})
    assert FieldTable.decode(table.encode()) == table
