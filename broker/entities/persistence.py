"""What the entities tell a persistent store, as an injected object (`VHost.persistence`).

The entities decide *when* something durable changes; the object behind this protocol decides how
it is kept (broker.durability implements it over broker.store). A vhost without one keeps nothing,
and pays one `is None` test per event.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from broker.entities.exchange import Exchange
    from broker.entities.queue_type import Entry, Queue
    from broker.entities.vhost import VHost
    from broker.message import StoredMessage
    from exchanges.base import Binding


class Persistence(Protocol):
    def exchange_declared(self, vhost: VHost, x: Exchange) -> None:
        """A durable exchange was declared."""
        ...

    def exchange_deleted(self, vhost: VHost, x: Exchange) -> None:
        """A durable exchange (and with it its bindings) is gone."""
        ...

    def binding_added(self, vhost: VHost, source: Exchange, binding: Binding) -> None:
        """A binding from a durable source; kept only if its destination is durable too."""
        ...

    def binding_removed(self, vhost: VHost, source: Exchange, binding: Binding) -> None: ...

    def queue_added(self, vhost: VHost, q: Queue) -> None:
        """A queue was added; when it is kept, its `store` attribute is set (the queue's marker
        that its messages are written)."""
        ...

    def queue_deleted(self, vhost: VHost, q: Queue) -> None:
        """A kept queue is gone, with its messages and bindings."""
        ...

    def messages_removed(self, q: Queue, entries: Sequence[Entry]) -> None:
        """Messages of a kept queue left it for good (expired, dropped, dead-lettered, purged)."""
        ...

    def queue_purged(self, q: Queue, ready: Sequence[Entry]) -> None:
        """The ready messages of a kept queue were purged (its unacked ones stay)."""
        ...

    def publish(
        self, vhost: VHost, msg: StoredMessage, queues: Sequence[Queue]
    ) -> tuple[Awaitable[None] | None, list[int]]:
        """Reserve a position in every queue and write `msg` once for the kept ones.

        Returns (a commit awaitable or None when nothing was written, the reserved positions
        aligned with `queues`), to pass to `enqueue(msg, seq)`.
        """
        ...
