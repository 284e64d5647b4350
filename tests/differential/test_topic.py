"""The topic exchange against a brute-force matcher (hypothesis) and against a live RabbitMQ 3.10.8.

The oracle below is the definition written as plainly as possible (recursion over words, "#" tries
every split); `TopicExchange` must agree with it on everything, including empty words, the
zero-word empty key, literal "*"/"#" words in routing keys and binding churn. The live test then
checks that the definition is RabbitMQ's.
"""

from __future__ import annotations

import itertools
import random
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cache

import pika
import pika.exceptions
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqpwire.fields import FieldTable
from exchanges.base import Binding, Destination, SimpleMessage
from exchanges.registry import get_type
from exchanges.types import topic
from exchanges.types.topic import TopicExchange, split_topic_key

# --- oracle ---------------------------------------------------------------------------------------


def oracle_matches(pattern: str, key: str) -> bool:
    """Does binding key `pattern` match routing key `key`? Straight from the definition."""
    words = split_topic_key(pattern)
    key_words = split_topic_key(key)

    @cache
    def match(i: int, j: int) -> bool:  # pattern words from i on against key words from j on
        if i == len(words):
            return j == len(key_words)
        if words[i] == "#":
            return any(match(i + 1, k) for k in range(j, len(key_words) + 1))
        if j == len(key_words):
            return False
        return words[i] in ("*", key_words[j]) and match(i + 1, j + 1)

    return match(0, 0)


def oracle_route(bindings: Sequence[Binding], keys: Sequence[str]) -> set[Destination]:
    return {b.destination for b in bindings for key in keys if oracle_matches(b.key, key)}


def routed(exchange: TopicExchange, *keys: str) -> list[Destination]:
    return exchange.route(SimpleMessage(list(keys)))


def exchange_with(bindings: Sequence[Binding]) -> TopicExchange:
    exchange = TopicExchange()
    for binding in bindings:
        exchange.add_binding(binding)
    return exchange


def q(name: str) -> Destination:
    return Destination.queue(name)


# --- generators (also used for the benchmark) ------------------------------------------------------

BENCH_VOCABULARY = [f"w{i}" for i in range(30)]


