"""A channel's deliveries awaiting an ack (rabbit_channel's unacked_message_q) and how they settle.

The tracker hands out the channel's delivery tags and keeps every delivery that needs an ack, in
tag order, until basic.ack, basic.reject, basic.nack, basic.recover or the channel's close settles
it. Settling frees the delivery's prefetch credit (`Limiter`), tells the store (`MessageLedger`)
when the message is kept, and wakes the queues whose consumers may now receive.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, NamedTuple

from amqpwire.errors import precondition_failed

if TYPE_CHECKING:
    from broker.entities.queues.catalog import Consumer, Entry, Queue
    from broker.session.limiter import Limiter
    from broker.session.ports import MessageLedger


class Unacked(NamedTuple):
    """One delivery awaiting an ack: where it came from and who holds its credit (None: basic.get).
    The tracker keeps each as a plain tuple in this order (one is made per delivery); this is how
    others read them (`Channel.unacked`)."""

    queue: Queue
    entry: Entry
    consumer: Consumer | None


Held = tuple["Queue", "Entry", "Consumer | None"]
"""An `Unacked` as the tracker keeps it."""

Settled = list[tuple[int, Held]]
"""Deliveries taken out of the tracker, with their tags, in tag order."""


class UnackedTracker:
    """Delivery tags and the deliveries awaiting an ack of one channel."""

    __slots__ = ("_channel_queues", "ledger", "limiter", "next_tag", "order", "unacked")

    def __init__(
        self, limiter: Limiter, ledger: MessageLedger | None, channel_queues: Callable[[], Iterable[Queue]]
    ) -> None:
        self.limiter = limiter
        self.ledger = ledger
        self._channel_queues = channel_queues  # every queue the channel's consumers take from
        self.next_tag = 1
        self.unacked: dict[int, Held] = {}
        self.order: deque[int] = deque()  # tags in delivery order (settled ones are skipped)

    def __len__(self) -> int:
        return len(self.unacked)

    def tag(self) -> int:
        """The tag of a delivery that needs no ack."""
        tag = self.next_tag
        self.next_tag = tag + 1
        return tag

    def delivered(self, queue: Queue, entry: Entry, consumer: Consumer | None) -> int:
        """A delivery needing an ack goes out (consumer None: basic.get): its tag; it holds credit."""
        tag = self.next_tag
        self.next_tag = tag + 1
        self.unacked[tag] = (queue, entry, consumer)
        self.order.append(tag)
        # Limiter.delivered, inline: this runs once per delivery of every consumer
        self.limiter.unacked += 1
        if consumer is not None:
            consumer.unacked += 1
        return tag

    def view(self) -> dict[int, Unacked]:
        """The deliveries awaiting an ack, by tag, as `Unacked`s."""
        return {t: Unacked(*held) for t, held in self.unacked.items()}

    def collect(self, tag: int, multiple: bool) -> Settled:
        """rabbit_channel:collect_acks: tag 0 + multiple means everything; an unknown tag is a 406."""
        unacked = self.unacked
        if multiple and tag == 0:
            return self.take_all()
        if tag not in unacked:
            raise precondition_failed(f"unknown delivery tag {tag}")
        if not multiple:
            return [(tag, unacked.pop(tag))]
        out: Settled = []
        order = self.order
        popleft, pop, append = order.popleft, unacked.pop, out.append
        while order and order[0] <= tag:
            t = popleft()
            u = pop(t, None)
            if u is not None:
                append((t, u))
        return out

    def take_all(self) -> Settled:
        """Every delivery still awaiting an ack, in tag order, taken out."""
        unacked = self.unacked
        out = [(t, unacked.pop(t)) for t in self.order if t in unacked]
        self.order.clear()
        return out

    def release(
        self, items: Settled, stored: dict[Queue, list[Entry]] | None = None, acked: bool = False
    ) -> list[Queue]:
        """Free the credit `items` held; the queues that may deliver again, in order. In the same
        pass (it runs once per settled delivery), `acked` counts them in their queues' `ack`
        message_stats (rejects and nacks are not acks) and `stored` gathers their entries by queue."""
        # settled together, deliveries of one queue to one consumer (an ack with multiple=true
        # mostly) free their credit and count at once
        runs: list[tuple[Queue, Consumer | None, list[Entry]]] = []
        run_q: Queue | None = None
        run_c: Consumer | None = None
        run: list[Entry] = []
        for _t, (q, entry, consumer) in items:
            if q is not run_q or consumer is not run_c:
                run_q, run_c, run = q, consumer, []
                runs.append((q, consumer, run))
            run.append(entry)
        touched: dict[Queue, None] = {}
        limiter = self.limiter
        for q, consumer, entries in runs:
            n = len(entries)
            limiter.settled(consumer, n)
            if consumer is not None and consumer.group is not None:
                # the shared prefetch freed: any member's shard may go
                touched.update(dict.fromkeys(m.queue for m in consumer.group))
            q.unacked -= n
            touched[q] = None
            if acked:
                q.stat_ack += n
            if stored is not None:
                kept = stored.get(q)
                if kept is None:
                    stored[q] = entries
                else:
                    kept.extend(entries)
        if limiter.channel_wide and items:
            # basic.qos global=true is one limit for the whole channel (RabbitMQ 3.10.8's limiter
            # wakes every queue it blocked): credit freed by an ack on one queue lets the channel's
            # consumers of other queues receive too, after the acked queue's own consumers.
            touched.update(dict.fromkeys(self._channel_queues()))
        return list(touched)

    def ack(self, items: Settled) -> None:
        """basic.ack (or a committed one): the store forgets them, the queues count them, credit frees."""
        ledger = self.ledger
        stored: dict[Queue, list[Entry]] | None = None if ledger is None else {}
        touched = self.release(items, stored, acked=True)
        if stored:
            assert ledger is not None
            for q, entries in stored.items():
                ledger.settled(q, entries)
        for q in touched:
            q.try_deliver()

    @staticmethod
    def check_rejectable(items: Settled) -> None:
        """A type may refuse basic.reject and basic.nack of its deliveries (streams: 540)."""
        for _t, (q, _e, _c) in items:
            q.check_reject()

    def reject(self, items: Settled, requeue: bool) -> None:
        """basic.reject / basic.nack: back to their queues, or dead-lettered ("rejected")."""
        touched = self.release(items)
        for q, entries in _by_queue(items).items():
            if q.deleted:
                continue
            if requeue:
                q.requeue(entries)
            else:
                q.dead_letter(entries, "rejected")
        for q in touched:
            q.try_deliver()

    def restore(self, items: Settled) -> None:
        """Deliveries taken out but never settled (a transaction rolled back) await an ack again,
        in tag order."""
        if not items:
            return
        unacked = self.unacked
        for t, u in items:
            unacked[t] = u
        self.order = deque(sorted(set(self.order) | {t for t, _u in items}))

    def recover(self) -> None:
        """basic.recover(requeue=true): every unacked delivery goes back to its queue. A queue type
        may refuse first (a stream's delivery crashes RabbitMQ's channel: 541 INTERNAL_ERROR 0/0)."""
        for q, _e, _c in self.unacked.values():
            q.check_recover()
        items = self.take_all()
        if items:
            self.reject(items, True)

    def close(self, held: Settled) -> None:
        """The channel closed: its unacked deliveries (and `held`, settled in a transaction never
        committed) go back to their queues, each as its type returns a closed channel's messages."""
        items = self.take_all()
        items.extend(held)
        if not items:
            return
        self.release(items)
        for q, entries in _by_queue(items).items():
            if not q.deleted:
                # a type may return a closed channel's messages differently from a nack
                # (quorum queues: to the front, counted as a delivery)
                q.requeue_on_close(entries)


def _by_queue(items: Settled) -> dict[Queue, list[Entry]]:
    by_queue: dict[Queue, list[Entry]] = {}
    for _t, (q, entry, _c) in items:
        by_queue.setdefault(q, []).append(entry)
    return by_queue
