"""Binding indexes: the O(1) add/remove state routes exactly as the list-based state it replaced.

The exchange types used to keep every binding in a list and rebuild their lookup tables from it on
each unbind (quadratic when a queue with thousands of bindings goes away). The types now keep
per-destination and per-key maps. Hypothesis drives random bind / unbind / delete-destination
sequences through the new types and through the old list-based implementations kept below as the
reference, and compares the routed destinations *in order* for direct, fanout, x-modulus-hash
(the route-table position decides the destination) and x-consistent-hash (the bucket ring itself:
bucket order, "first binding wins", and "removing any binding of a destination drops all its
buckets and shifts later ones down"). Topic and headers kept their indexes; their results are
checked against a brute-force evaluation of every live binding, as RabbitMQ does it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from amqpwire.fields import FieldTable
from broker.entities.exchange import Exchange
from exchanges import create_exchange
from exchanges.base import Binding, Destination, ExchangeType, Message, SimpleMessage
from exchanges.compat import Compat
from exchanges.erlang.terms import phash2_binary
from exchanges.hashing.jump_table import RingLookup
from exchanges.hashing.native import phash2_single_key_list
from exchanges.hashing.terms import key_bytes
from exchanges.route_order import route_table_order
from exchanges.types.modulus_hash import routing_keys_hash

# --- the list-based reference (the implementations before the indexes) ---------------------------


class OldDirect:
    def __init__(self) -> None:
        self.bindings: list[Binding] = []
        self._by_key: dict[str, list[Destination]] = {}

    def add_binding(self, binding: Binding) -> None:
        self.bindings.append(binding)
        self._by_key.setdefault(binding.key, []).append(binding.destination)

    def remove_bindings(self, bindings: Sequence[Binding]) -> None:
        gone = set(bindings)
        self.bindings = [b for b in self.bindings if b not in gone]
        self._by_key = {}
        for b in self.bindings:
            self._by_key.setdefault(b.key, []).append(b.destination)

    def route(self, message: Message) -> list[Destination]:
        out: dict[Destination, None] = {}
        for key in message.routing_keys:
            for dest in self._by_key.get(key, ()):
                out[dest] = None
        return list(out)


class OldFanout:
    def __init__(self) -> None:
        self.bindings: list[Binding] = []

    def add_binding(self, binding: Binding) -> None:
        self.bindings.append(binding)

    def remove_bindings(self, bindings: Sequence[Binding]) -> None:
        gone = set(bindings)
        self.bindings = [b for b in self.bindings if b not in gone]

    def route(self, message: Message) -> list[Destination]:
        return list(dict.fromkeys(b.destination for b in self.bindings))


class OldConsistentHash(OldFanout):
    def __init__(self) -> None:
        super().__init__()
        self.ring: list[Destination] = []

    def add_binding(self, binding: Binding) -> None:
        super().add_binding(binding)
        if binding.destination not in self.ring:
            self.ring.extend([binding.destination] * int(binding.key))

    def remove_bindings(self, bindings: Sequence[Binding]) -> None:
        super().remove_bindings(bindings)
        gone = {b.destination for b in bindings}
        self.ring = [d for d in self.ring if d not in gone]

    def route(self, message: Message) -> list[Destination]:
        if not self.ring:
            return []
        bucket = RingLookup(len(self.ring)).bucket(phash2_binary(key_bytes(message.routing_keys[0])))
        return [self.ring[bucket]]


class OldModulusHash(OldFanout):
    def __init__(self, compat: Compat) -> None:
        super().__init__()
        self.compat = compat

    def destinations(self) -> list[Destination]:
        if self.compat.modulus_order == "sorted":
            return sorted(b.destination for b in self.bindings)
        return [b.destination for b in sorted(self.bindings, key=route_table_order)]

    def route(self, message: Message) -> list[Destination]:
        destinations = self.destinations()
        if not destinations:
            return []
        keys = message.routing_keys
        index = phash2_single_key_list(key_bytes(keys[0])) if len(keys) == 1 else routing_keys_hash(keys)
        return [destinations[index % len(destinations)]]


# --- random histories ------------------------------------------------------------------------------

DESTINATIONS = [Destination.queue(n) for n in ("a", "b", "c", "d", "e")] + [
    Destination.exchange(n) for n in ("a", "x")
]
ARGUMENTS = [FieldTable(), FieldTable.from_python({"w": 1}), FieldTable.from_python({"w": "two"})]
WORD_KEYS = ["", "k", "k.a", "a.k", "#", "*", "k.*", "*.a", "k.#", "#.a", "a.#.k", "k.k.k"]
WEIGHTS = ["1", "2", "3", "5"]
ROUTING_KEYS = ["", "k", "a", "k.a", "a.k", "k.k.k", "a.b.k", "k.a.a", "zz", "1", "2", "3"]

op = st.one_of(
    st.tuples(st.just("bind"), st.integers(0, len(DESTINATIONS) - 1), st.integers(0, 99), st.integers(0, 2)),
    st.tuples(st.just("unbind"), st.integers(0, 999), st.just(0), st.just(0)),
    st.tuples(st.just("delete"), st.integers(0, len(DESTINATIONS) - 1), st.just(0), st.just(0)),
)
histories = st.lists(op, max_size=60)


#: What every step routes: each routing key alone, then several as CC keys.
KEY_MESSAGES = [SimpleMessage([key]) for key in ROUTING_KEYS] + [SimpleMessage(ROUTING_KEYS[1:5])]


def replay(
    history: list[tuple[str, int, int, int]], keys: list[str], new: ExchangeType, old: Any
) -> list[Binding]:
    """`replay_bindings` of bindings with the routing keys `keys` and the ARGUMENTS."""
    return replay_bindings(
        history,
        lambda a, b, c: Binding(DESTINATIONS[a], keys[b % len(keys)], ARGUMENTS[c]),
        KEY_MESSAGES,
        new,
        old,
    )


def replay_bindings(
    history: list[tuple[str, int, int, int]],
    make_binding: Callable[[int, int, int], Binding],
    messages: list[Message],
    new: ExchangeType,
    old: Any,
) -> list[Binding]:
    """Apply a history as the vhost does (bind only what is absent, unbind only what is present; a
    deleted destination loses all its bindings), checking after every step that both route each
    of `messages` alike."""
    live: list[Binding] = []
    for step, (kind, a, b, c) in enumerate(history):
        if kind == "bind":
            binding = make_binding(a, b, c)
            if binding not in live:
                live.append(binding)
                new.add_binding(binding)
                old.add_binding(binding)
        elif kind == "unbind" and live:
            binding = live.pop(a % len(live))
            new.remove_bindings([binding])
            old.remove_bindings([binding])
        elif kind == "delete":
            destination = DESTINATIONS[a]
            gone = [x for x in live if x.destination == destination]
            live = [x for x in live if x.destination != destination]
            assert new.remove_destination(destination) == gone, f"step {step}"
            for binding in gone:  # the vhost used to remove them one by one
                old.remove_bindings([binding])
        assert new.bindings == live, f"step {step}: bindings out of order"
        for message in messages:
            assert new.route(message) == old.route(message), f"step {step}, keys {message.routing_keys!r}"
    return live


@settings(max_examples=300, deadline=None)
@given(histories)
def test_direct_routes_in_the_old_order(history: list[tuple[str, int, int, int]]) -> None:
    replay(history, ["k", "a", "zz", "k.a"], create_exchange("direct"), OldDirect())


@settings(max_examples=300, deadline=None)
@given(histories)
def test_fanout_routes_in_the_old_order(history: list[tuple[str, int, int, int]]) -> None:
    replay(history, ["", "k"], create_exchange("fanout"), OldFanout())


@settings(max_examples=300, deadline=None)
@given(histories)
def test_consistent_hash_ring_is_the_old_ring(history: list[tuple[str, int, int, int]]) -> None:
    new = create_exchange("x-consistent-hash")
    old = OldConsistentHash()
    replay(history, WEIGHTS, new, old)
    assert new.ring == old.ring  # type: ignore[attr-defined]


@settings(max_examples=200, deadline=None)
@given(histories, st.sampled_from(["3.10.8", "4.3.0"]))
def test_modulus_hash_keeps_the_route_table_order(
    history: list[tuple[str, int, int, int]], version: str
) -> None:
    compat = Compat.for_version(version)
    replay(history, WORD_KEYS, create_exchange("x-modulus-hash", compat=compat), OldModulusHash(compat))


@settings(max_examples=150, deadline=None)
@given(histories)
def test_delayed_wrapper_follows_its_type(history: list[tuple[str, int, int, int]]) -> None:
    replay(
        history,
        ["k", "a", "zz"],
        create_exchange("x-delayed-message", {"x-delayed-type": "direct"}),
        OldDirect(),
    )


# --- topic and headers: against every live binding evaluated alone ----------------------------------


class BruteForce:
    """RabbitMQ evaluates every binding for every message: a one-binding exchange per binding."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name
        self.single: dict[Binding, ExchangeType] = {}

    def add_binding(self, binding: Binding) -> None:
        exchange = create_exchange(self.type_name)
        exchange.add_binding(binding)
        self.single[binding] = exchange

    def remove_bindings(self, bindings: Sequence[Binding]) -> None:
        for binding in bindings:
            self.single.pop(binding, None)

    def route(self, message: Message) -> list[Destination]:
        hit = {b.destination for b, x in self.single.items() if x.route(message)}
        return sorted(hit)


