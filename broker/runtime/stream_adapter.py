"""The broker behind the stream protocol (`broker.streamproto.ports.StreamBroker`): the same users,
vhosts and permissions as AMQP 0-9-1, and the stream queues themselves as the logs.

A stream created over the stream protocol is a stream queue (x-queue-type stream), declared with
the arguments RabbitMQ's stream manager maps the create-stream arguments to; one declared over
AMQP 0-9-1 is read and written over the stream protocol the same way. Each stream-protocol record
keeps its AMQP 1.0 bytes in the log (the stream queue converts it for an AMQP 0-9-1 consumer, and
converts an AMQP 0-9-1 publish for a stream-protocol one), so both protocols see one log with the
same offsets, chunks and timestamps.

What the stream protocol adds to a log (publisher deduplication state, consumer offsets stored
with store-offset: `broker.streamproto.tracking`) lives in the `QueueStream` view of each stream
and, for a kept stream, in the store beside its records (osiris writes it into the log): a
restart on the same data directory answers query-offset and query-publisher-sequence as before it,
deduplicates a returning producer's publishing ids, and continues the log after the last tracking
chunk's offset.
"""

from __future__ import annotations

import asyncio
import zlib
from array import array
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Protocol

from amqpwire.fields import Field, FieldTable
from broker.entities.events import count_auth_attempt
from broker.entities.persistence import Commit, failed
from broker.entities.queues.base import Queue
from broker.entities.queues.stream.arguments import MAX_SEGMENT_BYTES
from broker.entities.queues.stream.arguments import OffsetSpec as LogSpec
from broker.entities.queues.stream.log import WireChunk
from broker.entities.queues.stream.queue import StreamQueue, amqp10_record, record_message
from broker.store.base import Store
from broker.streamproto import chunk as C
from broker.streamproto.constants import (
    AUTH_MECHANISMS,
    HARD_FRAME_LIMIT,
    SERVER_PROPERTIES,
    Code,
    OffsetType,
)
from broker.streamproto.frames import OffsetSpec, Published, SubBatch
from broker.streamproto.ports import AuthRefused, Crashed, LoopbackOnly, Permission, StreamListener
from broker.streamproto.tracking import (
    TRACKING_CHUNK,
    Refused,
    TrackedLog,
    Tracking,
    create_arguments,
    publishing_ids,
)

if TYPE_CHECKING:
    from broker.entities.events import Events
    from broker.entities.users import Registry
    from broker.entities.vhost import VHost
    from broker.runtime.alarms import Alarms

_GZIP = 1
#: A gzip sub-entry inflates to at most what one frame may carry: a small frame cannot make the
#: broker hold gigabytes.
_MAX_INFLATED = HARD_FRAME_LIMIT
#: How often the disk alarm is looked at for stream connections (they are told of changes).
ALARM_POLL_SECONDS = 0.5
#: The most records publish frames waiting for the store make one chunk of (osiris's writer
#: batch), and the most bytes (what waits is not yet the store writer's backlog, which flow bounds).
MAX_CHUNK_RECORDS = 8192
MAX_CHUNK_BYTES = 4 << 20
_LOG_SPECS = {
    OffsetType.FIRST: "first",
    OffsetType.LAST: "last",
    OffsetType.NEXT: "next",
    OffsetType.OFFSET: "offset",
    OffsetType.TIMESTAMP: "timestamp",
}


class StreamHost(Protocol):
    """What the adapter needs of the broker (`broker.server.Broker` satisfies it)."""

    @property
    def vhosts(self) -> Mapping[str, VHost]:
        """The vhosts by name: their stream queues are the streams."""

    @property
    def auth(self) -> Registry:
        """The users and permissions AMQP 0-9-1 connections check too."""

    @property
    def alarms(self) -> Alarms:
        """The disk alarm stream publishers are blocked by."""

    @property
    def events(self) -> Events:
        """The hub that counts the login attempts."""


def _name_bytes(name: str) -> bytes:
    """A name as Erlang orders it: its bytes."""
    return name.encode("utf-8", "surrogateescape")


def _is_loopback(host: str) -> bool:
    return host.startswith("127.") or host in ("::1", "::ffff:127.0.0.1", "localhost")


