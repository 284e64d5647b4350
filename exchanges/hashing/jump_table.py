"""Precomputed jump-hash results: bucket = table[N][K & 0x1FFFFF].

`rand:seed_s(exs1024, {K, K, K})` keeps only 21 bits of K, so the bucket RabbitMQ picks for N
buckets is a function of `K & 0x1FFFFF` alone: 2,097,152 possible answers per N. Computing one
costs ~8-15 us interpreted and ~0.8 us with the compiled hash module (16 xorshift64* steps to seed,
then the jump loop); looking it up costs ~0.1 us. NumPy fills a whole table in 1-2 seconds, so a
table is built once a bucket count has routed enough messages to be worth it (BUILD_AFTER_ROUTES);
before that (and without NumPy) the direct computation runs.
Tables are shared by every exchange with the same bucket count.
"""

from __future__ import annotations

import importlib.util
import threading
from collections import OrderedDict
from typing import Any

from exchanges.hashing.native import hash_implementation, jump_consistent_hash

SEED_SPACE = 1 << 21
BUILD_AFTER_ROUTES = 20_000 if hash_implementation() == "python" else 2_000_000
"""Routes on one bucket count before its table is built (a table costs ~1-2 s and 4-8 MB, and the
route that builds it waits). Interpreted, a lookup saves ~8-15 us per route, so the table pays off
quickly; with the compiled hash module it saves only ~0.8 us (direct ~1.6 us, table ~0.8 us per
routed message, bench/routing.py), so it waits for about the routes that repay its build time."""
MAX_TABLES = 8

_CHUNK = 1 << 18


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy is a dependency, but routing must not need it
        return None
    return numpy


def build_table(buckets: int) -> Any:
    """The jump hash of every 21-bit seed for `buckets` buckets, vectorised with NumPy."""
    np = _numpy()
    dtype = np.uint16 if buckets <= 0xFFFF else np.uint32
    table = np.empty(SEED_SPACE, dtype=dtype)
    for start in range(0, SEED_SPACE, _CHUNK):
        table[start : start + _CHUNK] = _jump_chunk(np, start, buckets)
    return table


def _jump_chunk(np: Any, start: int, buckets: int) -> Any:
    u64 = np.uint64
    k = np.arange(start, start + _CHUNK, dtype=u64)
    m21 = u64(0x1FFFFF)
    b1 = ((k + u64(1)) * u64(2097131)) & m21
    b2 = ((k + u64(1)) * u64(2097133)) & m21
    b3 = ((k + u64(1)) * u64(2097143)) & m21
    r = (b1 << u64(43)) | (b2 << u64(22)) | (b3 << u64(1)) | u64(1)
    words = []
    for _ in range(16):
        r = r ^ (r >> u64(12))
        r = r ^ (r << u64(25))
        r = r ^ (r >> u64(27))
        words.append(r * u64(2685821657736338717))
    words.reverse()
    # Jump loop for all seeds in lock step; finished seeds keep their bucket.
    n = len(k)
    bucket = np.zeros(n, dtype=np.int64)
    j = np.zeros(n, dtype=np.int64)
    active = np.ones(n, dtype=bool)
    s0 = words[0]
    pos = 1
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        while active.any():
            bucket = np.where(active, j, bucket)
            s1 = words[pos]
            s1 = s1 ^ (s1 << u64(31))
            s1 = s1 ^ (s1 >> u64(11))
            ns1 = s0 ^ (s0 >> u64(30)) ^ s1
            words[pos - 1] = s0
            words[pos] = ns1
            s0 = ns1
            if pos < 15:
                pos += 1
            else:
                words = [words[15], *words[:15]]
                s0 = words[0]
                pos = 1
            value = (ns1 * u64(1181783497276652981)).astype(np.float64) / 18446744073709551616.0
            jf = (bucket + 1).astype(np.float64) / value
            done = jf >= buckets
            active &= ~done
            j = np.where(active, np.trunc(np.where(active, jf, 0.0)).astype(np.int64), j)
    return bucket


class JumpTables:
    """Built tables by bucket count, shared process-wide (least recently built dropped first)."""

    def __init__(self) -> None:
        self._tables: OrderedDict[int, Any] = OrderedDict()
        self._uses: dict[int, int] = {}
        self._lock = threading.Lock()
        # find_spec, not import: NumPy costs ~17 MB and 60 ms, paid only when a table is built
        self.enabled = importlib.util.find_spec("numpy") is not None

    def count_route(self, buckets: int) -> bool:
        """Count a route computed without a table; True once this bucket count deserves one.

        Counted per bucket count, not per exchange: `predict` builds a fresh exchange per call
        (per Arrow batch in Spark), and a ring change must not restart the count."""
        if not self.enabled:
            return False
        count = self._uses.get(buckets, 0) + 1
        self._uses[buckets] = count
        return count >= BUILD_AFTER_ROUTES

    def cached(self, buckets: int) -> Any:
        """The table for `buckets` if one was already built, without counting a use."""
        return self._tables.get(buckets)

    def get(self, buckets: int) -> Any:
        """Build (or fetch) the table for `buckets` now."""
        with self._lock:
            table = self._tables.get(buckets)
            if table is None:
                table = build_table(buckets)
                self._tables[buckets] = table
                while len(self._tables) > MAX_TABLES:
                    self._tables.popitem(last=False)
            else:
                self._tables.move_to_end(buckets)
            return table


TABLES = JumpTables()


def _as_ints(table: Any) -> memoryview:
    """A view whose items index as plain Python ints (cheaper per lookup than NumPy scalars)."""
    return memoryview(table).cast("B").cast("H" if table.dtype.itemsize == 2 else "I")


class RingLookup:
    """One exchange's view of the shared tables: computes until the table exists, then holds it.

    Keeping the table (as a memoryview of unsigned ints, whose items index as plain Python ints)
    on the exchange saves the shared-dictionary lookups on every message.
    """

    __slots__ = ("_buckets", "table")

    def __init__(self, buckets: int) -> None:
        self._buckets = buckets
        built = TABLES.cached(buckets)
        self.table: Any = None if built is None else _as_ints(built)

    def bucket(self, key: int) -> int:
        table = self.table
        if table is not None:
            return int(table[key & 0x1FFFFF])
        buckets = self._buckets
        if buckets == 1:
            return 0
        if TABLES.count_route(buckets):
            self.table = _as_ints(TABLES.get(buckets))
        return jump_consistent_hash(key, buckets)


KEY_CACHE_LIMIT = 16_384
"""Routing keys remembered per hash exchange: real traffic repeats keys (one per user, order,
device...), and a dict lookup (~0.05 us) replaces encoding and hashing the key (~0.4 us compiled,
2-5 us interpreted). Cleared when full or when the ring changes, so memory stays bounded (~2 MB)
and answers never go stale. The exchanges' route methods fill it inline."""
