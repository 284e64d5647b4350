"""Transactions: publishes routed at publish and delivered at commit, acks and rejects held until
commit, all given back by rollback or a close."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from amqpwire.errors import AmqpError, ReplyCode
from broker.entities.persistence import failed
from broker.protocol import commands as C
from broker.protocol import replies
from broker.session.acks import AcksMixin

if TYPE_CHECKING:
    from broker.entities.persistence import Commit


class TxMixin(AcksMixin):
    """The channel's tx part (see the module docstring and `channel_base`)."""

    def on_tx_select(self, a: C.TxSelect) -> None:
        if self.confirm:
            raise AmqpError(406, "cannot switch from confirm to tx mode")
        if self.tx is None:
            self.tx = []
            self.tx_acks = []
        self.reply(replies.tx_select_ok())

    def on_tx_commit(self, a: C.TxCommit) -> None:
        if self.tx is None:
            raise AmqpError(406, "channel is not transactional")
        actions, acks = self.tx, self.tx_acks
        self.tx, self.tx_acks, self.tx_rejects = [], [], []
        for action in actions:  # the publishes, routed when they were published
            action()
        persistence = self.vhost.persistence
        if persistence is not None:
            self._store_settled(acks)
        self._count_acks(acks)
        for q in self._release(acks):
            q.try_deliver()
        if persistence is not None:  # commit-ok once the transaction's writes are on disk
            persistence.committed().add_done_callback(self._tx_synced)
            return
        self.reply(replies.tx_commit_ok())

    def _tx_synced(self, commit: Commit) -> None:
        unstored, self.tx_unstored = self.tx_unstored, False
        if not self.open:
            return
        if unstored or failed(commit):
            err = AmqpError(ReplyCode.INTERNAL_ERROR, "store write failed", hard=False, in_method=False)
            self.conn.close_channel(self, err)
            return
        self.reply(replies.tx_commit_ok())

    def on_tx_rollback(self, a: C.TxRollback) -> None:
        if self.tx is None:
            raise AmqpError(406, "channel is not transactional")
        # acknowledged- or rejected-in-tx deliveries become unacked again, in tag order
        pending = self.tx_acks + self.tx_rejects
        for t, u in pending:
            self.unacked[t] = u
        if pending:
            self.unacked_order = deque(sorted(set(self.unacked_order) | {t for t, _ in pending}))
        self.tx, self.tx_acks, self.tx_rejects = [], [], []
        self.reply(replies.tx_rollback_ok())
