"""The in-memory window of a classic queue: how many messages, or body bytes, it keeps before it
pages the rest out (`broker.entities.queues.classic.paging`, which loads on a queue's first page-out, so
an idle
broker does not carry it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections import deque

    from broker.entities.queues.base import Entry
    from broker.entities.queues.classic.queue import ClassicQueue


#: Messages a queue keeps in memory before it pages (RabbitMQ's classic queues keep a few thousand).
WINDOW = 2048
#: ... or body bytes, whichever comes first: a queue of large messages pages sooner.
WINDOW_BYTES = 8 << 20
#: A level's deque is refilled from its tail when it holds fewer messages than this.
REFILL_BELOW = 256


def page_out(q: ClassicQueue, level: deque[Entry], entry: Entry) -> bool:
    """Past the window only: `broker.entities.queues.classic.paging.page_out`, loading it on first use."""
    from broker.entities.queues.classic.paging import page_out as first_page_out

    return first_page_out(q, level, entry)