def _records(entry: C.Entry) -> list[bytes]:
    """The records of one published entry (a sub-batch: uncompressed or gzip)."""
    if not isinstance(entry, SubBatch):
        return [bytes(entry)]
    if entry.compression == _GZIP:
        inflater = zlib.decompressobj(31)
        try:
            data = inflater.decompress(entry.data, _MAX_INFLATED + 1)
        except zlib.error as e:
            raise Crashed(f"gzip sub-entry: {e}") from None
        if not inflater.eof or len(data) > _MAX_INFLATED:
            raise Crashed("gzip sub-entry cut short or inflating past the frame limit")
        entry = SubBatch(0, entry.count, len(data), data)
    try:
        return entry.records()
    except ValueError as e:  # a compression codec the broker does not have
        raise Crashed(str(e)) from None


class QueueReader:
    """A subscription's position in a stream queue's log: the next chunk from `next_offset`."""

    __slots__ = ("_offset", "_stream")

    def __init__(self, stream: QueueStream, offset: int) -> None:
        self._stream = stream
        self._offset = offset

    @property
    def next_offset(self) -> int:
        return self._offset

    def next_chunk(self) -> C.Chunk | None:
        q = self._stream.queue
        if q.deleted:
            return None
        log = q.log
        end = log.end
        i = log.index_of(self._offset)
        if i >= end:
            return None
        offsets = log.offsets
        j = log.chunk_end(i)
        first = offsets[i]
        self._offset = offsets[j - 1] + 1
        wire = self._wire(i, j, first)
        if wire is not None:  # the chunk as it was stored, sent as it is
            n = j - i
            return C.Chunk(C.USER, first, log.stamps[i], 1, n, n, wire[1], crc=wire[0])
        records = [amqp10_record(q.message_at(k)) for k in range(i, j)]
        return C.Chunk.of(records, first_offset=first, timestamp=log.stamps[i])

    def _wire(self, i: int, j: int, first: int) -> tuple[int, bytes] | None:
        """(CRC, entry section) of the chunk of records `i` to `j` when it was kept whole as a
        stream-protocol publish frame: in memory, or read from the store once paged out."""
        q = self._stream.queue
        log = q.log
        m = log.msgs[i]
        if isinstance(m, WireChunk):
            if m.count == j - i and log.chunk_start(i) == i:
                return m.crc, m.section
            return None
        store = q.store
        if m is not None or not isinstance(store, Store) or not store.keeps_stream_chunks:
            return None
        if log.chunk_start(i) != i:
            return None
        stored = store.read_stream_chunk(self._stream.vhost.name, q.name, first + 1)
        if stored is None or stored[1] != j - i:
            return None
        return stored[0], stored[2]


