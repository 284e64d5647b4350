"""A pure scheduler for x-delayed-message: which held messages are due, in which order.

The rabbitmq-delayed-message-exchange plugin keeps delayed messages in a table keyed by due time and
routes each when its timer fires. The broker owns the clock and the timer (asyncio); this module only
orders the work, so it can be tested without sleeping: a heap of `(due_ms, seq, item)` where `seq`
is a push counter, so messages due at the same millisecond come out in publish order (a heap alone
is not stable) and items themselves are never compared.

Header semantics (which `x-delay` values delay at all) live in `exchanges.types.delayed.delay_ms`;
`push_message` applies them and tells the caller to route at once when the delay is 0.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from exchanges.base import Message
from exchanges.types.delayed import delay_ms

T = TypeVar("T")


@dataclass(order=True)
class _Entry(Generic[T]):
    due_ms: int
    seq: int
    item: T = field(compare=False)


class DelayScheduler(Generic[T]):
    """Holds items until their due time; `now`/`due` are integer milliseconds on any clock."""

    def __init__(self) -> None:
        self._heap: list[_Entry[T]] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, item: T, delay_ms: int, now: int) -> int:
        """Hold `item` for `delay_ms` (clamped at 0) from `now`; returns its due time."""
        due = now + max(0, int(delay_ms))
        heapq.heappush(self._heap, _Entry(due, self._seq, item))
        self._seq += 1
        return due

    def push_message(self, item: T, message: Message, now: int) -> bool:
        """Hold a published message as the plugin would; False means "not delayed: route it now"."""
        delay = delay_ms(message)
        if delay <= 0:
            return False
        self.push(item, delay, now)
        return True

    def next_due(self) -> int | None:
        """Due time of the earliest held item (for the broker's timer), or None when empty."""
        return self._heap[0].due_ms if self._heap else None

    def pop_due(self, now: int) -> list[T]:
        """Remove and return every item due at or before `now`, earliest first, ties in push order."""
        out: list[T] = []
        while self._heap and self._heap[0].due_ms <= now:
            out.append(heapq.heappop(self._heap).item)
        return out

    def drain(self) -> list[T]:
        """Remove everything (exchange deleted), in due order."""
        out = [heapq.heappop(self._heap).item for _ in range(len(self._heap))]
        return out
