"""Erlang `rand`'s exs1024 (xorshift1024*) and RabbitMQ's jump consistent hash on top of it.

The consistent-hash exchange seeds `rand:seed_s(exs1024, {K, K, K})` with a 27-bit hash `K` and runs
Lamping & Veach's jump hash with `rand:uniform_s` floats. The float sequence, including how the
three 21-bit seed parts are mixed and that `uniform_s` divides the raw 64-bit output by 2^64
(exs1024, not exs1024s which keeps 53 bits), decides the bucket, so it is reproduced exactly.
"""

from __future__ import annotations

M64 = 0xFFFFFFFFFFFFFFFF
M21 = 0x1FFFFF
TWO_POW_64 = 18446744073709551616.0
XORSHIFT64_STAR = 2685821657736338717
XORSHIFT1024_STAR = 1181783497276652981


def exs1024_seed(a1: int, a2: int, a3: int) -> list[int]:
    """The 16-word state `rand:seed_s(exs1024, {A1, A2, A3})` builds (only 21 bits of each count)."""
    b1 = (((a1 & M21) + 1) * 2097131) & M21
    b2 = (((a2 & M21) + 1) * 2097133) & M21
    b3 = (((a3 & M21) + 1) * 2097143) & M21
    r = (b1 << 43) | (b2 << 22) | (b3 << 1) | 1
    words = []
    for _ in range(16):
        # exs64_next: xorshift64*; the state advances without the multiplication
        r ^= r >> 12
        r ^= (r << 25) & M64
        r ^= r >> 27
        words.append((r * XORSHIFT64_STAR) & M64)
    words.reverse()
    return words


class Exs1024:
    """A running exs1024 generator; `uniform()` is `rand:uniform_s/1` for this algorithm."""

    __slots__ = ("_pos", "_s0", "_words")

    def __init__(self, a1: int, a2: int, a3: int) -> None:
        self._words = exs1024_seed(a1, a2, a3)
        self._s0 = self._words[0]
        self._pos = 1

    def next64(self) -> int:
        """exs1024_next: the state list is consumed front to back and refilled in ring order."""
        words = self._words
        pos = self._pos
        s0 = self._s0
        s1 = words[pos]
        s1 ^= (s1 << 31) & M64
        s1 ^= s1 >> 11
        ns1 = s0 ^ (s0 >> 30) ^ s1
        # Erlang keeps [NS1 | L3] and pushes S0 on the reversed tail; in ring terms the new word
        # replaces slot pos-1 and the next step reads slot pos+1 (wrapping after 16 words).
        words[pos - 1] = s0
        words[pos] = ns1
        self._s0 = ns1
        self._pos = pos + 1 if pos < 15 else self._wrap()
        return (ns1 * XORSHIFT1024_STAR) & M64

    def _wrap(self) -> int:
        """When one word is left, Erlang rebuilds the list as [H | reverse(RL)]: the ring order."""
        words = self._words
        self._words = [words[15], *words[:15]]
        self._s0 = self._words[0]
        return 1

    def uniform(self) -> float:
        return self.next64() / TWO_POW_64


def jump_consistent_hash(key: int, buckets: int) -> int:
    """RabbitMQ's `jump_consistent_hash(Key, N)` for an integer key (N >= 1)."""
    if buckets == 1:
        return 0
    gen = Exs1024(key, key, key)
    b = -1
    j = 0
    while j < buckets:
        b = j
        r = gen.uniform()
        jf = (b + 1) / r
        if jf >= buckets:
            break
        j = int(jf)
    return b