class QueueStream(TrackedLog):
    """One stream queue as the stream protocol sees it (`broker.streamproto.ports.StreamLog`)."""

    def __init__(self, vhost: VHost, queue: StreamQueue, tracking: Tracking | None = None) -> None:
        self.vhost = vhost
        self.queue = queue
        self.listeners: list[StreamListener] = []
        self.tracking = tracking or Tracking()
        #: publish frames waiting for the store to commit the last chunk (see `_write_waiting`)
        self._waiting: list[tuple[Published, str | None, Callable[[], None]]] = []
        self._waiting_records = self._waiting_bytes = 0
        self._writing = False

    @property
    def name(self) -> str:
        return self.queue.name

    def write(
        self, kept: Sequence[tuple[int, C.Entry]], writer: str | None, committed: Callable[[], None]
    ) -> None:
        q = self.queue
        store = q.store if isinstance(q.store, Store) else None
        frame = kept if isinstance(kept, Published) and kept and kept.section is not None else None
        if frame is not None and (q.store is None or (store is not None and store.keeps_stream_chunks)):
            size = len(frame.section or b"")
            if (
                self._waiting_records + len(frame) > MAX_CHUNK_RECORDS
                or self._waiting_bytes + size > MAX_CHUNK_BYTES
            ):
                self._write_waiting()
            self._waiting.append((frame, writer, committed))
            self._waiting_records += len(frame)
            self._waiting_bytes += size
            if not self._writing:
                self._write_waiting()
            return
        self._write_waiting()
        msgs = [record_message(rec) for _, e in kept for rec in _records(e)]
        commits: list[Commit] = []
        persistence = self.vhost.persistence if q.store is not None else None
        if persistence is not None and msgs:  # one store write for the chunk, before any enqueue
            commit, _seqs = persistence.publish_records(self.vhost, msgs, q)
            if commit is not None:
                commits.append(commit)
        if msgs:  # a sub-batch may carry no record: it is confirmed, with nothing to keep
            q.enqueue_chunk(msgs)
        if writer is not None:  # the chunk's trailer: kept with the records
            tracked = self._keep([(C.TRACK_SEQUENCE, writer, publishing_ids(kept)[-1])])
            if tracked is not None and commits:
                commits.append(tracked)
        _when_all(commits, committed)

    def _write_waiting(self) -> None:
        """Write the publish frames waiting as one chunk, kept as it came (`WireChunk`). As
        osiris's writer makes one chunk of what waits in its mailbox while it writes, frames
        wait while the store commits the last one (up to MAX_CHUNK_RECORDS records and
        MAX_CHUNK_BYTES)."""
        waiting = self._waiting
        if not waiting:
            return
        self._waiting, self._waiting_records, self._waiting_bytes = [], 0, 0
        q, vhost = self.queue, self.vhost
        if q.deleted:
            return
        store = q.store if isinstance(q.store, Store) else None
        if len(waiting) == 1:
            section, sizes = waiting[0][0].section or b"", waiting[0][0].sizes
        else:
            section = b"".join(f.section or b"" for f, _w, _c in waiting)
            sizes = array("I")
            for f, _w, _c in waiting:
                sizes.extend(f.sizes)
        chunk = WireChunk(section, sizes)
        commits: list[Commit] = []

        def persist(first: int, now_ms: int) -> None:
            assert store is not None
            commits.append(
                store.put_stream_chunk(vhost.name, q.name, first, now_ms, chunk.crc, sizes, section)
            )

        q.enqueue_wire(chunk, persist if store is not None else None)
        if commits:
            self._writing = True
            commits[0].add_done_callback(self._written)
        last = {w: f.ids[-1] for f, w, _c in waiting if w is not None}  # the chunk's trailer
        if last:
            tracked = self._keep([(C.TRACK_SEQUENCE, w, i) for w, i in last.items()])
            if tracked is not None and commits:
                commits.append(tracked)
        for _f, _w, committed in waiting:
            _when_all(commits, committed)

    def _written(self, _commit: Commit) -> None:
        """The last chunk committed: the frames that waited meanwhile are the next chunk."""
        self._writing = False
        self._write_waiting()

    def _keep(self, rows: list[tuple[int, str, int]]) -> Commit | None:
        """Write tracking rows beside a kept stream's records (None: the stream is not kept)."""
        store = self.queue.store
        if not isinstance(store, Store):
            return None
        return store.put_stream_tracking(self.vhost.name, self.queue.name, rows)

    def reader(self, spec: OffsetSpec) -> QueueReader:
        log = self.queue.log
        offset = log.start_offset(LogSpec(_LOG_SPECS[spec.kind], spec.value))
        i = log.index_of(offset)
        if i < log.end:  # RabbitMQ sends the whole chunk holding the offset
            offset = log.chunks[i]
        return QueueReader(self, offset)

    def listen(self, listener: StreamListener) -> None:
        if listener not in self.listeners:
            self.listeners.append(listener)
        if self._grew not in self.queue.watchers:
            self.queue.watchers.append(self._grew)

    def unlisten(self, listener: StreamListener) -> None:
        if listener in self.listeners:
            self.listeners.remove(listener)
        if not self.listeners and self._grew in self.queue.watchers:
            self.queue.watchers.remove(self._grew)

    def _grew(self) -> None:
        for listener in list(self.listeners):
            listener.stream_grew(self)

    def deleted(self) -> None:
        self.queue.watchers.clear()
        for listener in list(self.listeners):
            listener.stream_deleted(self)
        self.listeners.clear()

    def write_tracking(self, reference: str, offset: int) -> None:
        """osiris writes a tracking chunk: it takes one offset of the log (after the frames
        waiting, as it would be after them in osiris's mailbox)."""
        self._write_waiting()
        q = self.queue
        q.close_chunk()
        at = q.log.write_offset
        q.log.next_offset = at + 1
        q.seq = q.log.write_offset
        self._keep([(C.TRACK_OFFSET, reference, offset), (TRACKING_CHUNK, "", at)])

    @property
    def committed_offset(self) -> int:
        return self.queue.log.next_offset - 1


def _when_all(commits: Sequence[Commit], then: Callable[[], None]) -> None:
    """Call `then` once every commit is done (at once when there is none), never if one failed."""
    left = [len(commits)]

    def done(c: Commit) -> None:
        if failed(c):
            left[0] = -1
            return
        left[0] -= 1
        if left[0] == 0:
            then()

    if not commits:
        then()
    for c in commits:
        c.add_done_callback(done)


