"""A channel's transaction (rabbit_channel's tx state): publishes routed at publish and delivered at
tx.commit, acks and rejects held until then, all given back by tx.rollback or a close."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.entities.persistence import failed

if TYPE_CHECKING:
    from broker.entities.persistence import Commit
    from broker.session.unacked import Settled, UnackedTracker


class Transaction:
    """The work a channel in tx mode holds until tx.commit. `tracker` settles what it held."""

    __slots__ = ("_acks", "_actions", "_rejects", "_tracker", "_unstored")

    def __init__(self, tracker: UnackedTracker) -> None:
        self._tracker = tracker
        self._actions: list[Callable[[], None]] = []  # publishes and rejects, in the order received
        self._acks: Settled = []
        self._rejects: Settled = []  # rejected or nacked inside the transaction: still owed
        self._unstored = False

    def publish(self, deliver: Callable[[], None]) -> None:
        """A publish routed now, delivered at commit (as rabbit_channel does)."""
        self._actions.append(deliver)

    def ack(self, items: Settled) -> None:
        self._acks.extend(items)

    def reject(self, items: Settled, requeue: bool) -> None:
        """A reject or nack waits for the commit; a rollback (or a close) gives the deliveries back
        as unacked, as RabbitMQ 3.10.8 does (a later reject of the same tag after a rollback is
        accepted there, not a 406 unknown delivery tag)."""
        tracker = self._tracker
        self._rejects.extend(items)
        self._actions.append(lambda: tracker.reject(items, requeue))

    def stored(self, commit: Commit) -> None:
        """The store write of a publish delivered by the commit is done (`Commit` callback)."""
        if failed(commit):
            self._unstored = True

    def commit(self) -> None:
        """Deliver the publishes and settle the rejects in order, then the acks."""
        actions, acks = self._actions, self._acks
        self._actions, self._acks, self._rejects = [], [], []
        for action in actions:
            action()
        self._tracker.ack(acks)

    def synced(self, commit: Commit) -> bool:
        """The store sync after a commit is done: whether every write of the commit is on disk (the
        sync alone cannot tell, as a later batch commits without the dropped writes)."""
        unstored, self._unstored = self._unstored, False
        return not (unstored or failed(commit))

    def rollback(self) -> None:
        """Drop the publishes; the acknowledged and rejected deliveries are unacked again."""
        held = self.take_held()
        self._actions = []
        self._tracker.restore(held)

    def take_held(self) -> Settled:
        """The deliveries acknowledged or rejected in the open transaction, taken out."""
        held = self._acks + self._rejects
        self._acks, self._rejects = [], []
        return held
