"""The event loop `hashbroker serve` runs on, and the collector settings it serves with.

uvloop (the optional extra `hashbroker[uvloop]`) is used when it is installed, since its loop
spends less CPU per read and write than asyncio's selector loop; `HASHBROKER_LOOP=asyncio` keeps
the standard loop anyway. The loop in use is logged at start and shown by /api/overview.

The collector: what start-up left alive (modules, settings, the rebuilt vhosts) is moved out of the
collected generations (`gc.freeze`), so no collection walks it again, and the youngest generation
is collected every 20,000 net allocations instead of 700: messages hold no cycles and are freed by
reference counting, so frequent young collections only rescan what a publish has just queued.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

GEN0_THRESHOLD = 20_000
"""Net allocations between two collections of the youngest generation (CPython's default: 700)."""


def loop_factory() -> tuple[str, Callable[[], asyncio.AbstractEventLoop] | None]:
    """("uvloop", its loop class) when uvloop is installed and not refused, else ("asyncio", None)."""
    if os.environ.get("HASHBROKER_LOOP", "").lower() == "asyncio":
        return "asyncio", None
    try:  # by name: an optional extra, without type information where it is not installed
        uvloop = importlib.import_module("uvloop")
    except ImportError:
        return "asyncio", None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return "uvloop", factory


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """ "uvloop" or "asyncio": which implementation `loop` is."""
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the loop `loop_factory` picks."""
    _name, factory = loop_factory()
    if factory is None:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def settle_collector() -> None:
    """Freeze what start-up left and collect the young generation less often (see the module
    docstring); called once the broker serves. No collection first: a full one would delay the
    first client by tens of milliseconds."""
    gc.freeze()
    _gen0, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)
