"""Property tests (hypothesis) for the consistent-hash exchange's promises."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

import exchanges

KEYS = [f"key-{i}" for i in range(4000)]


def routed(weights: list[int], keys: list[str]) -> list[str]:
    bindings = [(f"q{i}", str(w)) for i, w in enumerate(weights)]
    return [dests[0] for dests in exchanges.predict("x-consistent-hash", bindings, keys)]


@settings(max_examples=15, deadline=None)
@given(st.integers(min_value=1, max_value=12))
def test_adding_a_queue_moves_about_one_share_and_only_onto_it(n: int) -> None:
    before = routed([1] * n, KEYS)
    after = routed([1] * (n + 1), KEYS)
    moved = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert all(b == f"q{n}" for _, b in moved), "a key moved between old queues"
    expected = len(KEYS) / (n + 1)
    assert abs(len(moved) - expected) < 5 * (expected**0.5) + 10


@settings(max_examples=10, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=6), min_size=2, max_size=6))
def test_shares_follow_weights(weights: list[int]) -> None:
    counts = Counter(routed(weights, KEYS))
    total = sum(weights)
    for i, w in enumerate(weights):
        expected = len(KEYS) * w / total
        assert abs(counts[f"q{i}"] - expected) < 5 * (expected**0.5) + 10


@settings(max_examples=20, deadline=None)
@given(st.lists(st.text(max_size=20), min_size=1, max_size=50))
def test_same_key_same_queue_and_exactly_one_queue(keys: list[str]) -> None:
    first = exchanges.predict("x-consistent-hash", [("a", "1"), ("b", "2"), ("c", "3")], keys)
    second = exchanges.predict("x-consistent-hash", [("a", "1"), ("b", "2"), ("c", "3")], keys)
    assert first == second
    assert all(len(d) == 1 for d in first)
