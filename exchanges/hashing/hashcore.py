"""The integer core of RabbitMQ's hash exchanges: phash2 of a binary, and the exs1024 jump hash.

This is the only copy of that arithmetic; `exchanges.erlang.terms`, `erlang_rand` and the two hash
exchanges call into it through `exchanges.hashing.native`. It is plain typed Python written so that mypyc
compiles it to tight C: constants are `Final`, bytes are read by indexing, 64-bit words are `i64`.
`setup.py` compiles a copy of this file as `exchanges.hashing._hashcore_native` when it can, and
`exchanges.hashing.native` uses that copy only if it was built from this exact text; otherwise this module
runs interpreted. The two must answer alike: tests/test_hash_implementations.py checks both.

Two choices keep one text right under both semantics:
- 64-bit words are `i64` for mypyc (machine integers that wrap on overflow); interpreted they are
  unbounded ints, so every left shift and product is masked with `M64`, which is 2^64-1 interpreted
  and -1 (all bits set: a no-op) compiled. Right shifts are masked too, since i64 shifts are
  arithmetic. Interpreted values stay in 0..2^64-1; compiled ones are the same bits, signed.
- Bytes are read one index at a time when compiled (a C array access) and with `int.from_bytes`
  interpreted (where each index is a bytecode); `COMPILED` tells which.

Sources: erts/emulator/beam/utils.c (`make_hash2`, `block_hash`, MIX; OTP 25), rand.erl (exs1024)
and rabbit_exchange_type_consistent_hash.erl 3.10.8 (`jump_consistent_hash/2`).
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:  # mypyc's native integer; an annotation only, never needed at run time
    from mypy_extensions import i64


def _probe() -> None:
    """A function whose type tells whether this module was compiled."""


COMPILED: Final = not isinstance(_probe, types.FunctionType)
"""True in the mypyc build (its functions are builtins), False interpreted."""

M32: Final = 0xFFFFFFFF
M64: Final[i64] = -1 if COMPILED else 0xFFFFFFFFFFFFFFFF
"""All 64 bits: 2^64-1 interpreted; -1 compiled, where i64 arithmetic already wraps."""
PHASH2_MASK: Final = 0x7FFFFFF
"""phash2/1 keeps 27 bits; phash2(T, 2^27) is the same number."""

HCONST: Final = 0x9E3779B9
HCONST_2: Final = 0x3C6EF372
HCONST_13: Final = 0x08D12E65
NIL_DEF: Final = 2
"""`[]` mixed after other terms (utils.c's NIL_DEF)."""

M21: Final = 0x1FFFFF
TWO_POW_32: Final = 4294967296.0
TWO_POW_64: Final = 18446744073709551616.0
XORSHIFT64_STAR: Final[i64] = 2685821657736338717
XORSHIFT1024_STAR: Final[i64] = 1181783497276652981


def mix3(a: int, b: int, c: int) -> tuple[int, int, int]:
    """Bob Jenkins' 96-bit MIX(a, b, c) on 32-bit words (utils.c's MIX macro). block_hash carries
    all three words from block to block; every other caller keeps only `c`."""
    a = ((a - b - c) & M32) ^ (c >> 13)
    b = ((b - c - a) & M32) ^ ((a << 8) & M32)
    c = ((c - a - b) & M32) ^ (b >> 13)
    a = ((a - b - c) & M32) ^ (c >> 12)
    b = ((b - c - a) & M32) ^ ((a << 16) & M32)
    c = ((c - a - b) & M32) ^ (b >> 5)
    a = ((a - b - c) & M32) ^ (c >> 3)
    b = ((b - c - a) & M32) ^ ((a << 10) & M32)
    return a, b, ((c - a - b) & M32) ^ (b >> 15)


def uint32_hash_2(e1: int, e2: int, aconst: int, h: int) -> int:
    """UINT32_HASH_2: two 32-bit words mixed into the running hash `h`."""
    return mix3((aconst + e1) & M32, (aconst + e2) & M32, h)[2]


def block_hash(data: bytes, initval: int) -> int:
    """utils.c `block_hash`: 12-byte little-endian blocks, then the zero-padded tail (0-11 bytes)
    with the total length added to `c` and the tail's 9th-11th bytes above c's low byte."""
    length = len(data)
    a = HCONST
    b = HCONST
    c = initval
    pos = 0
    while True:
        left = length - pos
        if left >= 12:
            if COMPILED:
                w0 = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16) | (data[pos + 3] << 24)
                w1 = data[pos + 4] | (data[pos + 5] << 8) | (data[pos + 6] << 16) | (data[pos + 7] << 24)
                w2 = data[pos + 8] | (data[pos + 9] << 8) | (data[pos + 10] << 16) | (data[pos + 11] << 24)
            else:
                x = int.from_bytes(data[pos : pos + 12], "little")
                w0 = x & M32
                w1 = (x >> 32) & M32
                w2 = x >> 64
            c = (c + w2) & M32
        else:
            if COMPILED:
                w0 = 0
                w1 = 0
                w2 = 0
                i = left - 1
                while i >= 8:
                    w2 = (w2 << 8) | data[pos + i]
                    i -= 1
                while i >= 4:
                    w1 = (w1 << 8) | data[pos + i]
                    i -= 1
                while i >= 0:
                    w0 = (w0 << 8) | data[pos + i]
                    i -= 1
            else:
                x = int.from_bytes(data[pos:], "little")
                w0 = x & M32
                w1 = (x >> 32) & M32
                w2 = x >> 64
            c = (c + length + (w2 << 8)) & M32
        a, b, c = mix3((a + w0) & M32, (b + w1) & M32, c)
        if left < 12:
            return c
        pos += 12


