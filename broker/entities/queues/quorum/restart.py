"""A quorum queue's messages put back at boot in the order and with the counts rabbit_fifo has.

rabbit_fifo recovers its state from the Raft log: ready messages in their order (re-enqueued ones
after what was published before their return), `returns` ahead of them, and the messages each
consumer had checked out. The new leader monitors those consumers, learns they are gone, and
returns their messages (`return_all`: each return counts as a delivery; one over the delivery limit
is dead-lettered; the rest go to the back of `returns`).

The store keeps, per message, whether it was checked out, its delivery count and a return order
(`QuorumQueue` writes them): < 0 for a message waiting in `returns` (-rank, ranks grow with each
return), > 0 for one re-enqueued at the back (`back_order`), 0 for a message in publish order.
A message held in the queue's dead-letter store is marked with its reason instead and goes back
there, not into the queue.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from typing import Generic, TypeVar

from broker.entities.queues.base import Entry

#: A message re-enqueued at the back sorts after every message published before its return.
ORDER_SPAN = 1 << 20
#: The quorum queue's ready levels, served in this order: returned messages waiting at the front,
#: then the others.
RETURNS = 0
MESSAGES = 1

E = TypeVar("E", bound=Entry)


def back_order(last_seq: int, rank: int) -> int:
    """The return order of a message re-enqueued at the back when `last_seq` was the newest."""
    return last_seq * ORDER_SPAN + rank % ORDER_SPAN


def rank_of(order: int) -> int:
    return -order if order < 0 else order % ORDER_SPAN


class BootRestore(Generic[E]):
    """The queue's lists as messages come back from the store (in seq order, any interleaving of
    returns and ready messages): each lands at its sorted place, which `place` computes."""

    def __init__(self, state: dict[int, tuple[int, int, int]]) -> None:
        self.state = state
        self.return_keys: list[tuple[int, ...]] = []
        self.message_keys: list[tuple[int, ...]] = []
        self.returned: list[E] = []  # returned by the restart, in their `returns` order
        self.rank = 0  # the highest return rank stored
        self.scheduled = False  # the queue's after-boot step is due
        #: seq -> (reason, order) of the messages held in the dead-letter store
        # (broker.entities.queues.quorum.dlx)
        self.held: Mapping[int, tuple[str, int]] = {}

    def counts(self, seq: int) -> tuple[int, int]:
        """(delivery_count, return_order) stored for `seq`."""
        count, order, _ts = self.state.get(seq, (0, 0, 0))
        self.rank = max(self.rank, rank_of(order))
        return count, order

    def place(self, entry: E, order: int, checked_out: bool) -> tuple[int, int]:
        """Where a restored entry goes, as (level, index) in the queue's ready levels: where
        rabbit_fifo has it after its recovery: waiting returns by rank, then the restart's returns
        (by position), then the ready messages."""
        if checked_out:
            self.returned.append(entry)  # restores come in seq order: so is their place
            return RETURNS, self._insert(self.return_keys, (1, 0, entry.seq))
        if order < 0:
            return RETURNS, self._insert(self.return_keys, (0, -order, entry.seq))
        key = order if order > 0 else entry.seq * ORDER_SPAN
        return MESSAGES, self._insert(self.message_keys, (key, entry.seq))

    @staticmethod
    def _insert(keys: list[tuple[int, ...]], key: tuple[int, ...]) -> int:
        i = bisect.bisect(keys, key)
        keys.insert(i, key)
        return i
