"""The consumers of one queue, and which of them the next message goes to (rabbit_queue_consumers).

One routine answers "who gets the next message" for every queue type:

* round-robin: consumers with credit take turns; a blocked one is skipped and goes to the back;
* consumer priorities (`x-priority`): the highest band with credit gets every message, round-robin
  within that band only (RabbitMQ 3.10.8 keeps consumers in a priority queue: x-priority 10 with
  prefetch 2 took m0 and m1 while a priority-0 consumer waited);
* single active consumer: one consumer gets everything; which one is chosen by the vhost's
  `active_consumer_selection`: "first" (registration order, RabbitMQ 3.10) or "consistent-hash"
  (Pulsar's consumer ring, broker.entities.queues.consumer_ring), which also applies to the members of a
  sharded pseudo-queue consumer (`Consumer.group`) even on a queue without the argument.
A demoted active consumer keeps its unacked deliveries (as RabbitMQ keeps a cancelled SAC
consumer's), so a switch never delivers a message twice; the new active one gets the ready ones.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, TypeVar

from broker.entities.queues.base import Consumer
from broker.entities.queues.consumer_ring import MODES, ConsumerInfo, HashRing, Mode

if TYPE_CHECKING:
    from broker.entities.clock import Clock

# -- active consumer selection -------------------------------------------------------------------------

K = TypeVar("K", ConsumerInfo, str)
_RINGS: dict[tuple[ConsumerInfo | str, ...], tuple[HashRing, list[int]]] = {}


def _ring(keys: tuple[K, ...]) -> tuple[HashRing, list[int]]:
    """The ring of a key tuple (cached: many queues share one set of consumers) and, per ring
    entry, the position of its key in `keys`."""
    cached = _RINGS.get(keys)
    if cached is None:
        if len(_RINGS) > 256:
            _RINGS.clear()
        ring = HashRing(keys)
        cached = _RINGS[keys] = (ring, [keys.index(k) for k in ring.consumers])
    return cached


def choose_active(mode: str, queue_name: str, keys: Sequence[K]) -> int | None:
    """Position in `keys` (registration order) of the queue's active consumer, None without any."""
    if not keys:
        return None
    if mode == "first" or len(keys) == 1:
        return 0
    ring, positions = _ring(tuple(keys))
    return positions[ring.owner_index(queue_name)]


class ActiveConsumerSelector:
    """`ActiveConsumerSelector(mode).active(queue_name, consumers)`; consumers in registration order."""

    def __init__(self, mode: Mode = "first") -> None:
        if mode not in MODES:
            raise ValueError(f"unknown active consumer selection {mode!r}; expected one of {MODES}")
        self.mode: Mode = mode

    def active(self, queue_name: str, consumers: Sequence[K]) -> K | None:
        """The consumer that should receive the queue's messages, or None if there is none."""
        i = choose_active(self.mode, queue_name, consumers)
        return None if i is None else consumers[i]

    def assign(self, queue_names: Iterable[str], consumers: Sequence[K]) -> dict[str, K | None]:
        """Active consumer of each queue when the same consumers subscribe to all of them."""
        return {q: self.active(q, consumers) for q in queue_names}


# -- consumers cancelled by the server ------------------------------------------------------------------


def notify_cancelled(clock: Clock, consumers: Sequence[Consumer]) -> None:
    """Tell the channels of `consumers` that their queue went away, once the method being handled
    has been answered: RabbitMQ's queue process tells each channel by message, so the channel that
    deleted the queue sends queue.delete-ok first and the consumer's basic.cancel after it (py-amqp,
    and kombu and Celery with it, raise ConsumerCancelled out of queue_delete() otherwise). Observed
    on 3.10.8 for every queue type deleted on its consuming channel; across two channels of one
    connection RabbitMQ writes the two in either order, here delete-ok comes first. A consumer its
    channel cancelled or closed meanwhile is no longer the channel's, which then sends nothing."""
    if consumers:
        clock.call_later(0.0, lambda: _notify(consumers))


