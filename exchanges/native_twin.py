"""Which build of a hot module runs: its mypyc-compiled twin when that is current, else the module.

`setup.py` compiles a copy of each module in its `NATIVE_MODULES` list as `_<name>_native`, with
`SOURCE_DIGEST` (the sha256 of the source it was made from) appended. `choose` uses the compiled
twin only when that digest equals the sha256 of the source beside it, so an edited module is never
shadowed by a stale build (reinstall with `pip install -e .` to recompile). Setting
`HASHBROKER_PURE` (to anything but empty or 0) keeps every module interpreted. Either way the same
code runs; the compiled one is faster.
"""

from __future__ import annotations

import hashlib
import importlib
import os
from pathlib import Path
from types import ModuleType


def source_digest(path: Path | str) -> str:
    """sha256 of a source file's bytes: what a compiled twin must have been built from."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def pure_requested() -> bool:
    return os.environ.get("HASHBROKER_PURE", "") not in ("", "0")


def choose(pure: ModuleType, native_name: str, what: str) -> tuple[ModuleType, str, str]:
    """(module, "mypyc" | "python", why): the compiled twin `native_name` of `pure` when it was
    built from `pure`'s current source, else `pure`. `what` names the module in the reason."""
    if pure_requested():
        return pure, "python", "HASHBROKER_PURE is set"
    try:
        native = importlib.import_module(native_name)
    except ImportError as exc:
        return pure, "python", f"no compiled {what} ({exc})"
    try:
        current = source_digest(str(pure.__file__))
    except OSError as exc:
        return pure, "python", f"cannot read {pure.__file__} to check the compiled {what} ({exc})"
    built_from = getattr(native, "SOURCE_DIGEST", None)
    if built_from != current:
        source = Path(str(pure.__file__)).name
        return (
            pure,
            "python",
            (
                f"the compiled {what} was built from another {source} (sha256 {built_from}, "
                f"now {current}): reinstall (pip install -e .) to rebuild it"
            ),
        )
    return native, "mypyc", f"compiled module {native.__file__}"