def make_topic_bindings(n: int, seed: int, vocabulary: Sequence[str] = BENCH_VOCABULARY) -> list[Binding]:
    """`n` bindings with random 3-5 word keys: each word is "*" with p=0.1, "#" with p=0.05, else
    one of `vocabulary`; destinations are 1,000 queues. This is the shape the 20 µs budget is for."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = []
        for _ in range(rng.randint(3, 5)):
            r = rng.random()
            words.append("*" if r < 0.1 else "#" if r < 0.15 else rng.choice(vocabulary))
        out.append(Binding(q(f"q{i % 1000}"), ".".join(words)))
    return out


def make_routing_keys(n: int, seed: int, vocabulary: Sequence[str] = BENCH_VOCABULARY) -> list[str]:
    rng = random.Random(seed)
    return [".".join(rng.choice(vocabulary) for _ in range(rng.randint(3, 5))) for _ in range(n)]


# --- unit tests ---------------------------------------------------------------------------------------

# What RabbitMQ 3.10.8 routed for these bindings/keys (observed live, one queue per pattern).
OBSERVED_LIVE = {
    "": {"", "#", "#.#"},
    ".": {"#", "#.#", "*.*", "*.#", "."},
    "a": {"#", "#.#", "*", "*.#", "a.#"},
    "a..b": {"#", "#.#", "*.#", "a.#", "a..b", "a.*.b"},
    "*": {"#", "#.#", "*", "*.#"},
}
OBSERVED_PATTERNS = ["#", "*", "", "#.#", "*.#", "a.#", ".", "*.*", "a..b", "a.*.b"]


@pytest.mark.parametrize("key", sorted(OBSERVED_LIVE))
def test_edge_keys_route_as_rabbitmq_did(key: str) -> None:
    exchange = exchange_with([Binding(q(p), p) for p in OBSERVED_PATTERNS])
    assert {d.name for d in routed(exchange, key)} == OBSERVED_LIVE[key]
    assert {d.name for d in routed(exchange, key)} == {p for p in OBSERVED_PATTERNS if oracle_matches(p, key)}


def test_empty_key_has_no_words_but_dot_has_two() -> None:
    assert split_topic_key("") == []
    assert split_topic_key(".") == ["", ""]
    assert split_topic_key("a..b") == ["a", "", "b"]


def test_registered_as_topic() -> None:
    assert get_type("topic") is TopicExchange


def test_every_routing_key_counts_and_destinations_are_unique_in_first_seen_order() -> None:
    exchange = exchange_with([Binding(q("x"), "a.*"), Binding(q("y"), "#.b"), Binding(q("z"), "c")])
    assert routed(exchange, "a.b", "c", "a.c") == [q("x"), q("y"), q("z")]
    assert routed(exchange, "c", "a.b") == [q("z"), q("x"), q("y")]


def test_same_key_and_destination_with_other_arguments_is_a_separate_binding() -> None:
    """Observed live: after unbinding one of two such bindings, messages still arrive."""
    plain = Binding(q("x"), "a.*")
    with_args = Binding(q("x"), "a.*", FieldTable.from_python({"foo": 1}))
    exchange = exchange_with([plain, with_args])
    exchange.remove_bindings([with_args])
    assert routed(exchange, "a.b") == [q("x")]
    exchange.remove_bindings([plain])
    assert routed(exchange, "a.b") == []


@pytest.mark.parametrize("key", ["a", "a.*", "a.#", "#.a.#", "*.#.*"])
def test_churn_leaves_no_state_behind(key: str) -> None:
    exchange = TopicExchange()
    bindings = [Binding(q(f"q{i}"), f"{key}.{i % 3}") for i in range(10)] + [Binding(q("z"), key)]
    for binding in bindings:
        exchange.add_binding(binding)
    routed(exchange, "a.b.c")  # builds an expanded trie for 3 words when "#" is involved
    exchange.remove_bindings(bindings)
    assert exchange.bindings == []
    assert exchange._exact == {} and exchange._fixed == {} and exchange._hash_bindings == {}
    assert exchange._hashed.is_empty()
    assert all(e.trie.is_empty() and e.size == 0 for e in exchange._expanded.values())


def test_removing_an_unknown_binding_is_ignored() -> None:
    exchange = exchange_with([Binding(q("x"), "a.#")])
    exchange.remove_bindings([Binding(q("x"), "b.#"), Binding(q("y"), "a.#")])
    assert routed(exchange, "a") == [q("x")]


def test_bindings_property_reflects_changes_and_can_be_assigned() -> None:
    bindings = make_topic_bindings(50, seed=3)
    exchange = exchange_with(bindings)
    assert exchange.bindings == bindings
    exchange.remove_bindings(bindings[:10])
    assert exchange.bindings == bindings[10:]
    other = TopicExchange()
    other.bindings = bindings[10:]
    for key in make_routing_keys(200, seed=4):
        assert set(routed(other, key)) == set(routed(exchange, key)) == oracle_route(bindings[10:], [key])


def test_long_keys_and_many_hashes_use_the_nfa_and_stay_fast() -> None:
    """RabbitMQ's depth-first walk is exponential here; the NFA visits each (node, word) once."""
    pattern = ".".join(["#", "a"] * 5 + ["#"])
    bindings = [Binding(q("many"), pattern), Binding(q("tail"), "#.b"), Binding(q("star"), "*.#.a")]
    exchange = exchange_with(bindings)
    key = ".".join(["a"] * 150)
    started = time.perf_counter()
    result = routed(exchange, key, key + ".b")
    assert time.perf_counter() - started < 0.5
    assert set(result) == oracle_route(bindings, [key, key + ".b"])
    assert len(split_topic_key(key)) not in exchange._expanded  # too many spare words to expand