def restore_tracking(vh: VHost, q: StreamQueue) -> Tracking | None:
    """A kept stream's tracking as the store has it (None: nothing tracked); the log continues
    after the last tracking chunk's offset, as osiris's does after a restart."""
    store = q.store
    rows = store.read_stream_tracking(vh.name, q.name) if isinstance(store, Store) else []
    if not rows:
        return None
    for kind, _reference, at in rows:
        if kind == TRACKING_CHUNK and at >= q.log.next_offset:
            q.close_chunk()
            q.log.next_offset = at + 1
            q.seq = q.log.write_offset
    return Tracking.from_rows(rows)


@dataclass(eq=False)
class BrokerStreams:
    """The broker as the stream protocol needs it (`broker.streamproto.ports.StreamBroker`).

    Made once the broker rebuilt its queues from the store: the kept streams' tracking is read
    back then, before any client can publish to them."""

    broker: StreamHost
    _: KW_ONLY
    loopback_users: Collection[str]
    advertised_host: str
    advertised_port: int
    cluster_name: str = "rabbit@localhost"
    _streams: dict[int, QueueStream] = field(default_factory=dict, init=False)  # by id() of the queue
    _watched: set[int] = field(default_factory=set, init=False)  # vhosts whose deletions are followed
    _alarm_watchers: list[Callable[[bool], None]] = field(default_factory=list, init=False)
    _alarm_state: bool = field(default=False, init=False)
    _alarm_timer: asyncio.TimerHandle | None = field(default=None, init=False)
    #: tracking read back from the store, by id() of its queue, until the queue is first viewed
    _restored: dict[int, tuple[StreamQueue, Tracking]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        for vh in self.broker.vhosts.values():
            for q in vh.queues.values():
                if not isinstance(q, StreamQueue):
                    continue
                tracking = restore_tracking(vh, q)
                if tracking is not None:
                    self._restored[id(q)] = (q, tracking)

    # -- connection ---------------------------------------------------------------------------

    def server_properties(self) -> Mapping[str, str]:
        return {**SERVER_PROPERTIES, "cluster_name": self.cluster_name, "platform": "Erlang/OTP 24.3.4.6"}

    def auth_mechanisms(self) -> Sequence[str]:
        return AUTH_MECHANISMS

    def authenticate(self, username: str, password: str, peer_host: str) -> object:
        """The user, after counting the attempt as rabbit_stream_reader does (protocol stream)."""
        ok = self.broker.auth.check_credentials(username, password)
        loopback_only = ok and username in self.loopback_users and not _is_loopback(peer_host)
        count_auth_attempt(self.broker.events, "stream", ok and not loopback_only)
        if not ok:
            raise AuthRefused(username)
        if loopback_only:
            raise LoopbackOnly(username)
        return username

    def check_vhost_access(self, user: object, vhost: str, peer_host: str) -> bool:
        return vhost in self.broker.vhosts and (vhost, str(user)) in self.broker.auth.permissions

    def check_permission(self, user: object, vhost: str, stream: str, permission: Permission) -> bool:
        p = self.broker.auth.permissions.get((vhost, str(user)))
        return p is not None and p.allows(permission, stream)

    def advertised_endpoint(self) -> tuple[str, int]:
        return self.advertised_host, self.advertised_port

    # -- streams ------------------------------------------------------------------------------

    def _view(self, vh: VHost, q: StreamQueue) -> QueueStream:
        view = self._streams.get(id(q))
        if view is None or view.queue is not q:
            restored = self._restored.pop(id(q), None)
            tracking = restored[1] if restored is not None and restored[0] is q else None
            view = self._streams[id(q)] = QueueStream(vh, q, tracking)
        if id(vh) not in self._watched:
            self._watched.add(id(vh))
            vh.on_queue_deleted.append(self._queue_deleted)
        return view

    def _queue_deleted(self, q: Queue) -> None:
        view = self._streams.get(id(q))
        if view is not None and view.queue is q:
            del self._streams[id(q)]
            view.deleted()

    def lookup(self, vhost: str, stream: str) -> QueueStream | None:
        vh = self.broker.vhosts.get(vhost)
        q = vh.queues.get(stream) if vh is not None else None
        if vh is None or not isinstance(q, StreamQueue) or q.deleted:
            return None
        return self._view(vh, q)

    def create_stream(self, user: object, vhost: str, stream: str, arguments: Mapping[str, str]) -> int:
        """rabbit_stream_manager:create: the known arguments become the queue's x-arguments (the
        others are ignored); max-age is not checked as the AMQP declare checks it."""
        try:
            stream.encode("utf-8")
        except UnicodeEncodeError:  # RabbitMQ's connection crashes on such a name (observed)
            raise Crashed("stream name is not UTF-8") from None
        try:
            known = create_arguments(arguments, MAX_SEGMENT_BYTES)
        except Refused as e:
            return e.code
        fields: list[tuple[str, Field]] = [("x-queue-type", Field("longstr", b"stream"))]
        for key, value in known.items():
            field_ = (
                Field("long", value)
                if isinstance(value, int)
                else Field("longstr", value.encode("utf-8", "surrogateescape"))
            )
            fields.append((f"x-{key}", field_))
        vh = self.broker.vhosts.get(vhost)
        if vh is None:
            return Code.INTERNAL_ERROR
        args = FieldTable(fields)
        existing = vh.queues.get(stream)
        if existing is not None:
            if not isinstance(existing, StreamQueue):
                return Code.PRECONDITION_FAILED
            same = _table(existing.arguments) == _table(args)
            return Code.STREAM_ALREADY_EXISTS if same else Code.PRECONDITION_FAILED
        q = Queue(vh, stream, durable=True, exclusive_owner=None, auto_delete=False, arguments=args)
        vh.add_queue(q)
        return Code.OK

    def delete_stream(self, user: object, vhost: str, stream: str) -> int:
        vh = self.broker.vhosts.get(vhost)
        q = vh.queues.get(stream) if vh is not None else None
        if vh is None or not isinstance(q, StreamQueue):
            return Code.STREAM_DOES_NOT_EXIST
        view = self._view(vh, q)  # its listeners hear of the deletion (`_queue_deleted`)
        vh.delete_queue(q)
        if view.listeners:  # deleted before this adapter followed the vhost
            self._queue_deleted(q)
        return Code.OK

    # -- super streams ------------------------------------------------------------------------

    def _partition_bindings(self, vhost: str, super_stream: str) -> list[tuple[str, str, int]] | None:
        """The exchange's bindings to stream queues as rabbit_binding:list_for_source lists them
        (the route table's order: by key, then destination name): (stream, key, partition order,
        -1 without one). None: no such exchange."""
        vh = self.broker.vhosts.get(vhost)
        x = vh.exchanges.get(super_stream) if vh is not None else None
        if vh is None or x is None:
            return None
        out = []
        for b in x.bindings_in_order():
            dest = b.destination
            if dest.kind != "queue" or not isinstance(vh.queues.get(dest.name), StreamQueue):
                continue
            order = b.arguments.get("x-stream-partition-order")
            rank = int(order.value) if order is not None and isinstance(order.value, int) else -1
            out.append((dest.name, b.key, rank))
        out.sort(key=lambda b: (b[1].encode("utf-8", "surrogateescape"), _name_bytes(b[0])))
        return out

    def route(self, vhost: str, super_stream: str, routing_key: str) -> list[str] | None:
        """rabbit_exchange:route's answer: the streams bound with the key, sorted and unique (it
        usorts the queue resources)."""
        bindings = self._partition_bindings(vhost, super_stream)
        if bindings is None:
            return None
        return sorted({name for name, key, _ in bindings if key == routing_key}, key=_name_bytes)

    def partitions(self, vhost: str, super_stream: str) -> list[str] | None:
        """Every binding's stream (one bound twice comes twice), in x-stream-partition-order; a
        stable sort, as rabbit_stream_utils:sort_partitions."""
        bindings = self._partition_bindings(vhost, super_stream)
        if bindings is None:
            return None
        return [name for name, _, _ in sorted(bindings, key=lambda b: b[2])]

    # -- alarms -------------------------------------------------------------------------------

    def resource_alarm(self) -> bool:
        """rabbit_stream_reader reacts to the disk alarm only."""
        return self.broker.alarms.disk_alarm

    def watch_alarm(self, callback: Callable[[bool], None]) -> Callable[[], None]:
        self._alarm_watchers.append(callback)
        if self._alarm_timer is None:
            self._alarm_state = self.resource_alarm()
            self._alarm_timer = asyncio.get_running_loop().call_later(ALARM_POLL_SECONDS, self._poll_alarm)

        def stop() -> None:
            if callback in self._alarm_watchers:
                self._alarm_watchers.remove(callback)
            if not self._alarm_watchers and self._alarm_timer is not None:
                self._alarm_timer.cancel()
                self._alarm_timer = None

        return stop

    def _poll_alarm(self) -> None:
        state = self.resource_alarm()
        if state != self._alarm_state:
            self._alarm_state = state
            for cb in list(self._alarm_watchers):
                cb(state)
        self._alarm_timer = asyncio.get_running_loop().call_later(ALARM_POLL_SECONDS, self._poll_alarm)


def _table(args: FieldTable) -> dict[str, tuple[str, object]]:
    return {k: (f.type, f.value) for k, f in args}
