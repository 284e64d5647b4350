"""Which build of `exchanges.hashing.hashcore` routes: the mypyc-compiled copy when it is current, else pure.

`setup.py` compiles a copy of hashcore.py as `exchanges.hashing._hashcore_native` carrying
`SOURCE_DIGEST`, the sha256 of the hashcore.py it was made from. The compiled module is used only
when that digest equals the sha256 of the hashcore.py beside this file, so an edited hashcore.py
is never shadowed by a stale build (reinstall with `pip install -e .` to recompile). Setting
`HASHBROKER_PURE` (to anything but empty or 0) keeps the interpreted module. Either way the answers are
the same code's; the compiled one is about ten times faster.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from exchanges import native_twin
from exchanges.hashing import hashcore as _pure
from exchanges.native_twin import pure_requested as pure_requested

log = logging.getLogger("hashbroker.hashing")

NATIVE_MODULE = "exchanges.hashing._hashcore_native"


def source_digest(path: Path | None = None) -> str:
    """sha256 of hashcore.py's bytes: what a compiled copy must have been built from."""
    return native_twin.source_digest(path or Path(_pure.__file__))


def _choose() -> tuple[ModuleType, str, str]:
    """(module, "mypyc" | "python", why)."""
    return native_twin.choose(_pure, NATIVE_MODULE, "hash module")


core, IMPLEMENTATION, REASON = _choose()
if IMPLEMENTATION == "python":
    # One line, once per process: a stale build is worth a warning, a plain absence is not.
    (log.warning if "built from another" in REASON else log.info)("pure-Python hashing: %s", REASON)


def hash_implementation() -> str:
    """ "mypyc" when the compiled hash module routes, "python" when hashcore.py runs interpreted."""
    return IMPLEMENTATION


__all__ = (
    "block_hash",
    "exs1024_next",
    "exs1024_raw",
    "exs1024_seed",
    "jump_consistent_hash",
    "make_hash2_binary",
    "phash2_binary",
    "phash2_single_key_list",
    "uint32_hash_2",
    "uniform_of_raw",
)
"""The functions callers take from whichever build routes (each is looked up once, here)."""

if TYPE_CHECKING:  # the same signatures either way
    from exchanges.hashing.hashcore import (
        block_hash,
        exs1024_next,
        exs1024_raw,
        exs1024_seed,
        jump_consistent_hash,
        make_hash2_binary,
        phash2_binary,
        phash2_single_key_list,
        uint32_hash_2,
        uniform_of_raw,
    )
else:
    globals().update((name, getattr(core, name)) for name in __all__)
