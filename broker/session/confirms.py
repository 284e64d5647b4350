"""Publisher confirms: acks coalesced per flush, nacks in order, persistent publishes confirmed
after their store commit (in publish order)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amqpwire.errors import AmqpError
from broker import replies
from broker.protocol import commands as C
from broker.protocol import methods as M
from broker.session.delivery import DeliveryMixin

if TYPE_CHECKING:
    import asyncio


class ConfirmsMixin(DeliveryMixin):
    """The channel's confirms part (see the module docstring and `channel_base`)."""

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
        multiple = top - self._ack_sent > 1
        self.reply(M.confirm_payload(True, top, multiple))
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
