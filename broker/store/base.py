"""The store interface the broker talks to, `StoreError`, and `NullStore` (`--data-dir :memory:`).

Every mutating method is a plain synchronous call made on the broker's event loop: it only
*enqueues* the change, so AMQP handlers (which are synchronous) never block on disk. Changes are
applied in call order, grouped into as few transactions as the disk allows. Only `persist` and
`sync` hand back a future, because only publisher confirms (and shutdown) must wait for a commit.
"""

from __future__ import annotations

import asyncio
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from broker.store import records as rec
from broker.store.page_spool import PageDirectory


class StoreError(Exception):
    """The store cannot be used: the message is one line naming the file and the problem."""


@dataclass(slots=True)
class StoreStats:
    """Counters the writer keeps; tests and `bench/persistence.py` read them to see grouping."""

    transactions: int = 0
    operations: int = 0
    messages_persisted: int = 0
    largest_batch: int = 0


class Store:
    """Durable state of one broker.

    Lifecycle: `open` (module function `broker.store.open_store`) checks the file, `load()` returns
    the snapshot to rebuild from, `start(loop)` starts writing, `await close()` commits what is
    pending and releases the data directory. Every store implements `load`, `start`, `close` and
    `sync`; the writes keep nothing unless a store overrides them.
    """

    persistent: bool
    """False for `NullStore`: the broker may skip all store bookkeeping (and confirm at once)."""
    location: str
    stats: StoreStats
    pages: PageDirectory | None = None
    """Where queues page messages out of memory (broker.entities.queues.classic.paging); None: they do not."""

    def load(self, *, messages: bool = True) -> rec.Snapshot:
        """Everything durable, in rebuild order. Call once, before `start`. With `messages`
        False, the snapshot has each queue's depth instead of its messages (`read_queue` reads
        them, as a restarted broker does while its queues drain)."""
        raise NotImplementedError

    def read_queue(
        self, vhost: str, queue: str, after: int, upto: int, limit: int
    ) -> list[tuple[int, bool, str, str, bytes, bytes]]:
        """Up to `limit` committed messages of a queue with `after` < seq <= `upto`, in seq order,
        as (seq, redelivered, exchange, routing key, properties, body)."""
        return []

    def read_stream_index(
        self, vhost: str, queue: str, after: int, limit: int
    ) -> list[tuple[int, int, int, int, int, int]]:
        """Up to `limit` index rows of a stream after position `after`, in seq order, as (seq,
        chunk time ms or 0, exchange, routing key, properties and body sizes in bytes): what a
        restart rebuilds a stream's log from, its bodies left in the store."""
        return []

    def queue_seqs(self, vhost: str, queue: str, after: int, upto: int) -> list[int]:
        """The committed positions of a queue with `after` < seq <= `upto`."""
        return []

    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Begin accepting writes; futures are resolved on `loop` (default: the running loop)."""
        raise NotImplementedError

    async def close(self) -> None:
        """Commit everything enqueued so far, then release the files. Idempotent."""
        raise NotImplementedError

    # -- metadata ---------------------------------------------------------------------------------
    # The writes below keep nothing unless a store overrides them (`NullStore` keeps nothing; a
    # persistent store overrides every one: tests/unit/test_store_overrides.py checks).

    def put_vhost(self, vhost: rec.VHostRecord) -> None:
        """Insert or update a vhost."""

    def delete_vhost(self, name: str) -> None:
        """Also removes every exchange, queue, binding, policy, permission and message of the vhost."""

    def put_user(self, user: rec.UserRecord) -> None:
        """Insert or update a user."""

    def delete_user(self, name: str) -> None:
        """Also removes the user's permissions."""

    def put_permission(self, permission: rec.PermissionRecord) -> None:
        """Insert or replace (same vhost + user)."""

    def delete_permission(self, vhost: str, user: str) -> None:
        """Forget the user's permissions in the vhost."""

    def put_policy(self, policy: rec.PolicyRecord) -> None:
        """Insert or replace (same vhost + name); a replaced policy keeps its place in load order."""

    def delete_policy(self, vhost: str, name: str) -> None:
        """Forget a policy."""

    def put_exchange(self, exchange: rec.ExchangeRecord) -> None:
        """Insert or update a durable exchange (an update keeps its place in load order)."""

    def delete_exchange(self, vhost: str, name: str) -> None:
        """Also removes bindings whose source or destination is this exchange."""

    def put_queue(self, queue: rec.QueueRecord) -> None:
        """Insert or update a durable queue (an update keeps its place and its messages)."""

    def delete_queue(self, vhost: str, name: str) -> None:
        """Also removes the queue's messages and the bindings to it."""

    def add_binding(self, binding: rec.BindingRecord) -> None:
        """Append a binding; re-adding an identical one is ignored and keeps the original position,
        as `VHost.add_binding` ignores it (so the consistent-hash ring is unchanged)."""

    def remove_binding(self, binding: rec.BindingRecord) -> None:
        """Forget a binding."""

    # -- messages ---------------------------------------------------------------------------------

    def persist(
        self,
        vhost: str,
        queues: Sequence[tuple[str, int]],
        properties: bytes,
        body: bytes,
        exchange: str,
        routing_key: str,
    ) -> asyncio.Future[None]:
        """Store one published message for each `(queue, seq)` (one body row, shared).

        The returned future is resolved once the transaction holding the write has committed, or
        fails with `StoreError`; send the publisher confirm from its done-callback, never earlier.
        A store that keeps nothing resolves it as `sync` does.
        """
        return self.write_messages(vhost, [(queues, properties, body, exchange, routing_key)])

    def persist_records(
        self,
        vhost: str,
        queue: str,
        records: Sequence[tuple[int, bytes, bytes, str, str]],
        timestamp: int = 0,
    ) -> asyncio.Future[None]:
        """Store (seq, properties, body, exchange, routing key) messages of one queue, in order, as
        one write (a stream chunk), with the chunk's time (ms; 0: the records join the chunk
        before them); the future resolves once all of them committed."""
        fut = self.write_messages(vhost, [([(queue, seq)], p, b, x, rk) for seq, p, b, x, rk in records])
        if timestamp and records:
            self.set_timestamps(vhost, queue, [(records[0][0], timestamp)])
        return fut

    def write_messages(self, vhost: str, messages: Sequence[rec.MessageWrite]) -> asyncio.Future[None]:
        """What `persist` and `persist_records` come down to: each message stored once, at each of
        its positions, in one write; the future resolves once all of them committed (as `persist`
        says). A store that keeps nothing resolves it as `sync` does."""
        return self.sync()

    #: Whether `put_stream_chunk` keeps a chunk as osiris writes it (else a stream writes its
    #: records with `persist_records`).
    keeps_stream_chunks = False

    def put_stream_chunk(
        self, vhost: str, queue: str, first: int, timestamp: int, crc: int, sizes: array[int], section: bytes
    ) -> asyncio.Future[None]:
        """Store one stream chunk at positions `first` on, as osiris's entry section (`section`:
        each record as `size:u32` then its bytes; `sizes` the record sizes, `crc` the section's
        CRC32) with its time, ms; read back with `read_stream_chunk` or, record by record, with the
        stream's other reads. Only when `keeps_stream_chunks`."""
        raise NotImplementedError

    def read_stream_chunk(self, vhost: str, queue: str, first: int) -> tuple[int, int, bytes] | None:
        """The CRC, record count and entry section of the chunk `put_stream_chunk` stored at
        `first` (None: none)."""
        return None

    def remove_stream_head(self, vhost: str, queue: str, upto: int) -> None:
        """A stream's retention dropped its positions up to `upto` (always its oldest ones)."""
        self.remove_messages(vhost, queue, range(1, upto + 1))

    def remove_messages(self, vhost: str, queue: str, seqs: Iterable[int]) -> None:
        """Acked, dropped, expired or dead-lettered: forget these positions (unknown ones are ignored)."""

    def mark_redelivered(self, vhost: str, queue: str, seqs: Iterable[int]) -> None:
        """Record that these messages would come back redelivered after a restart."""

    def purge_queue(self, vhost: str, queue: str) -> None:
        """Remove every message of the queue (queue.purge); the queue itself stays."""

    def sync(self) -> asyncio.Future[None]:
        """A future resolved once everything enqueued before this call has committed."""
        raise NotImplementedError

    # Quorum queues and streams keep state per position beside the message; a store without a
    # place for it keeps nothing (a restart then counts a delivered message once, as before).

    def set_delivery_state(
        self, vhost: str, queue: str, states: Iterable[tuple[int, bool, int, int]]
    ) -> None:
        """(seq, checked_out, delivery_count, return_order) of quorum messages: what a restart
        returns, counts and where it puts them."""
        return None

    def set_timestamps(self, vhost: str, queue: str, stamps: Iterable[tuple[int, int]]) -> None:
        """(seq, ms) of stream messages: the chunk time `x-stream-offset` timestamps resolve against."""
        return None

    def set_dead_letters(self, vhost: str, queue: str, held: Iterable[tuple[int, str, int]]) -> None:
        """(seq, reason, order) of quorum messages now held in their queue's dead-letter store: a
        restart holds them again, in that order, instead of putting them back in the queue."""
        return None

    # What a stream tracks beside its records (osiris keeps it in the log): rows of (kind,
    # reference, value), one per (kind, reference); deleting the queue or vhost forgets them. A
    # store without a place for them keeps none.

    def put_stream_tracking(
        self, vhost: str, queue: str, rows: Iterable[tuple[int, str, int]]
    ) -> asyncio.Future[None] | None:
        """Set the rows' values; the future (None: nothing kept) resolves once they committed."""
        return None

    def read_stream_tracking(self, vhost: str, queue: str) -> list[tuple[int, str, int]]:
        """The committed rows of a stream."""
        return []

    # The messages durable x-delayed-message exchanges hold; a store without a place for them
    # keeps none (they are then gone after a restart). Deleting an exchange or a vhost also
    # forgets those it held.

    def put_delayed(self, record: rec.DelayedRecord) -> None:
        """A durable delayed exchange holds a message until its due time."""
        return None

    def remove_delayed(self, vhost: str, keys: Iterable[int]) -> None:
        """Held messages were released or dropped (unknown keys are ignored)."""
        return None


class NullStore(Store):
    """`--data-dir :memory:`: keeps nothing, so a restart starts empty, as the broker did before.

    Futures come back already resolved, but a broker should test `persistent` and not ask at all.
    """

    persistent = False

    def __init__(self) -> None:
        self.location = ":memory:"
        self.stats = StoreStats()
        self._loop: asyncio.AbstractEventLoop | None = None

    def load(self, *, messages: bool = True) -> rec.Snapshot:
        return rec.Snapshot()

    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop

    async def close(self) -> None:
        return None

    def sync(self) -> asyncio.Future[None]:
        loop = self._loop or asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        fut.set_result(None)
        return fut
