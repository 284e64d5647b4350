"""Publisher confirms: acks coalesced per flush, nacks in order, persistent publishes confirmed
after their store commit (in publish order).

A persistent message is enqueued before its store commit (the writer groups commits; consumers
need not wait for disk). When the commit fails (disk full, store files gone) the publish is nacked
and the message is taken back out of the durable queues where it still waits, so queue depth
counts only what a restart brings back. One already delivered stays with its consumer: as on
RabbitMQ, a nacked message may or may not have been delivered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from amqpwire.errors import AmqpError
from broker.protocol import commands as C
from broker.protocol import methods as M
from broker.protocol import replies
from broker.session.delivery import DeliveryMixin

if TYPE_CHECKING:
    import asyncio

    from broker.entities.queues.catalog import Queue


class ConfirmsMixin(DeliveryMixin):
    """The channel's confirms part (see the module docstring and `channel_base`)."""

    tx_unstored = False
    """A publish of the transaction being committed was not stored: tx.commit must fail (its
    store sync alone cannot tell, as a later batch commits without the dropped writes)."""

    def on_confirm_select(self, a: C.ConfirmSelect) -> None:
        if self.tx is not None:
            raise AmqpError(406, "cannot switch from tx to confirm mode")
        self.confirm = True
        if not a.nowait:
            self.reply(replies.confirm_select_ok())

    def _confirm(self, seq: int, ack: bool) -> None:
        if self._commit_wait:  # store: an earlier persistent publish is not committed yet
            self._commit_wait.append([seq, ack, True])
            return
        self._confirm_now(seq, ack)

    def _confirm_now(self, seq: int, ack: bool) -> None:
        if ack:
            self._ack_upto = seq
            self.conn.want_flush_confirms(self)
            return
        self.flush_confirms(upto=seq - 1)
        self.reply(M.confirm_payload(False, seq, False))
        self._ack_sent = seq
        self._ack_upto = seq

    def flush_confirms(self, upto: int | None = None) -> None:
        """Send one (multiple) ack covering everything confirmed since the last one."""
        top = self._ack_upto if upto is None else min(upto, self._ack_upto)
        if top <= self._ack_sent:
            return
        n = top - self._ack_sent
        self.reply(M.confirm_payload(True, top, n > 1))
        self.vhost.stats.confirm += n
        self._ack_sent = top

    def _committed(self, waiting: list[Any], fut: asyncio.Future[None]) -> None:
        waiting[2] = True
        if fut.cancelled() or fut.exception() is not None:
            waiting[1] = False  # not durable: nack
        if not self.open:
            return
        wait = self._commit_wait
        while wait and wait[0][2]:
            seq, ack, _ = wait.popleft()
            self._confirm_now(seq, ack)

    def _unqueue_if_unstored(
        self, fut: asyncio.Future[None], queues: Sequence[Queue], seqs: Sequence[int]
    ) -> None:
        """Once `fut` (the store write of the message at `seqs` in `queues`) fails, take the message
        out of the durable queues it still waits in."""

        def done(f: asyncio.Future[None]) -> None:
            if f.cancelled() or f.exception() is not None:
                drop_unstored(queues, seqs)
                if self.tx is not None:
                    self.tx_unstored = True

        fut.add_done_callback(done)


def drop_unstored(queues: Sequence[Queue], seqs: Sequence[int]) -> int:
    """Take the ready messages at `seqs` out of the durable `queues` (aligned): their store write
    failed, so their publishers are nacked. Returns how many were still ready."""
    pairs = zip(queues, seqs, strict=True)
    return sum(q.forget_unstored(seq) for q, seq in pairs if q.store is not None and not q.deleted)
