"""The entities' persistence over `broker.store`: records, the rebuild at boot, message writes.

`StorePersistence` implements broker.entities.persistence.Persistence; the server gives one to
every vhost of a broker with a persistent store (`attach`). A vhost without one keeps nothing and
pays one attribute test per event. The session layer calls `stored_seqs` and `is_persistent` for
deliveries and acks.

What is kept (as RabbitMQ): durable exchanges, durable non-exclusive queues, bindings whose source
and destination are both durable (amq.* exchanges are durable), persistent messages
(delivery_mode 2) in durable queues, and the messages durable x-delayed-message exchanges hold
(whatever their delivery mode: the plugin's delay table is on disc). Transient things are gone
after a restart.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from amqpwire.errors import AmqpError
from broker.entities.message import DELIVERY_MODE_FLAG, StoredMessage, is_persistent
from broker.store import (
    BindingRecord,
    DelayedRecord,
    ExchangeRecord,
    PermissionRecord,
    QueueRecord,
    Snapshot,
    Store,
    UserRecord,
    VHostRecord,
)
from exchanges.base import Binding, Destination
from exchanges.route_order import route_table_order

if TYPE_CHECKING:
    from broker.entities.exchange import Exchange
    from broker.entities.queues.catalog import Entry, Queue
    from broker.entities.queues.classic.paging import PageSpool
    from broker.entities.users import Permission, User
    from broker.entities.vhost import VHost


class VHostRegistry(Protocol):
    """What the rebuild needs of the broker: its vhosts, and new ones on its clock."""

    @property
    def vhosts(self) -> MutableMapping[str, VHost]: ...

    def new_vhost(self, name: str) -> VHost: ...


log = logging.getLogger("hashbroker.durability")

__all__ = ["DELIVERY_MODE_FLAG", "StorePersistence", "attach", "is_persistent", "rebuild", "stored_seqs"]


def is_stored(entry: Entry) -> bool:
    """Whether the store holds the entry: persistent messages, and every message of a type whose
    entries say they are always kept (quorum queues)."""
    return entry.always_stored or is_persistent(entry.msg)


def stored_seqs(entries: Iterable[Entry]) -> list[int]:
    """Positions of the entries the store holds (see `is_stored`; seq 0 was never enqueued)."""
    return [e.seq for e in entries if e.seq and is_stored(e)]


# -- records -----------------------------------------------------------------------------------------


def exchange_record(vhost: VHost, x: Exchange) -> ExchangeRecord:
    return ExchangeRecord(vhost.name, x.name, x.type_name, x.durable, x.auto_delete, x.internal, x.arguments)


def queue_record(vhost: VHost, q: Queue) -> QueueRecord:
    """The queue's stored record, with a replicated queue's placement once it has one."""
    return QueueRecord(
        vhost.name, q.name, True, False, q.auto_delete, q.arguments, tuple(q.members), q.leader or ""
    )


def binding_record(vhost: VHost, source: str, b: Binding) -> BindingRecord:
    d = b.destination
    return BindingRecord(vhost.name, source, d.kind, d.name, b.key, b.arguments)


def destination_durable(vhost: VHost, dest: Destination) -> bool:
    if dest.kind == "queue":
        q = vhost.queues.get(dest.name)
        return q is not None and q.store is not None
    x = vhost.exchanges.get(dest.name)
    return x is not None and x.durable


# -- the entities' persistence -------------------------------------------------------------------------


class StorePersistence:
    """broker.entities.persistence.Persistence over one `Store` (shared by every vhost)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        #: the records streams took since the loop last turned, one `_StreamChunk` per stream,
        #: written at the end of the turn as chunk rows (`_write_chunks`)
        self._chunks: dict[int, _StreamChunk | None] = {}

    def exchange_declared(self, vhost: VHost, x: Exchange) -> None:
        self.store.put_exchange(exchange_record(vhost, x))

    def exchange_deleted(self, vhost: VHost, x: Exchange) -> None:
        self.store.delete_exchange(vhost.name, x.name)

    def binding_added(self, vhost: VHost, source: Exchange, binding: Binding) -> None:
        if destination_durable(vhost, binding.destination):
            self.store.add_binding(binding_record(vhost, source.name, binding))

    def binding_removed(self, vhost: VHost, source: Exchange, binding: Binding) -> None:
        self.store.remove_binding(binding_record(vhost, source.name, binding))

    def queue_added(self, vhost: VHost, q: Queue) -> None:
        if q.durable and q.exclusive_owner is None:
            q.store = self.store
            self.store.put_queue(queue_record(vhost, q))

    def queue_placed(self, vhost: VHost, q: Queue) -> None:
        self.store.put_queue(queue_record(vhost, q))

    def queue_deleted(self, vhost: VHost, q: Queue) -> None:
        self._write_chunks()
        self.store.delete_queue(vhost.name, q.name)

    def messages_removed(self, q: Queue, entries: Sequence[Entry]) -> None:
        self.store.remove_messages(q.vhost.name, q.name, stored_seqs(entries))

    def queue_purged(self, q: Queue, ready: Sequence[Entry], paged: Sequence[int] = ()) -> None:
        self._write_chunks()
        if q.purge_keeps_stored():  # e.g. the unacked messages stay stored
            self.store.remove_messages(q.vhost.name, q.name, [*stored_seqs(ready), *paged])
        else:
            self.store.purge_queue(q.vhost.name, q.name)

    def spool_factory(self) -> Callable[[], PageSpool] | None:
        pages = self.store.pages
        return pages.new_spool if pages is not None else None

    def publish(
        self, vhost: VHost, msg: StoredMessage, queues: Sequence[Queue]
    ) -> tuple[asyncio.Future[None] | None, list[int]]:
        """Reserve the next position in every queue and write `msg` once for the kept ones.

        Positions are taken *before* enqueueing so that the write is submitted before anything an
        enqueue may trigger (an immediate no-ack delivery removes the message again, a drop-head
        dead-letters it): the store applies changes in order.
        """
        seqs: list[int] = []
        targets: list[tuple[str, int]] = []
        streamed: list[asyncio.Future[None]] = []
        persistent = is_persistent(msg)
        for q in queues:
            q.seq += 1
            seqs.append(q.seq)
            if q.store is not None and (persistent or q.keeps_transient):
                if q.type_name == "stream" and self._stream_wrote_this_turn(q):
                    streamed.append(self._take_record(vhost, q, q.seq, msg))
                else:
                    targets.append((q.name, q.seq))
        if not targets:
            if not streamed:
                return None, seqs
            return (streamed[0] if len(streamed) == 1 else _all_of(streamed)), seqs
        stored = self.store.persist(vhost.name, targets, msg.props, msg.body, msg.exchange, msg.routing_key)
        return (_all_of([stored, *streamed]) if streamed else stored), seqs

    def _stream_wrote_this_turn(self, q: Queue) -> bool:
        """Whether the stream `q` took a record since the loop last turned. Its first one is
        written at once, a row of its own, as its log makes it a chunk alone (the writer was
        idle); the others of the turn join a chunk the turn's end writes as one row
        (`_take_record`). Without a running loop every record is written at once."""
        chunks = self._chunks
        key = id(q)
        if key in chunks:
            return True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        if not chunks:
            loop.call_soon(self._write_chunks)
        chunks[key] = None
        return False

    def _take_record(self, vhost: VHost, q: Queue, seq: int, msg: StoredMessage) -> asyncio.Future[None]:
        """Keep `msg` at `seq` of the stream `q` in the chunk its records of this turn make;
        returns that chunk's commit."""
        key = id(q)
        chunk = self._chunks[key]
        if chunk is None:
            commit: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            chunk = self._chunks[key] = _StreamChunk(self.store, vhost.name, q.name, commit)
        elif seq != chunk.next_seq:
            chunk.cut()  # positions not consecutive (a segment roll's gap): a chunk row of their own
        chunk.add(seq, msg)
        return chunk.commit

    def _write_chunks(self) -> None:
        """Write what streams took since the loop last turned: before any other write that must
        follow it in the store (the stream's retention, a delete, a sync), and at the turn's end."""
        if self._chunks:
            chunks, self._chunks = self._chunks, {}
            for chunk in chunks.values():
                if chunk is not None:
                    chunk.close()

    def publish_records(
        self, vhost: VHost, msgs: Sequence[StoredMessage], queue: Queue
    ) -> tuple[asyncio.Future[None] | None, list[int]]:
        self._write_chunks()
        first = queue.seq + 1
        queue.seq += len(msgs)
        seqs = list(range(first, first + len(msgs)))
        if queue.store is None or not msgs:
            return None, seqs
        if not queue.keeps_transient:
            kept = [(s, m) for s, m in zip(seqs, msgs, strict=True) if is_persistent(m)]
        else:
            kept = list(zip(seqs, msgs, strict=True))
        if not kept:
            return None, seqs
        rows = [(s, m.props, m.body, m.exchange, m.routing_key) for s, m in kept]
        return self.store.persist_records(vhost.name, queue.name, rows), seqs

    def committed(self) -> asyncio.Future[None]:
        self._write_chunks()
        return self.store.sync()

    def delayed_held(self, vhost: VHost, x: Exchange, key: int, due_ms: int, msg: StoredMessage) -> None:
        record = DelayedRecord(vhost.name, key, x.name, due_ms, msg.routing_key, msg.props, msg.body)
        self.store.put_delayed(record)

    def delayed_released(self, vhost: VHost, keys: Iterable[int]) -> None:
        self.store.remove_delayed(vhost.name, keys)

    # -- quorum queues and streams ---------------------------------------------------------------

    def positions_removed(self, q: Queue, seqs: Iterable[int]) -> None:
        self._write_chunks()
        if q.type_name == "stream":  # retention drops a stream's oldest positions, whole chunks
            upto = max(seqs, default=0)
            if upto:
                self.store.remove_stream_head(q.vhost.name, q.name, upto)
            return
        self.store.remove_messages(q.vhost.name, q.name, seqs)

    def delivery_state(self, q: Queue, states: Iterable[tuple[int, bool, int, int]]) -> None:
        self.store.set_delivery_state(q.vhost.name, q.name, states)

    def dead_letters_held(self, q: Queue, held: Iterable[tuple[int, str, int]]) -> None:
        self.store.set_dead_letters(q.vhost.name, q.name, held)

    def stream_timestamps(self, q: Queue, stamps: Iterable[tuple[int, int]]) -> None:
        chunk = self._chunks.get(id(q))
        if chunk is None:
            self.store.set_timestamps(q.vhost.name, q.name, stamps)
            return
        for seq, ms in stamps:  # a record not held here was written already: the update follows it
            if not chunk.stamp(seq, ms):
                self.store.set_timestamps(q.vhost.name, q.name, [(seq, ms)])

    def can_read_back(self, q: Queue) -> bool:
        return hasattr(self.store, "read_stream_page")

    def read_page(self, q: Queue, seq: int, limit: int) -> list[tuple[int, StoredMessage]]:
        rows = self.store.read_stream_page(q.vhost.name, q.name, seq, limit)  # type: ignore[attr-defined]
        return [(s, StoredMessage(x, rk, props, body)) for s, props, body, x, rk in rows]

    def when_committed(self, q: Queue, callback: Callable[[], None]) -> None:
        self._write_chunks()
        self.store.sync().add_done_callback(lambda _f: callback())

    def stream_written_beside(self, q: Queue) -> None:
        self._write_chunks()


