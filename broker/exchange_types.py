"""Access to the exchanges library's type registry.

`exchanges/__init__.py` is expected to import every type module; until it does (or if it imports
only some), we import the package's modules ourselves so `direct`, `fanout`... are registered.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from exchanges.base import ExchangeType
from exchanges.compat import Compat

_loaded = False


def _load() -> None:
    global _loaded
    if _loaded:
        return
    import exchanges

    for info in pkgutil.iter_modules(exchanges.__path__):
        if info.name.startswith("_") or info.name in {"predict", "cli", "__main__"}:
            continue
        try:
            importlib.import_module(f"exchanges.{info.name}")
        except Exception:  # a half-written module must not take the broker down
            continue
    _loaded = True


def get_type(name: str, compat: Compat) -> type[ExchangeType]:
    _load()
    from exchanges.registry import get_type as _get

    cls: Any = _get(name, unknown_code=compat.unknown_type_code)
    return cls


def type_names() -> list[str]:
    _load()
    from exchanges.registry import type_names as _names

    return _names()
