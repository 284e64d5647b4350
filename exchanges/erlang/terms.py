"""Erlang's `erlang:phash2/1,2` (OTP 25 `make_hash2`) for the terms RabbitMQ hashes, bit for bit.

RabbitMQ's hash exchanges pick queues with `phash2` of Erlang terms: a routing key is a binary, a
header on 3.10 is a `{Type, Value}` tuple, the sharding exchange hashes a list of binaries. Python
values map onto terms as follows, so any of them can be hashed exactly as the broker would:

  bytes -> binary            int -> integer (bignums too)     float -> float
  list  -> proper list       Tuple / tuple -> tuple           Atom("x") -> atom
  ImproperList(items, tail) -> [I1, I2 | Tail]

The constants and the mixing order follow erts/emulator/beam/utils.c; the comments name the C
macro each block mirrors so the two can be read side by side. The integer core (MIX, block_hash,
binaries) lives in `exchanges.hashing.hashcore`, compiled when possible (see `exchanges.hashing.native`).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from exchanges.erlang.atom import FALSE as FALSE  # re-exported
from exchanges.erlang.atom import TRUE as TRUE  # re-exported
from exchanges.erlang.atom import UNDEFINED as UNDEFINED  # re-exported
from exchanges.erlang.atom import Atom
from exchanges.hashing.hashcore import HCONST, HCONST_2, HCONST_13, M32, NIL_DEF
from exchanges.hashing.native import block_hash, uint32_hash_2
from exchanges.hashing.native import make_hash2_binary as make_hash2_binary  # re-exported
from exchanges.hashing.native import phash2_binary as phash2_binary  # re-exported

HCONST_3 = 0xDAA66D2B
HCONST_4 = 0x78DDE6E4
HCONST_9 = 0x8FF34781
HCONST_10 = 0x2E2AC13A
HCONST_11 = 0xCC623AF3
HCONST_12 = 0x6A99B4AC

NIL_HASH_WHEN_FIRST = 3468870702
"""`[]` as the very first term hashed: utils.c returns this constant instead of mixing."""

PHASH2_MAX = 1 << 27


@dataclass(frozen=True, slots=True)
class ImproperList:
    """`[items... | tail]` with a non-list tail; only needed to test phash2 exhaustively."""

    items: tuple[Any, ...]
    tail: Any


def atom_hash(name: str) -> int:
    """hashpjw over the atom's bytes, with erts' latin-1 clutch for two-byte UTF-8 sequences."""
    data = name.encode("utf-8")
    h = 0
    i = 0
    n = len(data)
    while i < n:
        v = data[i]
        i += 1
        if i < n and (v & 0xFE) == 0xC2 and (data[i] & 0xC0) == 0x80:
            v = ((v << 6) | (data[i] & 0x3F)) & 0xFF
            i += 1
        h = ((h << 4) + v) & M32
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
            h ^= g
    return h


def make_hash2(term: Any) -> int:
    """Full 32-bit `make_hash2` of a term; `phash2/1` keeps the low 27 bits of it."""
    h = 0
    stack: list[Any] = [term]
    while stack:
        h = _hash_one(stack.pop(), h, stack)
    return h


def _sint32_hash(x: int, h: int) -> int:
    """SINT32_HASH: negative numbers are (needlessly, but observably) mixed twice."""
    y = x & M32
    if x < 0:
        h = uint32_hash_2((-x) & M32, 0, HCONST, h)
    return uint32_hash_2(y, 0, HCONST, h)


def _hash_one(term: Any, h: int, stack: list[Any]) -> int:
    """Hash one term into `h`; compound terms push their remaining parts on `stack`."""
    kind = type(term)
    if kind is bytes or kind is bytearray or kind is memoryview:
        data = bytes(term)
        con = (HCONST_13 + h) & M32
        return con if not data else block_hash(data, con)
    if kind is int or kind is bool:
        if kind is bool:
            raise TypeError("use Atom('true') / Atom('false') for Erlang booleans")
        if -(1 << 27) <= term < (1 << 27):
            return _sint32_hash(term, h)
        return _bignum_hash(term, h)
    if kind is Atom:
        hv = atom_hash(term.name)
        return hv if h == 0 else uint32_hash_2(hv, 0, HCONST_3, h)
    if kind is tuple:
        h = uint32_hash_2(len(term), 0, HCONST_9, h)
        if not term:
            return h
        stack.extend(reversed(term))
        return h
    if kind is list or kind is ImproperList:
        items = term if kind is list else term.items
        tail: Any = [] if kind is list else term.tail
        if not items:
            if kind is ImproperList:
                stack.append(tail)
                return h
            return NIL_HASH_WHEN_FIRST if h == 0 else uint32_hash_2(NIL_DEF, 0, HCONST_2, h)
        return _hash_list(items, 0, tail, h, stack)
    if kind is _ListRest:
        return _hash_list(term.items, term.start, term.tail, h, stack)
    if kind is float:
        if term == 0.0:
            term = 0.0
        bits = struct.unpack("<Q", struct.pack("<d", term))[0]
        return uint32_hash_2(bits >> 32, bits & M32, HCONST_12, h)
    raise TypeError(f"cannot hash {kind.__name__} as an Erlang term")


def _is_byte(x: Any) -> bool:
    return type(x) is int and 0 <= x <= 255


@dataclass(frozen=True, slots=True)
class _ListRest:
    """The cons cells of `items` from `start` on: a cursor, so a long list is never copied."""

    items: Sequence[Any]
    start: int
    tail: Any


def _hash_list(items: Sequence[Any], start: int, tail: Any, h: int, stack: list[Any]) -> int:
    """A cons chain: runs of byte-valued elements are packed 4 per word (the string optimisation),
    any other element is hashed as its own term, and the tail ([] or improper) comes last."""
    i = start
    n = len(items)
    while i < n:
        if _is_byte(items[i]):
            c = 0
            sh = 0
            while i < n and _is_byte(items[i]):
                sh = ((sh << 8) + items[i]) & M32
                if c == 3:
                    h = uint32_hash_2(sh, 0, HCONST_4, h)
                    c = sh = 0
                else:
                    c += 1
                i += 1
            if c > 0:
                h = uint32_hash_2(sh, 0, HCONST_4, h)
            continue
        # A non-byte head: utils.c pushes the rest of the list and hashes the head first.
        stack.append(_ListRest(items, i + 1, tail) if i + 1 < n else tail)
        stack.append(items[i])
        return h
    # Every element was a byte: the tail is hashed next.
    stack.append(tail)
    return h


def _bignum_hash(x: int, h: int) -> int:
    """Integers outside 28-bit signed range: 64-bit digits of |x|, each split into two words."""
    con = HCONST_10 if x < 0 else HCONST_11
    magnitude = -x if x < 0 else x
    while True:
        digit = magnitude & 0xFFFFFFFFFFFFFFFF
        h = uint32_hash_2(digit & M32, digit >> 32, con, h)
        magnitude >>= 64
        if not magnitude:
            return h


def phash2(term: Any, range_: int | None = None) -> int:
    """`erlang:phash2(Term)` (27 bits) or `erlang:phash2(Term, Range)` for 1 <= Range <= 2^32."""
    h = make_hash2(term)
    if range_ is None:
        return h & (PHASH2_MAX - 1)
    if not 1 <= range_ <= 1 << 32:
        raise ValueError("range must be in 1..2^32")
    return h % range_


# Erlang's standard term order: number < atom < reference < fun < port < pid < tuple < map < nil
# < list < bitstring. Only the classes RabbitMQ's binding records hold are needed here.
_NUMBER, _ATOM, _TUPLE, _LIST, _BINARY = 0, 1, 6, 9, 10


def term_order_key(term: Any) -> tuple[Any, ...]:
    """A sort key under which Python orders terms as Erlang's `<` does (what `lists:usort` uses).

    Numbers compare by value across int and float; atoms by their text; tuples by size, then element
    by element; lists element by element with a proper prefix first (so `[]`, the nil class just
    below lists, sorts before every non-empty list); binaries byte by byte, a proper prefix first.
    """
    if isinstance(term, bool):
        raise TypeError("Python bools are not Erlang terms; use TRUE/FALSE atoms")
    if isinstance(term, int | float):
        return (_NUMBER, term)
    if isinstance(term, Atom):
        return (_ATOM, term.name)
    if isinstance(term, tuple):
        return (_TUPLE, len(term), tuple(term_order_key(item) for item in term))
    if isinstance(term, list):
        return (_LIST, tuple(term_order_key(item) for item in term))
    if isinstance(term, bytes | bytearray):
        return (_BINARY, bytes(term))
    raise TypeError(f"no Erlang term order for {type(term).__name__}")
