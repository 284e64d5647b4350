"""A quorum queue's dead-letter store: at-least-once dead-lettering as rabbit_fifo_dlx does it.

With `x-dead-letter-strategy: at-least-once` (in effect only with `x-overflow: reject-publish` and a
dead-letter exchange, rabbit_fifo:dlh/5) a dead letter leaves the queue only once a queue took it.
One that no queue takes (the exchange routes it nowhere) is held here, still counting toward the
queue's length limits (management `messages_dlx`), and forwarded again when the dead-letter
worker's timer fires (rabbit_fifo_dlx_worker's `dead_letter_worker_publisher_confirm_timeout`, 180 s
by default; `VHost.dead_letter_retry_seconds`): a route that appears meanwhile does not deliver it
earlier, and a later dead letter does not carry it along.

The Raft log keeps this store, so a restart does too. A held message keeps its stored position,
marked with its reason and its place in the store (`Persistence.dead_letters_held`); at boot it is
held again in that order, and the worker that starts with the queue's leader tries to forward what
it holds at once (then on the timer), as rabbit_fifo_dlx_worker does when it checks out the
discards. A forwarded message's position is forgotten only after the dead-lettered copy was
written: the store commits in order, so a crash between the two cannot lose it (at worst it is
forwarded again, which is what at-least-once allows).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from broker.entities.clock import Timer
    from broker.entities.message import StoredMessage
    from broker.entities.queues.base import Entry, Queue


class HeldLetter(NamedTuple):
    """A dead letter no queue took yet: its position in the source queue, the message as
    published, why it was dead-lettered, and its place in the store (dead-letter order)."""

    seq: int
    msg: StoredMessage
    reason: str
    order: int


class DeadLetterStore:
    """The held dead letters of one quorum queue and the worker's retry timer. `on_change` runs
    after a retry changed what is held (the queue's reject-publish state counts held messages)."""

    __slots__ = ("_order", "_timer", "held", "on_change", "q")

    def __init__(self, q: Queue, on_change: Callable[[], None]) -> None:
        self.q = q
        self.on_change = on_change
        self.held: list[HeldLetter] = []
        self._order = 0  # the latest place handed out
        self._timer: Timer | None = None

    def __len__(self) -> int:
        return len(self.held)

    @property
    def bytes(self) -> int:
        return sum(len(letter.msg.body) for letter in self.held)

    def dead_letter(self, entries: Sequence[Entry], reason: str) -> None:
        """Forward each message a queue takes now; hold the others (and arm the retry timer)."""
        forwarded: list[int] = []
        held: list[HeldLetter] = []
        for e in entries:
            if self._forward(e.msg, reason):
                forwarded.append(e.seq)
                continue
            self._order += 1
            letter = HeldLetter(e.seq, e.msg, reason, self._order)
            self.held.append(letter)
            held.append(letter)
        self._write(forwarded, held)
        self._arm()

    def restore(self, seq: int, msg: StoredMessage, reason: str, order: int) -> None:
        """A held message read back at boot (any order): it takes its stored place."""
        i = bisect.bisect(self.held, order, key=lambda letter: letter.order)
        self.held.insert(i, HeldLetter(seq, msg, reason, order))
        self._order = max(self._order, order)

    def start(self) -> None:
        """The worker starts with the queue's leader (after a restart): it forwards what is held."""
        if self.held and self._timer is None:
            self.retry()

    def retry(self) -> None:
        """Forward every held message a queue takes now, in store order; keep the others."""
        self._timer = None
        if self.q.deleted:
            return
        held, self.held = self.held, []
        forwarded: list[int] = []
        for letter in held:
            if self.q.dlx is not None and self._forward(letter.msg, letter.reason):
                forwarded.append(letter.seq)
            else:
                self.held.append(letter)
        self._write(forwarded, [])
        self._arm()
        self.on_change()

    def clear(self) -> None:
        """The queue is deleted: nothing is held or retried any more."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.held.clear()

    def _arm(self) -> None:
        if self.held and self._timer is None:
            q = self.q
            self._timer = q.clock.call_later(q.vhost.dead_letter_retry_seconds, self.retry)

    def _forward(self, msg: StoredMessage, reason: str) -> bool:
        """Dead-letter `msg` through the vhost's pipeline if the exchange routes it to some queue
        (cycles dropped unless the reason is `rejected`, as rabbit_dead_letter does); False when
        nothing would take it."""
        q = self.q
        return q.vhost.dead_letter(q, [msg], reason) > 0

    def _write(self, forwarded: list[int], held: list[HeldLetter]) -> None:
        """Keep the held positions with their reason; forget the forwarded ones (after their
        copies were written by the vhost's pipeline)."""
        q = self.q
        persistence = q.vhost.persistence
        if q.store is None or persistence is None:
            return
        if held:
            persistence.dead_letters_held(q, [(h.seq, h.reason, h.order) for h in held])
        if forwarded:
            persistence.positions_removed(q, forwarded)
