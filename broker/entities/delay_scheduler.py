"""x-delayed-message: the messages a vhost's delayed exchanges hold, and when each is due.

The rabbitmq-delayed-message-exchange plugin keeps delayed messages in a table keyed by due time
(wall-clock milliseconds, `erlang:system_time`) and routes each when its timer fires, handing it to
the queues like any publish. `DelayScheduler` only orders the work, so it can be tested without
sleeping: a heap of `(due_ms, seq, item)` where `seq` is a push counter, so messages due at the same
millisecond come out in publish order (a heap alone is not stable) and items themselves are never
compared. `DelayedMessages` is one vhost's table on the vhost's `Clock`: it holds messages and arms
one timer; the vhost decides what is held, keeps the messages of durable exchanges through the
`Persistence` port (the plugin's table is a disc_copies Mnesia table: they are held again after a
restart; a transient exchange is gone after one, and with it what it held) and releases what is
due through its delivery pipeline (`broker.entities.vhost`).

Header semantics (which `x-delay` values delay at all) live in `exchanges.types.delayed.delay_ms`;
`push_message` applies them and tells the caller to route at once when the delay is 0.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, NamedTuple, TypeVar

from exchanges.base import Message
from exchanges.types.delayed import DelayedMessageExchange, delay_ms

if TYPE_CHECKING:
    from collections.abc import Callable

    from broker.entities.clock import Clock, Timer
    from broker.entities.exchange import Exchange
    from broker.entities.message import StoredMessage

DELAYED_TYPE = DelayedMessageExchange.type_name

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


class Held(NamedTuple):
    """A held message: the exchange it was published to, the message, and its key in the store
    (0: not kept, its exchange is transient or nothing is kept)."""

    exchange: Exchange
    msg: StoredMessage
    key: int


class DelayedMessages:
    """One vhost's delay table on its clock: holds messages until their due time (wall-clock
    milliseconds, as the plugin's), arms one timer for the earliest, and hands what is due to
    `release` (the vhost routes it through its pipeline). Keys for the store are handed out here
    (`next_key`), above every key read back at boot."""

    def __init__(self, clock: Clock, release: Callable[[list[Held]], None]) -> None:
        self.clock = clock
        self.release = release
        self.scheduler: DelayScheduler[Held] = DelayScheduler()
        self._timer: Timer | None = None
        self._timer_due: int | None = None
        self._key = 0  # the last store key handed out

    def __len__(self) -> int:
        return len(self.scheduler)

    def now_ms(self) -> int:
        return int(self.clock.wall() * 1000)

    def next_key(self) -> int:
        self._key += 1
        return self._key

    def hold(self, held: Held, due_ms: int) -> None:
        """Hold until `due_ms` (released at once when that is past; those due at the same
        millisecond in the order they were held)."""
        if held.key > self._key:
            self._key = held.key
        now = self.now_ms()
        self.scheduler.push(held, due_ms - now, now)
        self._arm()

    def _arm(self) -> None:
        due = self.scheduler.next_due()
        armed = self._timer_due if self._timer is not None else None
        if due is None or (armed is not None and armed <= due):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_due = due
        self._timer = self.clock.call_later(max(0, due - self.now_ms()) / 1000.0, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._timer_due = None
        due = self.scheduler.pop_due(self.now_ms())
        if due:
            self.release(due)
        self._arm()

    def close(self) -> None:
        """The broker stops: no timer fires any more (what is kept stays kept)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._timer_due = None