def make_hash2_binary(data: bytes) -> int:
    """`make_hash2(<<Data>>)` (32 bits): an empty binary skips block_hash."""
    if len(data) == 0:
        return HCONST_13
    return block_hash(data, HCONST_13)


def phash2_binary(data: bytes) -> int:
    """`erlang:phash2(<<Data>>)` (27 bits): the consistent-hash exchange's routing-key K."""
    if len(data) == 0:
        return HCONST_13 & PHASH2_MASK
    return block_hash(data, HCONST_13) & PHASH2_MASK


def phash2_single_key_list(key: bytes) -> int:
    """`erlang:phash2([Key], 2^27)`: x-modulus-hash for a message with one routing key. The binary
    is hashed from 0, then the list's `[]` is mixed in as UINT32_HASH(NIL_DEF, HCONST_2)."""
    c = HCONST_13 if len(key) == 0 else block_hash(key, HCONST_13)
    return mix3((HCONST_2 + NIL_DEF) & M32, HCONST_2, c)[2] & PHASH2_MASK


def exs1024_seed(a1: int, a2: int, a3: int) -> list[i64]:
    """The 16 words of `rand:seed_s(exs1024, {A1, A2, A3})` (only 21 bits of each count), as the
    jump hash reads them: word 0 is the first S0. Compiled, words above 2^63 read negative."""
    b1: i64 = (((a1 & M21) + 1) * 2097131) & M21
    b2: i64 = (((a2 & M21) + 1) * 2097133) & M21
    b3: i64 = (((a3 & M21) + 1) * 2097143) & M21
    r: i64 = (b1 << 43) | (b2 << 22) | (b3 << 1) | 1
    words: list[i64] = [0] * 16
    i = 15
    while i >= 0:
        # exs64_next (xorshift64*): the state advances without the multiplication; Erlang
        # collects the outputs in reverse, so the last one made is the list's head
        r ^= (r >> 12) & 0x000FFFFFFFFFFFFF
        r ^= (r << 25) & M64
        r ^= (r >> 27) & 0x1FFFFFFFFF
        words[i] = (r * XORSHIFT64_STAR) & M64
        i -= 1
    return words


def exs1024_next(words: list[i64], pos: int) -> int:
    """One exs1024_next step on the ring `words`, from `pos` = 1 after seeding; returns the next
    `pos`. Invariant: S0 is `words[pos - 1]`, so the new word is `words[returned pos - 1]`. Erlang
    keeps [NS1 | L3] and pushes S0 on a reversed tail; when one word is left it rebuilds the list
    as [H | reverse(RL)], which in ring terms is a rotation by one."""
    s0 = words[pos - 1]
    s1 = words[pos]
    s1 ^= (s1 << 31) & M64
    s1 ^= (s1 >> 11) & 0x1FFFFFFFFFFFFF
    words[pos] = s0 ^ ((s0 >> 30) & 0x3FFFFFFFF) ^ s1
    if pos < 15:
        return pos + 1
    last = words[15]
    i = 15
    while i > 0:
        words[i] = words[i - 1]
        i -= 1
    words[0] = last
    return 1


def exs1024_raw(word: i64) -> i64:
    """The xorshift1024* output for a new state word: 64 bits (read negative when compiled)."""
    return (word * XORSHIFT1024_STAR) & M64


def uniform_of_raw(raw: i64) -> float:
    """`rand:uniform_s/1` for exs1024: the raw 64 bits over 2^64. The two exact halves are added
    once, so the float is the correctly rounded one, as int -> float would give."""
    return (float((raw >> 32) & M32) * TWO_POW_32 + float(raw & M32)) / TWO_POW_64


def jump_consistent_hash(key: int, buckets: int) -> int:
    """RabbitMQ's `jump_consistent_hash(Key, N)` for an integer key (N >= 1), seeded with
    `rand:seed_s(exs1024, {Key, Key, Key})` and drawing `rand:uniform_s` floats."""
    if buckets == 1:
        return 0
    words = exs1024_seed(key, key, key)
    pos = 1
    b = -1
    j = 0
    while j < buckets:
        b = j
        pos = exs1024_next(words, pos)
        jf = (b + 1) / uniform_of_raw(exs1024_raw(words[pos - 1]))
        if jf >= buckets:
            break
        j = int(jf)
    return b
