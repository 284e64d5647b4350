"""The event loop `hashbroker serve` runs on.

uvloop (the optional extra `hashbroker[uvloop]`) is used when it is installed, since its loop
spends less CPU per read and write than asyncio's selector loop; `HASHBROKER_LOOP=asyncio` keeps
the standard loop anyway. The loop in use is logged at start and shown by /api/overview.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


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