#: Records (and bytes) a stream's turn chunk holds before they are written as a row of their own.
_CHUNK_RECORDS = 4096
_CHUNK_BYTES = 1 << 20


class _StreamChunk:
    """The records one stream took in one loop turn after its first, written as chunk rows as
    osiris's writer makes a chunk of what its mailbox held: one row and one store statement per
    chunk instead of two rows per record, and a restart rebuilds the index from each row's sizes.
    The stream's own chunk starts (`stamp`) cut it, so no row spans two of the log's chunks
    (retention drops whole rows). One `commit` for the publishers of all its records, done once
    every row committed."""

    __slots__ = ("_bytes", "_parts", "_queue", "_rows", "_stamp", "_store", "_vhost", "commit", "first")

    def __init__(self, store: Store, vhost: str, queue: str, commit: asyncio.Future[None]) -> None:
        self._store, self._vhost, self._queue = store, vhost, queue
        self.commit = commit
        self.first = 0
        self._rows: list[tuple[int, bytes, bytes, str, str]] = []
        self._bytes = 0
        self._stamp = 0
        self._parts: list[asyncio.Future[None]] = []

    @property
    def next_seq(self) -> int:
        return self.first + len(self._rows) if self._rows else 0

    def add(self, seq: int, msg: StoredMessage) -> None:
        if not self._rows:
            self.first = seq
        self._rows.append((seq, msg.props, msg.body, msg.exchange, msg.routing_key))
        self._bytes += len(msg.body)
        if len(self._rows) >= _CHUNK_RECORDS or self._bytes >= _CHUNK_BYTES:
            self.cut()

    def stamp(self, seq: int, ms: int) -> bool:
        """The stream started a chunk at `seq` (its time `ms`): a row starts there. False when
        `seq` is not held here."""
        rows = self._rows
        if not rows or not self.first <= seq < self.first + len(rows):
            return False
        if seq != self.first:
            at = seq - self.first
            self._rows, rest = rows[:at], rows[at:]
            self.cut()
            self._rows, self.first = rest, seq
            self._bytes = sum(len(r[2]) for r in rest)
        self._stamp = ms
        return True

    def cut(self) -> None:
        """Write the records held as one chunk row; later ones start another."""
        if self._rows:
            self._parts.append(self._store.persist_records(self._vhost, self._queue, self._rows, self._stamp))
            self._rows, self._bytes, self._stamp = [], 0, 0

    def close(self) -> None:
        """Write the rest; `commit` follows the rows' writes."""
        self.cut()
        _follow(self._parts, self.commit)


