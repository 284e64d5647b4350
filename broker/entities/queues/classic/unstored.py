"""Taking a ready message back out of a classic (or quorum) queue when its store write failed.

The publisher is nacked, so the queue must not keep what a restart could not bring back. The
message is recent: in its pager when the window was full, else near the tail of its level, so the
search runs from the tail and stops at the first older entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.entities.queues.base import Entry
    from broker.entities.queues.classic.queue import ClassicQueue


def forget_ready(q: ClassicQueue, seq: int) -> bool:
    """Remove the ready message at `seq` from `q`; False when it is no longer ready (delivered,
    expired or dropped already). Length limits are re-judged (a reject-publish queue may reopen)."""
    pager = q.pager
    if pager is not None and pager.forget(seq):  # paged out behind the in-memory window
        q._enforce_limits()
        return True
    for level in q.levels:
        index = _find(level, seq)
        if index is None:
            continue
        entry = level[index]
        del level[index]
        q.count -= 1
        q.bytes -= len(entry.msg.body)
        q._enforce_limits()
        return True
    return False


def _find(level: Sequence[Entry], seq: int) -> int | None:
    for index in range(len(level) - 1, -1, -1):
        s = level[index].seq
        if s == seq:
            return index
        if s < seq:
            return None
    return None
