"""Erlang `rand`'s exs1024 (xorshift1024*) and RabbitMQ's jump consistent hash on top of it.

The consistent-hash exchange seeds `rand:seed_s(exs1024, {K, K, K})` with a 27-bit hash `K` and runs
Lamping & Veach's jump hash with `rand:uniform_s` floats. The float sequence, including how the
three 21-bit seed parts are mixed and that `uniform_s` divides the raw 64-bit output by 2^64
(exs1024, not exs1024s which keeps 53 bits), decides the bucket, so it is reproduced exactly.
The arithmetic is `exchanges.hashing.hashcore`'s (compiled when possible); this module adds a generator
object for inspecting the sequence, as the Erlang vectors do.
"""

from __future__ import annotations

from exchanges.hashing.native import exs1024_next, exs1024_raw, uniform_of_raw
from exchanges.hashing.native import exs1024_seed as _seed_words
from exchanges.hashing.native import jump_consistent_hash as jump_consistent_hash  # re-exported

M64 = 0xFFFFFFFFFFFFFFFF


def exs1024_seed(a1: int, a2: int, a3: int) -> list[int]:
    """The 16-word state `rand:seed_s(exs1024, {A1, A2, A3})` builds (only 21 bits of each count)."""
    return [word & M64 for word in _seed_words(a1, a2, a3)]


class Exs1024:
    """A running exs1024 generator; `uniform()` is `rand:uniform_s/1` for this algorithm."""

    __slots__ = ("_pos", "_words")

    def __init__(self, a1: int, a2: int, a3: int) -> None:
        self._words = _seed_words(a1, a2, a3)
        self._pos = 1

    def _next_raw(self) -> int:
        self._pos = exs1024_next(self._words, self._pos)
        return exs1024_raw(self._words[self._pos - 1])

    def next64(self) -> int:
        """The raw 64-bit output (`exs1024_next`), as an unsigned int."""
        return self._next_raw() & M64

    def uniform(self) -> float:
        return uniform_of_raw(self._next_raw())
