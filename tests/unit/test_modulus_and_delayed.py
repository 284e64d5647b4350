"""x-modulus-hash ordering (3.x route table vs 4.3 sorted) and x-delayed-message validation."""

from __future__ import annotations

import pytest

import exchanges
from exchanges import AmqpError, Binding, Compat, Destination, Field, FieldTable, SimpleMessage
from exchanges.erlang.terms import phash2
from exchanges.types.delayed import INVALID_TYPE, delay_ms
from exchanges.types.modulus_hash import routing_keys_hash


def modulus(bindings: list[tuple[Destination, str]], compat: Compat) -> exchanges.ExchangeType:
    ex = exchanges.create_exchange("x-modulus-hash", compat=compat)
    for dest, key in bindings:
        ex.add_binding(Binding(dest, key))
    return ex


BINDINGS = [
    (Destination.queue("b"), "z"),
    (Destination.queue("a"), "z"),
    (Destination.exchange("c"), "z"),
    (Destination.queue("d"), ""),
]


def test_index_is_phash2_of_the_routing_key_list() -> None:
    assert routing_keys_hash(["abc"]) == phash2([b"abc"], 1 << 27)
    assert routing_keys_hash(["a", "cc1", "cc2"]) == phash2([b"a", b"cc1", b"cc2"], 1 << 27)


@pytest.mark.parametrize(
    ("compat", "order"),
    [
        (Compat.for_version("3.10.8"), ["d", "c", "a", "b"]),  # key bytes, then exchange < queue, name
        (Compat.for_version("4.3.0"), ["c", "a", "b", "d"]),  # (kind, name)
    ],
)
def test_destination_order_per_version(compat: Compat, order: list[str]) -> None:
    ex = modulus(BINDINGS, compat)
    for key in [str(i) for i in range(200)]:
        expected = order[routing_keys_hash([key]) % 4]
        assert [d.name for d in ex.route(SimpleMessage([key]))] == [expected]


def test_binding_a_destination_twice_doubles_its_share() -> None:
    ex = modulus(
        [(Destination.queue("a"), "1"), (Destination.queue("a"), "2"), (Destination.queue("b"), "3")],
        Compat(),
    )
    hits = [ex.route(SimpleMessage([str(i)]))[0].name for i in range(3000)]
    assert 1800 < hits.count("a") < 2200


def test_compat_for_version() -> None:
    assert Compat.for_version("3.10.8") == Compat()
    assert Compat.for_version("3.13.3").unknown_type_code == 406
    assert Compat.for_version("3.13.0").header_hash == "raw"


@pytest.mark.parametrize(
    "arguments",
    [None, {"x-delayed-type": "nope"}, {"x-delayed-type": 5}, {"x-delayed-type": "x-delayed-message"}],
)
def test_delayed_type_is_required_and_must_exist(arguments: dict | None) -> None:
    with pytest.raises(AmqpError) as info:
        exchanges.create_exchange("x-delayed-message", arguments)
    assert info.value.reply_code == 406
    assert info.value.reply_text == f"PRECONDITION_FAILED - {INVALID_TYPE}"


def test_delayed_routes_as_its_type() -> None:
    bindings = [("q1", "1"), ("q2", "1"), ("q3", "2"), ("q4", "2")]
    keys = [str(i) for i in range(500)]
    delayed = exchanges.predict("x-delayed-message", bindings, keys, {"x-delayed-type": "x-consistent-hash"})
    direct = exchanges.predict("x-consistent-hash", bindings, keys)
    assert delayed == direct
    with pytest.raises(AmqpError):  # the delayed type's binding rules apply
        exchanges.predict("x-delayed-message", [("q", "abc")], [], {"x-delayed-type": "x-consistent-hash"})


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, 0),
        (Field("signedint", 1500), 1500),
        (Field("long", -5), 0),
        (Field("signedint", 0), 0),
        (Field("long", 2**32), 0),
        (Field("longstr", b"100"), 0),
        (Field("byte", 3), 3),
    ],
)
def test_delay_header(header: Field | None, expected: int) -> None:
    table = FieldTable([("x-delay", header)]) if header is not None else FieldTable()
    assert delay_ms(SimpleMessage(["k"], table)) == expected
