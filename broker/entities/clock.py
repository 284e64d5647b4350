"""Time for the entities: a clock that reads monotonic seconds and schedules callbacks.

Entities never arm an event-loop timer themselves: message TTL and x-expires go through the clock
their vhost was given. The server passes one backed by its asyncio loop; unit tests pass a
`ManualClock` and move time by hand, so expiry is tested without sleeping.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    """A scheduled callback; cancelling one that already ran does nothing."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds (only differences matter)."""
        ...

    def call_later(self, delay: float, fn: Callable[[], None]) -> Timer:
        """Run `fn` once, `delay` seconds from now."""
        ...

    def wall(self) -> float:
        """Seconds since the epoch (what x-death's `time` records)."""
        ...


class _ManualTimer:
    __slots__ = ("cancelled", "due", "fn", "order")

    def __init__(self, due: float, order: int, fn: Callable[[], None]) -> None:
        self.due = due
        self.order = order
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def __lt__(self, other: _ManualTimer) -> bool:
        return (self.due, self.order) < (other.due, other.order)


class ManualClock:
    """A clock that only moves when told to: `advance(seconds)` runs the timers that fall due, in
    due order, each seeing `now()` at its own due time (as an event loop would run them)."""

    def __init__(self, start: float = 1000.0, epoch: float = 1_700_000_000.0) -> None:
        self._start = start
        self._epoch = epoch
        self._now = start
        self._timers: list[_ManualTimer] = []
        self._order = 0

    def now(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._epoch + (self._now - self._start)

    def call_later(self, delay: float, fn: Callable[[], None]) -> _ManualTimer:
        self._order += 1
        timer = _ManualTimer(self._now + max(0.0, delay), self._order, fn)
        heapq.heappush(self._timers, timer)
        return timer

    def advance(self, seconds: float) -> None:
        until = self._now + seconds
        while self._timers and self._timers[0].due <= until:
            timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._now = max(self._now, timer.due)
            timer.fn()
        self._now = until

    @property
    def pending(self) -> int:
        """Timers scheduled and not cancelled (what a test checks to see nothing leaks)."""
        return sum(1 for t in self._timers if not t.cancelled)


class UnscheduledClock:
    """Wall-monotonic time with no scheduler behind it: timers are accepted and never run.

    The default for entities built outside a running broker (tools, benchmarks), where nothing
    would drive a timer anyway; TTL still holds at every read because queues compare `now()`.
    """

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    def call_later(self, delay: float, fn: Callable[[], None]) -> _ManualTimer:
        return _ManualTimer(time.monotonic() + delay, 0, fn)
