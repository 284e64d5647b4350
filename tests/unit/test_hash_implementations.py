"""Both builds of exchanges/hashing/hashcore.py (interpreted and mypyc-compiled) answer as Erlang does.

`exchanges.hashing.hashcore` imported directly is always the interpreted module; the compiled copy is
`exchanges.hashing._hashcore_native` (built by setup.py). Every vector runs against each build present, and
the two are compared on random inputs. Under CI (CI=true) without HASHBROKER_PURE, the compiled
build must be present and active, so a compile that failed silently during install is caught.
"""

from __future__ import annotations

import importlib
import os
import random
import struct
import sys
import types
from typing import Any

import pytest

import exchanges
from exchanges.erlang.terms import phash2
from exchanges.hashing import hashcore as pure
from exchanges.hashing import native as hashing
from exchanges.hashing.jump_table import TABLES, RingLookup
from tests.unit.test_erlang_vectors import PHASH_CASES, decode_term, vectors


def _native() -> types.ModuleType | None:
    try:
        module = importlib.import_module(hashing.NATIVE_MODULE)
    except ImportError:
        return None
    return module if getattr(module, "SOURCE_DIGEST", None) == hashing.source_digest() else None


NATIVE = _native()
IMPLEMENTATIONS = [pytest.param(pure, id="python")] + (
    [pytest.param(NATIVE, id="mypyc")]
    if NATIVE is not None
    else [pytest.param(None, id="mypyc", marks=pytest.mark.skip(reason="no current compiled build"))]
)
M64 = (1 << 64) - 1


def test_builds_are_what_they_claim() -> None:
    assert pure.COMPILED is False
    assert pure.M64 == M64
    if NATIVE is not None:
        assert NATIVE.COMPILED is True
        assert NATIVE.M64 == -1
        assert type(NATIVE.block_hash).__name__ == "builtin_function_or_method"


def test_compiled_build_is_active_under_ci() -> None:
    """CI installs with `pip install -e .[dev,spark]`, which must compile the hash module."""
    if os.environ.get("CI") != "true" or hashing.pure_requested():
        pytest.skip("only under CI=true without HASHBROKER_PURE")
    assert exchanges.hash_implementation() == "mypyc", hashing.REASON


def test_active_build_is_reported() -> None:
    assert exchanges.hash_implementation() in ("mypyc", "python")
    expected = hashing.core is not pure
    assert (exchanges.hash_implementation() == "mypyc") == expected
    if NATIVE is not None and not hashing.pure_requested():
        assert hashing.core is NATIVE


BINARY_CASES = [c for c in PHASH_CASES if "bin" in c["term"]]


@pytest.mark.parametrize("core", IMPLEMENTATIONS)
def test_binary_vectors(core: Any) -> None:
    assert len(BINARY_CASES) > 50
    for case in BINARY_CASES:
        data = decode_term(case["term"])
        assert core.phash2_binary(data) == case["phash2"], case["name"]
        assert core.make_hash2_binary(data) % (1 << 32) == case["phash2_2_32"], case["name"]
    single_key_lists = [
        c
        for c in PHASH_CASES
        if "list" in c["term"]
        and len(c["term"]["list"]) == 1
        and "bin" in c["term"]["list"][0]
        and "tail" not in c["term"]
    ]
    for case in single_key_lists:
        data = decode_term(case["term"])[0]
        assert core.phash2_single_key_list(data) == case["phash2_2_27"], case["name"]
    rng = random.Random(7)
    for n in range(40):  # against the general term hasher, which has its own list walk
        data = _random_bytes(rng, n)
        assert core.phash2_single_key_list(data) == phash2([data], 1 << 27), data


@pytest.mark.parametrize("core", IMPLEMENTATIONS)
def test_exs1024_vectors(core: Any) -> None:
    for seed in vectors()["exs1024"]["seeds"]:
        k = seed["seed"]
        words = core.exs1024_seed(k, k, k)
        if "state0" in seed:
            assert [w & M64 for w in words] == seed["state0"], k
        pos = 1
        raws = []
        floats = []
        for _ in seed["raw"]:
            pos = core.exs1024_next(words, pos)
            raw = core.exs1024_raw(words[pos - 1])
            raws.append(raw & M64)
            floats.append(struct.pack(">d", core.uniform_of_raw(raw)).hex())
        assert raws == seed["raw"], k
        n = len(seed["floats_hex"])
        assert floats[:n] == seed["floats_hex"], k


