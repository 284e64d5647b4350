"""Publisher confirms: acks coalesced per flush, nacks in order, persistent publishes confirmed
after their store commit (in publish order).

A persistent message is enqueued before its store commit (the writer groups commits; consumers
need not wait for disk). When the commit fails (disk full, store files gone) the publish is nacked;
the vhost's pipeline takes the message back out of the durable queues where it still waits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amqpwire.errors import AmqpError
from broker.entities.persistence import failed
from broker.protocol import commands as C
from broker.protocol import methods as M
from broker.protocol import replies
from broker.session.delivery import DeliveryMixin

if TYPE_CHECKING:
    from broker.entities.persistence import Commit


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

    def _confirm_stored(self, seq: int, ack: bool, commit: Commit) -> None:
        """Confirm `seq` once its store write committed (a nack if it failed), after every
        earlier publish's confirm."""
        waiting = [seq, ack, False]
        self._commit_wait.append(waiting)
        commit.add_done_callback(lambda c: self._committed(waiting, c))

    def _committed(self, waiting: list[Any], commit: Commit) -> None:
        waiting[2] = True
        if failed(commit):
            waiting[1] = False  # not durable: nack
        if not self.open:
            return
        wait = self._commit_wait
        while wait and wait[0][2]:
            seq, ack, _ = wait.popleft()
            self._confirm_now(seq, ack)