def test_expansion_is_skipped_for_heavy_patterns_and_kept_up_to_date() -> None:
    heavy = Binding(q("heavy"), "#.#.#.#")
    light = [Binding(q("l1"), "a.#"), Binding(q("l2"), "#.c.*")]
    exchange = exchange_with(light)
    keys = ["a.b.c.d.e.f.g.h.i", "a.b.c.d", "x.c.y"]
    for key in keys:
        assert set(routed(exchange, key)) == oracle_route(light, [key])
    assert {4, 3} <= set(exchange._expanded)
    exchange.add_binding(heavy)  # 220 ways to share 9 words: length 9 must fall back to the NFA
    assert 9 not in exchange._expanded
    for key in keys:
        assert set(routed(exchange, key)) == oracle_route([*light, heavy], [key])
    exchange.remove_bindings([heavy])
    for key in keys:
        assert set(routed(exchange, key)) == oracle_route(light, [key])
    assert 9 in exchange._expanded


@pytest.mark.parametrize("pattern", ["#", "#.#", "a.#.b", "#.*.#", "*.#.#.c", "a.b"])
def test_expansion_is_equivalent_at_its_length(pattern: str) -> None:
    words = split_topic_key(pattern)
    for length in range(5):
        expanded = [".".join(p) for p in topic.expand(words, length)]
        assert len(expanded) <= topic.count_expansions(words, length)
        assert all(len(split_topic_key(p)) == length and "#" not in split_topic_key(p) for p in expanded)
        for key_words in itertools.product(["a", "b", "c"], repeat=length):
            key = ".".join(key_words)
            assert oracle_matches(pattern, key) == any(oracle_matches(p, key) for p in expanded), key


def test_benchmark_shape_agrees_with_the_oracle() -> None:
    bindings = make_topic_bindings(2_000, seed=1)
    exchange = exchange_with(bindings)
    for key in make_routing_keys(150, seed=2):
        assert set(routed(exchange, key)) == oracle_route(bindings, [key])


# --- property tests ---------------------------------------------------------------------------------

WORDS = st.sampled_from(["a", "b", "", "ü", "*", "#"])
KEY_WORDS = st.sampled_from(["a", "b", "", "ü", "*", "#", "c"])
PATTERNS = st.lists(WORDS, max_size=5).map(".".join)
KEYS = st.lists(KEY_WORDS, max_size=7).map(".".join)


@settings(max_examples=300, deadline=None)
@given(
    patterns=st.lists(st.tuples(PATTERNS, st.sampled_from("pqrs")), max_size=12),
    keys=st.lists(KEYS, min_size=1, max_size=3),
)
def test_routes_like_the_oracle(patterns: list[tuple[str, str]], keys: list[str]) -> None:
    bindings = list(dict.fromkeys(Binding(q(dest), pattern) for pattern, dest in patterns))
    exchange = exchange_with(bindings)
    result = routed(exchange, *keys)
    assert len(result) == len(set(result))
    assert set(result) == oracle_route(bindings, keys)


@settings(max_examples=200, deadline=None)
@given(
    patterns=st.lists(st.tuples(PATTERNS, st.sampled_from("pqrs")), min_size=1, max_size=12, unique=True),
    removed=st.sets(st.integers(0, 11)),
    keys=st.lists(KEYS, min_size=4, max_size=8),
)
def test_routes_like_the_oracle_after_churn(
    patterns: list[tuple[str, str]], removed: set[int], keys: list[str]
) -> None:
    bindings = [Binding(q(dest), pattern) for pattern, dest in patterns]
    exchange = exchange_with(bindings)
    for key in keys[:2]:  # materialise expanded tries before the churn, so churn must update them
        routed(exchange, key)
    gone = [b for i, b in enumerate(bindings) if i in removed]
    exchange.remove_bindings(gone)
    kept = [b for b in bindings if b not in gone]
    exchange.add_binding(Binding(q("late"), "#.a"))
    kept.append(Binding(q("late"), "#.a"))
    for key in keys:
        assert set(routed(exchange, key)) == oracle_route(kept, [key])


