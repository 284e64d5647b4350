"""Publisher confirms, as rabbit_confirms keeps them: the publish sequence, acks coalesced into one
multiple ack per flush, nacks in order, persistent publishes confirmed after their store commit (in
publish order).

A persistent message is enqueued before its store commit (the writer groups commits; consumers
need not wait for disk). When the commit fails (disk full, store files gone) the publish is nacked;
the vhost's pipeline takes the message back out of the durable queues where it still waits.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from broker.entities.persistence import failed

if TYPE_CHECKING:
    from broker.entities.message_stats import VHostStats
    from broker.entities.persistence import Commit
    from broker.session.ports import ChannelHandle, Outbox


class _Waiting:
    """A confirm held until its store commit (or an earlier one) is done."""

    __slots__ = ("ack", "done", "seq")

    def __init__(self, seq: int, ack: bool, done: bool) -> None:
        self.seq = seq
        self.ack = ack
        self.done = done


class ConfirmTracker:
    """One channel in confirm mode: its publish sequence and the confirms it owes."""

    __slots__ = ("_ack_sent", "_ack_upto", "_channel", "_commit_wait", "_outbox", "_stats", "publish_seq")

    def __init__(self, channel: ChannelHandle, outbox: Outbox, stats: VHostStats) -> None:
        self._channel = channel
        self._outbox = outbox
        self._stats = stats
        self.publish_seq = 0
        self._ack_upto = 0  # acks not yet sent cover (_ack_sent, _ack_upto]
        self._ack_sent = 0
        self._commit_wait: deque[_Waiting] = deque()  # confirms waiting for store commits, in order

    def next_seq(self) -> int:
        """The sequence number of the publish being received."""
        seq = self.publish_seq + 1
        self.publish_seq = seq
        self._stats.received_confirm += 1
        return seq

    def confirm(self, seq: int, ack: bool) -> None:
        """Publish `seq` is settled (a nack when a queue refused it)."""
        if self._commit_wait:  # an earlier persistent publish is not committed yet
            self._commit_wait.append(_Waiting(seq, ack, True))
            return
        self._confirm_now(seq, ack)

    def confirm_stored(self, seq: int, ack: bool, commit: Commit) -> None:
        """Confirm `seq` once its store write committed (a nack if it failed), after every
        earlier publish's confirm."""
        waiting = _Waiting(seq, ack, False)
        self._commit_wait.append(waiting)
        commit.add_done_callback(lambda c: self._committed(waiting, c))

    def flush(self, upto: int | None = None) -> None:
        """Send one (multiple) ack covering everything confirmed since the last one."""
        top = self._ack_upto if upto is None else min(upto, self._ack_upto)
        if top <= self._ack_sent:
            return
        n = top - self._ack_sent
        self._outbox.send_confirm(self._channel.number, True, top, n > 1)
        self._stats.confirm += n
        self._ack_sent = top

    def _confirm_now(self, seq: int, ack: bool) -> None:
        if ack:
            self._ack_upto = seq
            self._outbox.want_flush_confirms(self._channel)
            return
        self.flush(upto=seq - 1)
        self._outbox.send_confirm(self._channel.number, False, seq, False)
        self._ack_sent = seq
        self._ack_upto = seq

    def _committed(self, waiting: _Waiting, commit: Commit) -> None:
        waiting.done = True
        if failed(commit):
            waiting.ack = False  # not durable: nack
        if not self._channel.open:
            return
        wait = self._commit_wait
        while wait and wait[0].done:
            head = wait.popleft()
            self._confirm_now(head.seq, head.ack)