def _follow(parts: Sequence[asyncio.Future[None]], commit: asyncio.Future[None]) -> None:
    """Settle `commit` as the writes `parts` settle: done once all are, failed if one failed."""
    left = len(parts)
    if not left:
        commit.set_result(None)
        return

    def settled(part: asyncio.Future[None]) -> None:
        nonlocal left
        left -= 1
        if commit.done():
            return
        if part.cancelled():
            commit.cancel()
        elif (exc := part.exception()) is not None:
            commit.set_exception(exc)
        elif not left:
            commit.set_result(None)

    for part in parts:
        part.add_done_callback(settled)


def _all_of(commits: Sequence[asyncio.Future[None]]) -> asyncio.Future[None]:
    """One commit for several writes of one publish (a stream's chunk and the other queues' row)."""
    both: asyncio.Future[None] = commits[0].get_loop().create_future()
    _follow(commits, both)
    return both


class StoredUsers:
    """The user registry's persistence port over the store: users and permissions as records."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def user_saved(self, user: User) -> None:
        self.store.put_user(UserRecord(user.name, user.password_hash, user.hashing_algorithm, user.tags))

    def user_deleted(self, name: str) -> None:
        self.store.delete_user(name)

    def permission_saved(self, vhost: str, user: str, permission: Permission) -> None:
        p = permission
        self.store.put_permission(PermissionRecord(vhost, user, p.configure, p.write, p.read))

    def permission_deleted(self, vhost: str, user: str) -> None:
        self.store.delete_permission(vhost, user)


def attach(vhost: VHost, store: Store | None) -> None:
    """Give `vhost` (and its queues) the store's persistence, or take it away with None."""
    if store is None:
        vhost.persistence = None
        for q in vhost.queues.values():
            q.store = None
        return
    persistence = StorePersistence(store)
    vhost.persistence = persistence
    for q in vhost.queues.values():
        q.store = store if q.durable and q.exclusive_owner is None else None


