"""phash2, exs1024 and jump-hash ports against vectors computed by `erl` (OTP 25).

The vector file is regenerated from Erlang with `tools/gen_erlang_vectors.py`; the tests only read
the committed copy so they run without Erlang.
"""

from __future__ import annotations

import json
import struct
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from exchanges.erlang.format import format_binary_p
from exchanges.erlang.rand import Exs1024, exs1024_seed, jump_consistent_hash
from exchanges.erlang.terms import Atom, ImproperList, phash2, phash2_binary
from exchanges.hashing.jump_table import build_table

VECTORS = Path(__file__).parents[1] / "data" / "erlang_vectors.json"


@cache
def vectors() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(VECTORS.read_text())
    return data


def decode_term(encoded: dict[str, Any]) -> Any:
    """The tagged JSON encoding (see the file's doc.term_encoding) back into Python term values."""
    if "bin" in encoded:
        return bytes.fromhex(encoded["bin"])
    if "int" in encoded:
        return int(encoded["int"])
    if "float" in encoded:
        return struct.unpack(">d", bytes.fromhex(encoded["float"]))[0]
    if "atom" in encoded:
        return Atom(encoded["atom"])
    if "tuple" in encoded:
        return tuple(decode_term(t) for t in encoded["tuple"])
    if "list" in encoded:
        items = [decode_term(t) for t in encoded["list"]]
        if "tail" in encoded:
            return ImproperList(tuple(items), decode_term(encoded["tail"]))
        return items
    raise ValueError(encoded)


PHASH_CASES = vectors()["phash2"]["cases"]


@pytest.mark.parametrize("case", PHASH_CASES, ids=[c["name"][:60] for c in PHASH_CASES])
def test_phash2_matches_erlang(case: dict[str, Any]) -> None:
    term = decode_term(case["term"])
    assert phash2(term) == case["phash2"]
    assert phash2(term, 1 << 27) == case["phash2_2_27"]
    assert phash2(term, 1 << 32) == case["phash2_2_32"]
    if isinstance(term, bytes):
        assert phash2_binary(term) == case["phash2"]


def test_vector_file_covers_the_issue_categories() -> None:
    categories = {c["category"] for c in PHASH_CASES}
    assert {"binary", "integer", "list", "atom", "tuple", "float"} <= categories
    assert len(PHASH_CASES) >= 300


@pytest.mark.parametrize("alg", ["exs1024"])
def test_exs1024_state_and_floats(alg: str) -> None:
    for seed in vectors()[alg]["seeds"]:
        k = seed["seed"]
        if "state0" in seed:
            assert exs1024_seed(k, k, k) == seed["state0"]
        gen = Exs1024(k, k, k)
        raw = [gen.next64() for _ in range(len(seed["raw"]))]
        assert raw == seed["raw"], k
        gen = Exs1024(k, k, k)
        floats = [struct.pack(">d", gen.uniform()).hex() for _ in range(len(seed["floats_hex"]))]
        assert floats == seed["floats_hex"], k


def test_exs1024s_would_route_differently() -> None:
    """exs1024s keeps 53 bits of each word; the plugin uses exs1024, and the two differ."""
    differing = 0
    for seed in vectors()["exs1024s"]["seeds"]:
        k = seed["seed"]
        gen = Exs1024(k, k, k)
        ours = [struct.pack(">d", gen.uniform()).hex() for _ in seed["floats_hex"]]
        differing += sum(a != b for a, b in zip(ours, seed["floats_hex"], strict=True))
    assert differing > 0


def test_jump_consistent_hash_matches_plugin() -> None:
    data = vectors()["jump"]
    buckets = data["buckets"]
    checked = 0
    for case in data["cases"]:
        for n, expected in zip(buckets, case["results"], strict=True):
            assert jump_consistent_hash(case["key"], n) == expected, (case["name"], n)
            checked += 1
    assert checked > 3000


@pytest.mark.parametrize("buckets", [2, 7, 64])
def test_vectorised_table_equals_direct_computation(buckets: int) -> None:
    table = build_table(buckets)
    data = vectors()["jump"]
    column = data["buckets"].index(buckets) if buckets in data["buckets"] else None
    for case in data["cases"]:
        key = case["key"]
        expected = jump_consistent_hash(key, buckets)
        assert int(table[key & 0x1FFFFF]) == expected
        if column is not None:
            assert expected == case["results"][column]
    for key in range(0, 1 << 21, 9973):
        assert int(table[key]) == jump_consistent_hash(key, buckets)


FORMAT_CASES = [c for c in vectors()["erlang_format"]["cases"] if "bin" in c["term"]]


@pytest.mark.parametrize("case", FORMAT_CASES, ids=[c["name"][:40] for c in FORMAT_CASES])
def test_binary_error_formatting_is_erlang_p(case: dict[str, Any]) -> None:
    expected = "".join(case["~p"]) if isinstance(case["~p"], list) else case["~p"]
    # ~p output is a list of code points <= 255, which RabbitMQ turns into one byte each
    assert format_binary_p(decode_term(case["term"])) == expected.encode("latin-1")
