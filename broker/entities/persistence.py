"""What the entities tell a persistent store, as an injected object (`VHost.persistence`).

The entities decide *when* something durable changes; the object behind this protocol decides how
it is kept (broker.runtime.durability implements it over broker.store). A vhost without one keeps nothing,
and pays one `is None` test per event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from broker.entities.exchange import Exchange
    from broker.entities.message import StoredMessage
    from broker.entities.queues.base import Entry, Queue
    from broker.entities.queues.classic.paging import PageSpool
    from exchanges.base import Binding


class Commit(Protocol):
    """The completion of a store write (the broker's is an asyncio future): done once the write
    committed, or failed (cancelled, or an exception) when it never will."""

    def add_done_callback(self, fn: Callable[[Any], object], /) -> None: ...

    def cancelled(self) -> bool: ...

    def exception(self) -> BaseException | None: ...


def failed(commit: Commit) -> bool:
    """Whether a done `commit` failed: what it wrote is not kept."""
    return commit.cancelled() or commit.exception() is not None


H = TypeVar("H", contravariant=True)
"""The vhost a persistence is told about (the entities' VHost): a parameter, so this port names no
module above it."""


class Persistence(Protocol[H]):
    def exchange_declared(self, vhost: H, x: Exchange) -> None:
        """A durable exchange was declared."""
        ...

    def exchange_deleted(self, vhost: H, x: Exchange) -> None:
        """A durable exchange (and with it its bindings) is gone."""
        ...

    def binding_added(self, vhost: H, source: Exchange, binding: Binding) -> None:
        """A binding from a durable source; kept only if its destination is durable too."""
        ...

    def binding_removed(self, vhost: H, source: Exchange, binding: Binding) -> None: ...

    def queue_added(self, vhost: H, q: Queue) -> None:
        """A queue was added; when it is kept, its `store` attribute is set (the queue's marker
        that its messages are written)."""
        ...

    def queue_placed(self, vhost: H, q: Queue) -> None:
        """A kept replicated queue's members and leader were chosen: they are kept with its record,
        so a restart shows the same ones."""
        ...

    def queue_deleted(self, vhost: H, q: Queue) -> None:
        """A kept queue is gone, with its messages and bindings."""
        ...

    def messages_removed(self, q: Queue, entries: Sequence[Entry]) -> None:
        """Messages of a kept queue left it for good (expired, dropped, dead-lettered, purged)."""
        ...

    def queue_purged(self, q: Queue, ready: Sequence[Entry], paged: Sequence[int] = ()) -> None:
        """The ready messages of a kept queue were purged (its unacked ones stay): those in memory
        and, named only while some are unacked, the stored positions of its paged ones."""
        ...

    def spool_factory(self) -> Callable[[], PageSpool] | None:
        """Where queues page messages out of memory (broker.entities.queues.classic.paging), or None: no
        paging."""
        ...

    def publish(
        self, vhost: H, msg: StoredMessage, queues: Sequence[Queue]
    ) -> tuple[Commit | None, list[int]]:
        """Reserve a position in every queue and write `msg` once for the kept ones.

        Returns (the write's commit, or None when nothing was written; the reserved positions
        aligned with `queues`), to pass to `enqueue(msg, seq)`.
        """
        ...

    def publish_records(
        self, vhost: H, msgs: Sequence[StoredMessage], queue: Queue
    ) -> tuple[Commit | None, list[int]]:
        """`publish` of each of `msgs` to `queue` alone, as one write (a stream chunk)."""
        ...

    def committed(self) -> Commit:
        """A commit done once every write made so far has committed (tx.commit waits for it)."""
        ...

    # -- x-delayed-message: the messages a durable delayed exchange holds ------------------------

    def delayed_held(self, vhost: H, x: Exchange, key: int, due_ms: int, msg: StoredMessage) -> None:
        """The durable delayed exchange `x` holds `msg` until `due_ms` (wall-clock milliseconds),
        under `key` (unique in the vhost): kept, as the plugin keeps its delay table on disc, so a
        restart holds it again."""
        ...

    def delayed_released(self, vhost: H, keys: Iterable[int]) -> None:
        """Held messages left the delay table (routed, or their exchange is gone): forget them."""
        ...

    # -- quorum queues and streams: everything kept, state per position ------------------------

    def positions_removed(self, q: Queue, seqs: Iterable[int]) -> None:
        """Positions of a kept queue left it for good (a stream's retention, a held dead letter
        forwarded)."""
        ...

    def delivery_state(self, q: Queue, states: Iterable[tuple[int, bool, int, int]]) -> None:
        """(seq, checked_out, delivery_count, return_order) of quorum messages: a restart returns
        the checked-out ones, counting the return; the others keep their count and place."""
        ...

    def dead_letters_held(self, q: Queue, held: Iterable[tuple[int, str, int]]) -> None:
        """(seq, reason, order) of quorum messages that left the queue for its dead-letter store
        (at-least-once, no queue took them): their positions stay, a restart holds them again.
        Once forwarded, `positions_removed` forgets them."""
        ...

    def stream_timestamps(self, q: Queue, stamps: Iterable[tuple[int, int]]) -> None:
        """(seq, wall-clock ms) of a stream's chunks, so timestamp offsets resolve after a restart."""
        ...

    def stream_written_beside(self, q: Queue) -> None:
        """The stream `q` is about to write a chunk outside this port (a stream-protocol publish
        frame kept whole): what the port still holds of it is written first, so the store keeps
        the stream's positions in order."""
        ...

    def can_read_back(self, q: Queue) -> bool:
        """Whether `read_page` can return the kept queue's messages (then bodies may leave memory)."""
        ...

    def read_page(self, q: Queue, seq: int, limit: int) -> list[tuple[int, StoredMessage]]:
        """Up to `limit` committed messages of the kept queue from position `seq` on, in order."""
        ...

    def when_committed(self, q: Queue, callback: Callable[[], None]) -> None:
        """Call `callback` (on the event loop) once every write made so far has committed."""
        ...