# -- rebuild -----------------------------------------------------------------------------------------


def rebuild(broker: VHostRegistry, store: Store, snap: Snapshot) -> None:
    """Recreate everything in `snap` before clients can act; then attach `store` to the entities.

    Nothing here writes to the store (it is not started yet): every vhost's `store` is attached
    only at the end. Bindings are replayed in the order they were made, except those of
    x-consistent-hash exchanges: RabbitMQ rebuilds their rings on boot in route-table order, so a
    ring bound out of that order comes back different, as it does on RabbitMQ. Bindings whose
    source or destination is missing are skipped. The messages durable delayed exchanges held are
    held again (released on the vhost's clock once the broker runs: at once when overdue).
    """
    from broker.entities.queues.catalog import Queue

    for vrec in snap.vhosts:
        if vrec.name not in broker.vhosts:
            broker.vhosts[vrec.name] = broker.new_vhost(vrec.name)
        broker.vhosts[vrec.name].description = vrec.description
        broker.vhosts[vrec.name].tags = tuple(vrec.tags)
    vhosts = broker.vhosts
    for v in vhosts.values():
        attach(v, None)
    for xrec in snap.exchanges:
        xv = vhosts.get(xrec.vhost)
        if xv is None or xrec.name in xv.exchanges:
            continue
        try:
            xv.declare_exchange(
                xrec.name,
                xrec.type,
                durable=True,
                auto_delete=xrec.auto_delete,
                internal=xrec.internal,
                arguments=xrec.arguments,
            )
        except AmqpError as exc:  # e.g. an exchange type this build lacks
            log.warning("stored exchange %r in vhost %r not restored: %s", xrec.name, xrec.vhost, exc)
    for qrec in snap.queues:
        qv = vhosts.get(qrec.vhost)
        if qv is None or qrec.name in qv.queues:
            continue
        queue = Queue(
            qv,
            qrec.name,
            durable=True,
            exclusive_owner=None,
            auto_delete=qrec.auto_delete,
            arguments=qrec.arguments,
        )
        queue.restore_placement(qrec.members, qrec.leader)
        qv.add_queue(queue)
    restored = skipped = 0
    replay: list[tuple[VHost, Exchange, Binding]] = []
    rings: list[tuple[VHost, Exchange, Binding]] = []
    for brec in snap.bindings:
        bv = vhosts.get(brec.vhost)
        src = bv.exchanges.get(brec.source) if bv is not None else None
        if bv is None or src is None or src.impl is None:
            skipped += 1
            continue
        dest = Destination(brec.destination_kind, brec.destination)  # type: ignore[arg-type]
        present = dest.name in (bv.queues if dest.kind == "queue" else bv.exchanges)
        if not present:
            skipped += 1
            continue
        target = rings if src.impl.type_name == "x-consistent-hash" else replay
        target.append((bv, src, Binding(dest, brec.key, brec.arguments)))
    # The plugin's boot-time recovery rebuilds each ring from lists:usort of the exchange's bindings,
    # so after a restart RabbitMQ's ring follows route-table order, not the order of binding.
    rings.sort(key=lambda item: (item[0].name, item[1].name, route_table_order(item[2])))
    for bv, src, binding in replay + rings:
        try:
            bv.add_binding(src, binding)
            restored += 1
        except AmqpError as exc:
            skipped += 1
            log.warning("stored binding %s -> %s not restored: %s", src.name, binding.destination.name, exc)
    messages = restore_depths(vhosts, store, snap)
    for (vname, qname), recs in snap.messages.items():
        mv = vhosts.get(vname)
        q = mv.queues.get(qname) if mv is not None else None
        if q is None:
            continue
        q.restore_state(snap.queue_state.get((vname, qname), {}))
        q.restore_dead_letters(snap.dead_letters.get((vname, qname), {}))
        for m in recs:
            msg = StoredMessage(m.exchange, m.routing_key, m.properties, m.body)
            if msg.flags:
                msg.compute_routing_keys()
            q.restore(m.seq, msg, m.redelivered)
            messages += 1
    delayed = restore_delayed(vhosts, snap.delayed)
    # Attach the store: from now on changes are written.
    for v in vhosts.values():
        attach(v, store)
    if snap.vhosts or snap.exchanges or snap.queues or messages or delayed:
        log.info(
            "restored from %s: %d exchanges, %d queues, %d bindings (%d skipped), %d messages, %d delayed",
            store.location,
            len(snap.exchanges),
            len(snap.queues),
            restored,
            skipped,
            messages,
            delayed,
        )