def _notify(consumers: Sequence[Consumer]) -> None:
    for consumer in consumers:
        consumer.channel.consumer_cancelled_by_server(consumer)


# -- one queue's consumers ----------------------------------------------------------------------------


class QueueConsumers:
    """The consumers of one queue in delivery order, and the choice of the next one.

    `members` is the queue's `consumers` deque (read by channels and management); `one_active` is
    true for a single-active-consumer queue and while ring members of a sharded consumer are attached;
    `ever_had` once any consumer was added (an auto-delete queue goes when its last one leaves).
    """

    __slots__ = (
        "active",
        "ever_had",
        "members",
        "one_active",
        "prioritized",
        "ring_members",
        "single_active",
    )

    def __init__(self, single_active: bool) -> None:
        self.members: deque[Consumer] = deque()
        self.single_active = single_active
        self.one_active = single_active
        self.prioritized = False  # some consumer has a non-zero x-priority
        self.ring_members = 0
        self.active: Consumer | None = None
        self.ever_had = False

    @property
    def chosen(self) -> Consumer | None:
        """The single active consumer while one consumer gets everything, else None."""
        return self.active if self.one_active else None

    def add(self, consumer: Consumer, queue_name: str, mode: str) -> None:
        self.ever_had = True
        if consumer.group is not None:
            self.ring_members += 1
            self.one_active = True
        if consumer.priority and not self.one_active:
            self.prioritized = True
        members = self.members
        if self.prioritized and not self.one_active:
            # higher x-priority first; equal priorities keep arrival order
            idx = next((i for i, c in enumerate(members) if c.priority < consumer.priority), len(members))
            members.insert(idx, consumer)
        else:
            members.append(consumer)
        if self.one_active:
            self.reselect(queue_name, mode)

    def remove(self, consumer: Consumer, queue_name: str, mode: str) -> bool:
        """False when `consumer` was not one of them."""
        try:
            self.members.remove(consumer)
        except ValueError:
            return False
        if self.prioritized and consumer.priority:
            self.prioritized = any(c.priority for c in self.members)
        if consumer.group is not None:
            self.ring_members -= 1
            self.one_active = self.single_active or self.ring_members > 0
        if self.one_active:
            self.reselect(queue_name, mode)
        return True

    def reselect(self, queue_name: str, mode: str) -> None:
        """(Re)choose the single active consumer. Ring members always use the ring."""
        members = self.members
        if mode == "first" and not self.ring_members:
            self.active = members[0] if members else None
            return
        i = choose_active("consistent-hash", queue_name, [c.ring_key for c in members])
        self.active = None if i is None else members[i]

    def cancel_all(self, clock: Clock) -> None:
        """The queue is gone: none is left, and each consumer's channel is told (basic.cancel)
        after the current method's reply (`notify_cancelled`)."""
        notify_cancelled(clock, list(self.members))
        self.members.clear()
        self.active = None

    def next(self) -> Consumer | None:
        """The consumer the next message goes to (rotating past it), or None when none has credit."""
        members = self.members
        if self.one_active:
            c = self.active
            return c if c is not None and c.channel.can_deliver(c) else None
        if len(members) == 1:  # the common case: no turns to take, no band to choose
            c = members[0]
            return c if c.channel.can_deliver(c) else None
        if self.prioritized:
            return self._next_prioritized()
        for _ in range(len(members)):
            c = members[0]
            members.rotate(-1)
            if c.channel.can_deliver(c):
                return c
        return None

    def _next_prioritized(self) -> Consumer | None:
        members = self.members
        items = list(members)
        n = len(items)
        start = 0
        while start < n:
            prio = items[start].priority
            end = start
            while end < n and items[end].priority == prio:
                end += 1
            for i in range(start, end):
                c = items[i]
                if c.channel.can_deliver(c):
                    # as the plain rotation: skipped (blocked) ones and c move to the band's end
                    items[start:end] = items[i + 1 : end] + items[start : i + 1]
                    members.clear()
                    members.extend(items)
                    return c
            start = end
        return None
