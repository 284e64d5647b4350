"""The event loop `hashbroker serve` runs on, and the collector settings it serves with.

uvloop (the optional extra `hashbroker[uvloop]`) is used when it is installed, since its loop
spends less CPU per read and write than asyncio's selector loop; `HASHBROKER_LOOP=asyncio` keeps
the standard loop anyway. The loop in use is logged at start and shown by /api/overview.

The collector: everything alive once the broker serves (modules, settings, the rebuilt vhosts) is
moved out of the collected generations (`gc.freeze`), so full collections no longer walk it, and
the youngest generation is collected less often: messages are mostly acyclic and freed by reference
counting, so frequent young collections mostly rescan queued messages that are still alive.
"""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

GEN0_THRESHOLD = 20_000
"""Allocations minus deallocations between two young collections (CPython's default is 700)."""


def loop_factory() -> tuple[str, Callable[[], asyncio.AbstractEventLoop] | None]:
    """("uvloop", its loop class) when uvloop is installed and not refused, else ("asyncio", None)."""
    if os.environ.get("HASHBROKER_LOOP", "").lower() == "asyncio":
        return "asyncio", None
    try:
        import uvloop
    except ImportError:
        return "asyncio", None
    return "uvloop", uvloop.new_event_loop


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
    """Freeze what start-up left (no collection first: a full one would delay the first client by
    tens of milliseconds) and collect the young generation less often (see the module docstring);
    called once the broker serves."""
    gc.freeze()
    _gen0, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)