@dataclass
class StoreBacklog:
    """broker.entities.queues.classic.paging.Backlog over the store: a queue's messages stored before the
    restart (positions up to `last`), read front to back; `count` and `bytes` are what is left, `after`
    the last position read."""

    store: Store
    vhost: str
    queue: str
    count: int
    bytes: int
    last: int
    after: int = 0

    def read(self, limit: int) -> list[tuple[int, StoredMessage, bool]]:
        rows = self.store.read_queue(self.vhost, self.queue, self.after, self.last, limit)
        out: list[tuple[int, StoredMessage, bool]] = []
        for seq, redelivered, exchange, routing_key, props, body in rows:
            msg = StoredMessage(exchange, routing_key, props, body)
            if msg.flags:
                msg.compute_routing_keys()
            out.append((seq, msg, redelivered))
            self.count -= 1
            self.bytes -= len(body)
        if rows:
            self.after = rows[-1][0]
        return out

    def remaining_seqs(self) -> list[int]:
        return self.store.queue_seqs(self.vhost, self.queue, self.after, self.last)


#: Rows per query when a queue that cannot take a backlog is restored message by message.
_RESTORE_BATCH = 4096


def restore_depths(vhosts: Mapping[str, VHost], store: Store, snap: Snapshot) -> int:
    """Give each queue of a depth-only snapshot its stored messages: a classic queue without
    priorities takes them as a backlog, read as its head advances (start-up time and memory do not
    grow with the depth); any other queue restores each message now. Returns the message count."""
    if not snap.depths:
        return 0  # nothing stored: the paging module stays unloaded
    from broker.entities.queues.classic.paging import restore_backlog
    from broker.entities.queues.stream.queue import StreamQueue

    messages = 0
    for (vname, qname), (count, size, last) in snap.depths.items():
        mv = vhosts.get(vname)
        q = mv.queues.get(qname) if mv is not None else None
        if q is None:
            continue
        messages += count
        if isinstance(q, StreamQueue):  # the index only: bodies are paged in as consumers read
            after = 0
            while index := store.read_stream_index(vname, qname, after, _RESTORE_BATCH):
                q.restore_index(index)
                after = index[-1][0]
            continue
        backlog = StoreBacklog(store, vname, qname, count, size, last)
        if q.type_name == "classic" and not getattr(q, "max_priority", 1) and store.pages is not None:
            restore_backlog(q, backlog, last, store.pages.new_spool)  # type: ignore[arg-type]
            continue
        while backlog.count:
            rows = backlog.read(_RESTORE_BATCH)
            if not rows:
                break
            for seq, msg, redelivered in rows:
                q.restore(seq, msg, redelivered)
    return messages


def restore_delayed(vhosts: Mapping[str, VHost], records: Iterable[DelayedRecord]) -> int:
    """Hold again the messages durable delayed exchanges held (in key order, so those due at the
    same time keep their order); those of an exchange that is no longer there are dropped (the
    store forgets them when the exchange is deleted). Returns how many are held."""
    held = 0
    for rec in records:
        v = vhosts.get(rec.vhost)
        x = v.exchanges.get(rec.exchange) if v is not None else None
        if v is None or x is None:
            continue
        msg = StoredMessage(rec.exchange, rec.routing_key, rec.properties, rec.body)
        if msg.flags:
            msg.compute_routing_keys()
        v.restore_delayed(x, msg, rec.key, rec.due_ms)
        held += 1
    return held


def record_new_vhosts(broker: VHostRegistry, store: Store, snap: Snapshot) -> None:
    """After `store.start()`: write the vhosts this broker has that the store did not know yet."""
    known = {v.name for v in snap.vhosts}
    for name in broker.vhosts:
        if name not in known:
            vhost = broker.vhosts[name]
            store.put_vhost(VHostRecord(name, vhost.description, vhost.tags))