class Sorted:
    """Compare as sets (these types never promised an order beyond no duplicates)."""

    def __init__(self, exchange: ExchangeType) -> None:
        self.exchange = exchange

    def __getattr__(self, name: str) -> Any:
        return getattr(self.exchange, name)

    def route(self, message: Message) -> list[Destination]:
        routed = self.exchange.route(message)
        assert len(routed) == len(set(routed)), "duplicate destination"
        return sorted(routed)


@settings(max_examples=200, deadline=None)
@given(histories)
def test_topic_matches_every_live_binding(history: list[tuple[str, int, int, int]]) -> None:
    replay(history, WORD_KEYS, Sorted(create_exchange("topic")), BruteForce("topic"))  # type: ignore[arg-type]


HEADER_ARGS = [
    FieldTable.from_python({"x-match": "any", "h": "k"}),
    FieldTable.from_python({"h": "k"}),
    FieldTable.from_python({"x-match": "all", "h": "k", "g": 1}),
    FieldTable(),
]


@settings(max_examples=200, deadline=None)
@given(histories)
def test_headers_matches_every_live_binding(history: list[tuple[str, int, int, int]]) -> None:
    messages = [
        SimpleMessage([""], FieldTable.from_python(h)) for h in ({"h": "k"}, {"h": "k", "g": 1}, {"g": 1}, {})
    ] + [SimpleMessage([""])]
    replay_bindings(
        history,
        lambda a, b, _c: Binding(DESTINATIONS[a], "", HEADER_ARGS[b % len(HEADER_ARGS)]),
        messages,
        Sorted(create_exchange("headers")),  # type: ignore[arg-type]
        BruteForce("headers"),
    )


def test_exchange_entity_keeps_its_binding_set_with_the_type() -> None:
    x = Exchange(
        "x",
        "direct",
        create_exchange("direct"),
        durable=False,
        auto_delete=False,
        internal=False,
        arguments=FieldTable(),
    )
    a, b = Destination.queue("a"), Destination.queue("b")
    made = [Binding(a, "k1"), Binding(b, "k1"), Binding(a, "k2")]
    assert [x.add_binding(binding) for binding in [*made, made[0]]] == [True, True, True, False]
    assert x.remove_destination(a) == [made[0], made[2]]
    assert x.binding_set == {made[1]} and x.bindings_in_order() == [made[1]]
    assert x.remove_binding(made[1]) and not x.remove_binding(made[1])
    assert x.binding_set == set() and x.impl is not None and x.impl.bindings == []
