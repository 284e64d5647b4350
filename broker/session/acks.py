"""Acks, rejects, nacks, recover and basic.qos: settling deliveries and freeing their credit."""

from __future__ import annotations

from amqpwire.errors import AmqpError, ReplyCode
from broker.entities.queues.catalog import Entry, Queue
from broker.protocol import commands as C
from broker.protocol import replies
from broker.session.channel_base import Unacked, members
from broker.session.publish import PublishMixin


class AcksMixin(PublishMixin):
    """The channel's acks part (see the module docstring and `channel_base`)."""

    def on_basic_qos(self, a: C.BasicQos) -> None:
        if a.prefetch_size:
            raise AmqpError(ReplyCode.NOT_IMPLEMENTED, f"prefetch_size!=0 ({a.prefetch_size})", hard=True)
        self.limiter.qos(a.prefetch_count, a.global_)
        self.reply(replies.basic_qos_ok())
        self.kick_queues()

    def kick_queues(self) -> None:
        for q in {id(m.queue): m.queue for c in self.consumers.values() for m in members(c)}.values():
            q.try_deliver()

    def _collect(self, tag: int, multiple: bool) -> list[tuple[int, Unacked]]:
        """rabbit_channel:collect_acks: tag 0 + multiple means everything; unknown tag is a 406."""
        unacked = self.unacked
        if multiple and tag == 0:
            out = [(t, unacked.pop(t)) for t in self.unacked_order if t in unacked]
            self.unacked_order.clear()
            return out
        if tag not in unacked:
            raise AmqpError(406, f"unknown delivery tag {tag}")
        if not multiple:
            return [(tag, unacked.pop(tag))]
        out = []
        order = self.unacked_order
        while order and order[0] <= tag:
            t = order.popleft()
            u = unacked.pop(t, None)
            if u is not None:
                out.append((t, u))
        return out

    def _release(self, items: list[tuple[int, Unacked]]) -> list[Queue]:
        """Bookkeeping common to ack/reject: free prefetch credit, return touched queues (in order)."""
        touched: dict[Queue, None] = {}
        limiter = self.limiter
        for _t, u in items:
            limiter.settled(u.consumer)
            if u.consumer is not None and u.consumer.group is not None:
                # the shared prefetch freed: any member's shard may go
                touched.update(dict.fromkeys(m.queue for m in u.consumer.group))
            u.queue.unacked -= 1
            touched[u.queue] = None
        if limiter.channel_wide and items:
            # basic.qos global=true is one limit for the whole channel (RabbitMQ 3.10.8's limiter
            # wakes every queue it blocked): credit freed by an ack on one queue lets the channel's
            # consumers of other queues receive too, after the acked queue's own consumers.
            for consumer in self.consumers.values():
                touched.update(dict.fromkeys(m.queue for m in members(consumer)))
        return list(touched)

    @staticmethod
    def _count_acks(items: list[tuple[int, Unacked]]) -> None:
        """The queues' `ack` message_stats (rejects and nacks are not acks)."""
        for _t, u in items:
            u.queue.stat_ack += 1

    def _store_settled(self, items: list[tuple[int, Unacked]]) -> None:
        """Acked deliveries: the store forgets the persistent ones."""
        by_queue: dict[Queue, list[Entry]] = {}
        for _t, u in items:
            if u.queue.store is not None:
                by_queue.setdefault(u.queue, []).append(u.entry)
        for q, entries in by_queue.items():
            assert q.store is not None
            from broker.runtime.durability import stored_seqs

            q.store.remove_messages(self.vhost.name, q.name, stored_seqs(entries))

    def on_basic_ack(self, a: C.BasicAck) -> None:
        items = self._collect(a.delivery_tag, a.multiple)
        if self.tx is not None:
            self.tx_acks.extend(items)
            return
        if self.vhost.store is not None:
            self._store_settled(items)
        self._count_acks(items)
        for q in self._release(items):
            q.try_deliver()

    def _reject(self, items: list[tuple[int, Unacked]], requeue: bool) -> None:
        touched = self._release(items)
        by_queue: dict[Queue, list[Entry]] = {}
        for _t, u in items:
            by_queue.setdefault(u.queue, []).append(u.entry)
        for q, entries in by_queue.items():
            if q.deleted:
                continue
            if requeue:
                q.requeue(entries)
            else:
                q.dead_letter(entries, "rejected")
        for q in touched:
            q.try_deliver()

    @staticmethod
    def _check_rejectable(items: list[tuple[int, Unacked]]) -> None:
        """A type may refuse basic.reject and basic.nack of its deliveries (streams: 540)."""
        for _t, u in items:
            u.queue.check_reject()

    def on_basic_reject(self, a: C.BasicReject) -> None:
        items = self._collect(a.delivery_tag, False)
        self._check_rejectable(items)
        if self.tx is not None:
            self._tx_reject(items, a.requeue)
            return
        self._reject(items, a.requeue)

    def on_basic_nack(self, a: C.BasicNack) -> None:
        items = self._collect(a.delivery_tag, a.multiple)
        self._check_rejectable(items)
        if self.tx is not None:
            self._tx_reject(items, a.requeue)
            return
        self._reject(items, a.requeue)

    def _tx_reject(self, items: list[tuple[int, Unacked]], requeue: bool) -> None:
        """A reject/nack inside a transaction waits for tx.commit; tx.rollback (and a channel close)
        must give the deliveries back as unacked, as RabbitMQ 3.10.8 does (a later reject of the same
        tag after rollback is accepted there, not a 406 unknown delivery tag)."""
        self.tx_rejects.extend(items)
        assert self.tx is not None
        self.tx.append(lambda: self._reject(items, requeue))

    def on_basic_recover_async(self, a: C.BasicRecoverAsync | C.BasicRecover) -> None:
        if not a.requeue:
            raise AmqpError(540, "requeue=false", hard=True)
        self.requeue_all()

    def on_basic_recover(self, a: C.BasicRecover) -> None:
        self.on_basic_recover_async(a)
        self.reply(replies.basic_recover_ok())

    def requeue_all(self) -> None:
        items = [(t, self.unacked.pop(t)) for t in self.unacked_order if t in self.unacked]
        self.unacked_order.clear()
        if items:
            self._reject(items, True)
