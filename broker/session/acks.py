"""The unacked tracker as the transaction part reads it (`broker.session.tx` extends `AcksMixin`).

Acks and rejects are the tracker's (`broker.session.unacked`); a transaction holds them until
tx.commit, then settles them through these names, and tx.rollback puts them back in tag order.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from broker.session.channel_base import ChannelBase

if TYPE_CHECKING:
    from broker.entities.queues.catalog import Queue
    from broker.session.unacked import Settled


class AcksMixin(ChannelBase):
    """Settling as a transaction commits it, and the tag order its rollback restores."""

    @property
    def unacked_order(self) -> deque[int]:
        return self.tracker.order

    @unacked_order.setter
    def unacked_order(self, order: deque[int]) -> None:
        self.tracker.order = order

    def _release(self, items: Settled) -> list[Queue]:
        return self.tracker.release(items)

    def _count_acks(self, items: Settled) -> None:
        self.tracker.count_acks(items)

    def _store_settled(self, items: Settled) -> None:
        self.tracker.forget_stored(items)
