"""x-delayed-message: the messages a vhost's delayed exchanges hold, and when each is due.

The rabbitmq-delayed-message-exchange plugin keeps delayed messages in a table keyed by due time
(wall-clock milliseconds, `erlang:system_time`) and routes each when its timer fires, handing it to
the queues like any publish. `DelayScheduler` only orders the work, so it can be tested without
sleeping: a heap of `(due_ms, seq, item)` where `seq` is a push counter, so messages due at the same
millisecond come out in publish order (a heap alone is not stable) and items themselves are never
compared. `DelayedMessages` is one vhost's table: it holds messages, arms one timer on the vhost's
`Clock`, releases what is due through the vhost's delivery pipeline, and keeps the messages of
durable exchanges through the `Persistence` port, as the plugin's table is a disc_copies Mnesia
table: they are held again after a restart (a transient exchange is gone after one, and with it
what it held).

Header semantics (which `x-delay` values delay at all) live in `exchanges.types.delayed.delay_ms`;
`push_message` applies them and tells the caller to route at once when the delay is 0.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, NamedTuple, TypeVar

from broker.entities.message import RoutingView
from exchanges.base import Message
from exchanges.types.delayed import DelayedMessageExchange, delay_ms

if TYPE_CHECKING:
    from broker.entities.clock import Timer
    from broker.entities.exchange import Exchange
    from broker.entities.message import StoredMessage
    from broker.entities.vhost import VHost

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
    """One vhost's delay table (see the module docstring)."""

    def __init__(self, vhost: VHost) -> None:
        self.vhost = vhost
        self.scheduler: DelayScheduler[Held] = DelayScheduler()
        self._timer: Timer | None = None
        self._timer_due: int | None = None
        self._key = 0  # the last store key handed out

    def __len__(self) -> int:
        return len(self.scheduler)

    def _now(self) -> int:
        return int(self.vhost.clock.wall() * 1000)

    def hold(self, x: Exchange, msg: StoredMessage) -> bool:
        """Hold a message published to the delayed exchange `x` for its x-delay; False: it is not
        delayed, route it now."""
        delay = delay_ms(RoutingView(msg))
        if delay <= 0:
            return False
        vhost = self.vhost
        persistence = vhost.persistence
        key = 0
        now = self._now()
        if x.durable and persistence is not None:
            self._key = key = self._key + 1
            persistence.delayed_held(vhost, x, key, now + delay, msg)
        self.scheduler.push(Held(x, msg, key), delay, now)
        self._arm()
        return True

    def restore(self, x: Exchange, msg: StoredMessage, key: int, due_ms: int) -> None:
        """A held message read back at boot (in key order): held again until `due_ms`, released
        at once when that is past."""
        self._key = max(self._key, key)
        now = self._now()
        self.scheduler.push(Held(x, msg, key), due_ms - now, now)
        self._arm()

    def _arm(self) -> None:
        due = self.scheduler.next_due()
        armed = self._timer_due if self._timer is not None else None
        if due is None or (armed is not None and armed <= due):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_due = due
        self._timer = self.vhost.clock.call_later(max(0, due - self._now()) / 1000.0, self._release)

    def _release(self) -> None:
        """Route what is due through the pipeline, as the plugin's timer does; a message whose
        exchange was deleted meanwhile (or deleted and declared again) is dropped."""
        self._timer = None
        self._timer_due = None
        vhost = self.vhost
        released: list[int] = []
        for x, msg, key in self.scheduler.pop_due(self._now()):
            if key:
                released.append(key)
            if vhost.exchanges.get(x.name) is x:
                vhost.deliver(x, msg, vhost.route(x, msg), counted=False)
        persistence = vhost.persistence
        if released and persistence is not None:  # after the released copies were written
            persistence.delayed_released(vhost, released)
        self._arm()

    def close(self) -> None:
        """The broker stops: no timer fires any more (what is kept stays kept)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._timer_due = None