@pytest.mark.parametrize("core", IMPLEMENTATIONS)
def test_jump_vectors(core: Any) -> None:
    data = vectors()["jump"]
    for case in data["cases"]:
        for n, expected in zip(data["buckets"], case["results"], strict=True):
            assert core.jump_consistent_hash(case["key"], n) == expected, (case["name"], n)


def _random_bytes(rng: random.Random, n: int) -> bytes:
    kind = rng.randrange(3)
    if kind == 0:  # any bytes, mostly not UTF-8
        return rng.randbytes(n)
    if kind == 1:  # ASCII digits, like the reference's keys
        return "".join(rng.choice("0123456789") for _ in range(n)).encode()
    return ("é€" * n).encode()[:n]  # multi-byte UTF-8, cut anywhere


@pytest.mark.skipif(NATIVE is None, reason="no current compiled build to compare with")
def test_builds_agree_on_random_inputs() -> None:
    assert NATIVE is not None
    rng = random.Random(20261123)
    for n in range(101):
        for _ in range(60):
            data = _random_bytes(rng, n)
            assert NATIVE.make_hash2_binary(data) == pure.make_hash2_binary(data), data
            assert NATIVE.phash2_binary(data) == pure.phash2_binary(data), data
            assert NATIVE.phash2_single_key_list(data) == pure.phash2_single_key_list(data), data
            if data:
                initval = rng.getrandbits(32)
                assert NATIVE.block_hash(data, initval) == pure.block_hash(data, initval), data
    for _ in range(3000):
        words = [rng.getrandbits(32) for _ in range(4)]
        assert NATIVE.uint32_hash_2(*words) == pure.uint32_hash_2(*words)
        key = rng.getrandbits(rng.choice((5, 21, 27, 32, 64, 100))) * rng.choice((1, -1))  # raw ints too
        buckets = rng.choice((1, 2, 3, 64, 1000, 1024, rng.randint(1, 100_000)))
        assert NATIVE.jump_consistent_hash(key, buckets) == pure.jump_consistent_hash(key, buckets)
    for k in range(0, 1 << 21, 4099):  # every 21-bit seed region, 64 draws each (past the ring wrap)
        a = NATIVE.exs1024_seed(k, k, k)
        b = pure.exs1024_seed(k, k, k)
        assert [w & M64 for w in a] == b
        pa = pb = 1
        for _ in range(64):
            pa = NATIVE.exs1024_next(a, pa)
            pb = pure.exs1024_next(b, pb)
            assert NATIVE.exs1024_raw(a[pa - 1]) & M64 == pure.exs1024_raw(b[pb - 1])


def test_stale_compiled_build_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType(hashing.NATIVE_MODULE)
    fake.SOURCE_DIGEST = "0" * 64  # type: ignore[attr-defined]
    fake.__file__ = "fake.so"
    monkeypatch.setitem(sys.modules, hashing.NATIVE_MODULE, fake)
    monkeypatch.delenv("HASHBROKER_PURE", raising=False)
    core, implementation, reason = hashing._choose()
    assert (core, implementation) == (pure, "python")
    assert "built from another hashcore.py" in reason
    fake.SOURCE_DIGEST = hashing.source_digest()  # type: ignore[attr-defined]
    assert hashing._choose()[:2] == (fake, "mypyc")


def test_pure_can_be_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HASHBROKER_PURE", "1")
    assert hashing._choose()[:2] == (pure, "python")
    monkeypatch.setenv("HASHBROKER_PURE", "0")
    assert hashing._choose()[1] == ("mypyc" if NATIVE is not None else "python")


def test_consistent_hash_routes_alike_with_and_without_the_jump_table() -> None:
    """The route's inlined table lookup and the direct jump hash agree (64 buckets, 5,000 keys)."""
    keys = [str(i) for i in range(2500)] + [os.urandom(9).hex() for _ in range(2500)]
    bindings = [(f"q{i}", "1") for i in range(64)]
    saved = TABLES.enabled
    TABLES.enabled = False
    try:
        direct = exchanges.predict("x-consistent-hash", bindings, keys)
    finally:
        TABLES.enabled = saved
    TABLES.get(64)
    ex = exchanges.create_exchange("x-consistent-hash")
    for queue, key in bindings:
        ex.add_binding(exchanges.Binding(exchanges.Destination.queue(queue), key, exchanges.FieldTable()))
    assert isinstance(ex._ring, RingLookup) and ex._ring.table is not None  # type: ignore[attr-defined]
    with_table = [[d.name for d in ex.route(exchanges.SimpleMessage([k]))] for k in keys]
    assert with_table == direct