# --- live differential test against RabbitMQ 3.10.8 ---------------------------------------------------


@contextmanager
def live_topic_exchange(
    url: str, bindings: Sequence[Binding]
) -> Iterator[tuple[pika.BlockingConnection, str]]:
    """A topic exchange on the live broker with `bindings` (queue names are made unique and exclusive
    so concurrent runs do not collide); the exchange is deleted afterwards, the queues die with the
    connection."""
    connection = pika.BlockingConnection(pika.URLParameters(url))
    suffix = uuid.uuid4().hex[:10]
    exchange = f"hb.topic.{suffix}"
    try:
        channel = connection.channel()
        channel.exchange_declare(exchange, "topic")
        for name in sorted({b.destination.name for b in bindings}):
            channel.queue_declare(f"{exchange}.{name}", exclusive=True)
        for binding in bindings:
            channel.queue_bind(f"{exchange}.{binding.destination.name}", exchange, binding.key)
        channel.close()
        yield connection, exchange
    finally:
        if connection.is_open:
            with_channel = connection.channel()
            with_channel.exchange_delete(exchange)
            connection.close()


def live_route(url: str, bindings: Sequence[Binding], messages: Sequence[Sequence[str]]) -> list[set[str]]:
    """Queues (by our name) that received each message; a message is [routing key, *CC keys]."""
    queues = sorted({b.destination.name for b in bindings})
    with live_topic_exchange(url, bindings) as (connection, exchange):
        channel = connection.channel()
        channel.confirm_delivery()  # once a publish is confirmed its copies are enqueued
        for index, keys in enumerate(messages):
            headers = {"CC": list(keys[1:])} if len(keys) > 1 else None
            props = pika.BasicProperties(message_id=str(index), headers=headers)
            channel.basic_publish(exchange, keys[0], b"", props)
        received: list[set[str]] = [set() for _ in messages]
        for name in queues:
            while True:
                method, props, _ = channel.basic_get(f"{exchange}.{name}", auto_ack=True)
                if method is None:
                    break
                received[int(props.message_id)].add(name)
        channel.close()
    return received


def random_topology(rng: random.Random) -> tuple[list[Binding], list[list[str]]]:
    words = ["a", "b", "", "ü", "日本", "x-y", "a#", "*b"]
    pattern_words = [*words, "*", "#"]

    def pattern() -> str:
        return ".".join(rng.choice(pattern_words) for _ in range(rng.randint(0, 4)))

    bindings = {Binding(q(f"q{rng.randrange(12)}"), pattern()) for _ in range(60)}
    bindings |= {Binding(q("hash2"), "#.#"), Binding(q("empty"), ""), Binding(q("star"), "*")}

    def key() -> str:
        return ".".join(rng.choice([*words, "*", "#"]) for _ in range(rng.randint(0, 5)))

    messages = [[key()] for _ in range(140)] + [[key(), key(), key()] for _ in range(10)]
    return sorted(bindings, key=lambda b: (b.destination.name, b.key)), messages


@pytest.mark.live
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_routes_like_live_rabbitmq(rabbitmq_url: str, seed: int) -> None:
    bindings, messages = random_topology(random.Random(seed))
    expected = live_route(rabbitmq_url, bindings, messages)
    exchange = exchange_with(bindings)
    for keys, from_rabbit in zip(messages, expected, strict=True):
        assert {d.name for d in routed(exchange, *keys)} == from_rabbit, keys
        assert {d.name for d in oracle_route(bindings, keys)} == from_rabbit, keys
