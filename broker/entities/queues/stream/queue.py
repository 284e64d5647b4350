"""The stream queue type (x-queue-type: stream): an append-only log read by offset.

Every publish takes the next offset of the log. Chunks follow osiris's writer, which writes what
waits in its mailbox as one chunk: the first publish of a pass of the event loop is a chunk alone
(the writer was idle), the ones after it in the same pass (a transaction's commit, a pipelining
publisher's batch) are one chunk; RabbitMQ's boundaries depend on its timing (a transaction of
three gave [1] [2, 3] or [1, 2, 3], tests/data/stream_chunk_observations.json).

Consumers never take messages away, each reads from its own position (`x-stream-offset`) as its
channel's credit allows, and an ack only frees credit. The log is cut into segments as osiris
does (`stream_log`): a segment rolls once it reached x-stream-max-segment-size-bytes, the new one
opens with a tracking chunk that takes one offset, and retention (x-max-length-bytes, x-max-age)
drops whole old segments when a segment rolls. What RabbitMQ 3.10.8 refuses for streams
(basic.get, purge, no-ack consumers, nack and reject) is refused here with its codes and texts.

A kept stream writes every message (transient ones too) and each chunk's time through the
vhost's injected persistence, so a restart rebuilds the same offsets, chunks and timestamps.
"""

from __future__ import annotations

import contextlib
import struct
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Unpack

from amqpwire.errors import AmqpError, internal_error, not_implemented
from amqpwire.fields import Field, FieldTable
from broker.entities.message import HEADERS_FLAG, StoredMessage
from broker.entities.queues import arguments as A
from broker.entities.queues.base import Declared, Entry, Queue, QueueHost, QueueStore, register, resource
from broker.entities.queues.consumers import Consumer, notify_cancelled
from broker.entities.queues.stream import arguments as SA
from broker.entities.queues.stream import convert
from broker.entities.queues.stream.log import (
    NO_PROPS,
    Dropped,
    StreamLog,
    WireChunk,
    record_size,
    resident_cost,
)
from broker.protocol import properties as P

if TYPE_CHECKING:
    from broker.entities.policy import Policy

#: Header values RabbitMQ 3.10.8 drops on the way into a stream (its AMQP 1.0 conversion has no
#: place for them); a decimal crashes the conversion.
_DROPPED_TYPES = frozenset({"array", "table"})
OFFSET_HEADER = "x-stream-offset"
_I64 = struct.Struct(">q")
#: rabbit_stream_queue's unsupported_policies: a policy holding one of them is not applied.
UNSUPPORTED_POLICY_KEYS = A.MIRRORING_POLICY_KEYS | frozenset(
    {
        "expires",
        "message-ttl",
        "dead-letter-exchange",
        "dead-letter-routing-key",
        "max-length",
        "max-in-memory-length",
        "max-in-memory-bytes",
        "max-priority",
        "overflow",
        "queue-mode",
        "single-active-consumer",
        "delivery-limit",
        "dead-letter-strategy",
    }
)
#: Memory for the newest records' messages (bodies and their overhead, `resident_cost`); older ones
#: the store has committed are dropped and read back a page at a time when a consumer reaches them.
RESIDENT_BYTES = 8 * 1024 * 1024
PAGE = 256


def _has_decimal_header(msg: StoredMessage) -> bool:
    if not msg.flags & HEADERS_FLAG:
        return False
    return any(f.type == "decimal" for _k, f in msg.headers() or FieldTable())


def stream_message(msg: StoredMessage) -> StoredMessage:
    """The message as a stream keeps it: no cluster_id, no array or table headers; a decimal
    header is a crash (541, 0/0) as in RabbitMQ 3.10.8."""
    changes: dict[str, object] = {}
    if msg.flags & (1 << 2) and msg.prop("cluster_id") is not None:
        changes["cluster_id"] = None
    if _has_decimal_header(msg):
        raise internal_error()
    if msg.flags & HEADERS_FLAG:
        headers = msg.headers() or FieldTable()
        if any(f.type in _DROPPED_TYPES for _k, f in headers):
            changes["headers"] = FieldTable((k, f) for k, f in headers if f.type not in _DROPPED_TYPES)
    if not changes:
        return msg
    return msg.with_props(P.rewrite(msg.props, changes))


_OFFSET_KEY = OFFSET_HEADER.encode()
_NO_PROPS = NO_PROPS
_OFFSET_ENTRY = bytes((len(_OFFSET_KEY),)) + _OFFSET_KEY + b"l"


def record_message(record: bytes) -> StoredMessage:
    """An AMQP 1.0 record written by a stream-protocol publisher, kept as it came: the body holds
    the record, with no properties, no exchange and no routing key. No AMQP 0-9-1 publish reaches
    a stream that way (the default exchange routes an empty key nowhere; CC headers or an x-death
    would be properties)."""
    return StoredMessage("", "", _NO_PROPS, record)


def is_record(msg: StoredMessage) -> bool:
    """Whether `msg` is a stream-protocol record (`record_message`)."""
    return not msg.flags and not msg.routing_key and not msg.exchange and not msg.extra_keys


def amqp10_record(msg: StoredMessage) -> bytes:
    """The AMQP 1.0 bytes a stream-protocol consumer reads for a log record: the record as
    published over the stream protocol, or RabbitMQ's conversion of an AMQP 0-9-1 publish."""
    if is_record(msg):
        return msg.body
    props = {name: P.decode_value(msg.props, name, span) for name, span in P.locate(msg.props).items()}
    return convert.from_amqp091(props, msg.body, exchange=msg.exchange, routing_key=msg.routing_key)


def amqp091_message(msg: StoredMessage, stream: str) -> StoredMessage:
    """A log record as an AMQP 0-9-1 message: a stream-protocol record converted as RabbitMQ's
    rabbit_msg_record does (one it cannot convert is a channel crash, 541)."""
    if not is_record(msg):
        return msg
    try:
        m = convert.to_amqp091(msg.body, stream=stream)
    except convert.UnconvertibleError:
        raise internal_error() from None
    return StoredMessage(m.exchange, m.routing_key, P.encode(m.props), m.body)


def delivered_message(msg: StoredMessage, offset: int, stream: str = "") -> StoredMessage:
    """A log record as a consumer receives it: `x-stream-offset` (long) appended to the headers,
    replacing any header of that name (a stream-protocol record converted first)."""
    msg = amqp091_message(msg, stream)
    props = P.append_header(msg.props, _OFFSET_KEY, _OFFSET_ENTRY + _I64.pack(offset))
    if props is not None:
        return msg.with_props(props)
    headers = msg.headers() or FieldTable()
    table = FieldTable(
        [*((k, f) for k, f in headers if k != OFFSET_HEADER), (OFFSET_HEADER, Field("long", offset))]
    )
    return msg.with_props(P.rewrite(msg.props, {"headers": table}))


def _int_setting(args: FieldTable, key: str) -> int | None:
    f = args.get(key)
    return int(f.value) if f is not None and f.type in A.INTEGER_TYPES else None


def _age_setting(args: FieldTable) -> int | None:
    """A max-age the AMQP declare refuses ("1X") can come from the stream protocol, which
    RabbitMQ 3.10.8 accepts without checking: it then limits nothing."""
    f = args.get("x-max-age")
    if f is None or f.type != "longstr":
        return None
    try:
        return SA.max_age_ms(f.value)
    except Exception:
        return None


@register
class StreamQueue(Queue):
    type_name = "stream"
    keeps_transient = True  # osiris writes every message to disk
    # the log's records and their body bytes (a stream never drops a record but by retention)
    count: int = 0
    bytes: int = 0
    overflow: str = "drop-head"  # no length limit refuses a publish

    def __init__(self, vhost: QueueHost, name: str, **declared: Unpack[Declared]) -> None:
        super().__init__(vhost, name, **declared)
        self.consumers: deque[Consumer] = deque()
        self.positions: dict[Consumer, int] = {}  # next offset each consumer reads
        self.seq = 0
        self.single_active = False
        self.dlx = self.dlrk = None
        self.published = 0  # message_stats publish (`seq` follows the log's offsets)
        self.log = StreamLog(SA.DEFAULT_SEGMENT_BYTES)
        self._delivering = False
        self.resident = 0  # what the records' messages held in memory cost (`resident_cost`)
        self._committed_below = 0  # offsets below this one are committed to the store
        self._evicted_below = 0  # eviction went this far
        self._since_sync = 0
        self._sync_pending = False
        self._page: dict[int, StoredMessage] = {}
        self._boot_stamps: dict[int, tuple[int, int, int]] | None = None  # seq -> (.., chunk ms)
        self._in_pass = False  # a publish in this pass of the event loop made a chunk already
        #: told (once per commit, coalesced) that records were appended: stream-protocol readers
        self.watchers: list[Callable[[], None]] = []
        self._grew_pending = False
        self.apply_policy(None)

    # -- declaration --------------------------------------------------------------------------

    @classmethod
    def validate_arguments(
        cls, args: FieldTable, qname: str, vhost: str, *, durable: bool, exclusive: bool, auto_delete: bool
    ) -> None:
        rs = resource("queue", qname, vhost)
        SA.check_declare(args, rs, durable=durable, exclusive=exclusive, auto_delete=auto_delete)

    def check_equivalent(self, durable: bool, auto_delete: bool, arguments: FieldTable) -> None:
        A.check_redeclare(self, durable, auto_delete, arguments, SA.STREAM_QUEUE_ARGS)

    def check_consume(self, arguments: FieldTable, *, exclusive: bool, no_ack: bool, prefetch: int) -> None:
        """`prefetch`: the consumer's (0: none, refused). Exclusive consumers do not lock a stream."""
        SA.check_consume(arguments, self.rs, no_ack=no_ack, prefetch=prefetch, now_ms=self._now_ms())

    def check_global_qos(self, global_prefetch: int) -> None:
        """A channel-wide prefetch on top of the consumer's: 540, checked after `check_consume`
        (observed: a bad offset or no-ack is reported first)."""
        if global_prefetch:
            raise not_implemented(f"{self.rs} does not support global qos")

    def check_delete(self, *, if_unused: bool, if_empty: bool) -> None:
        """A stream ignores if-unused and if-empty."""

    def check_reject(self) -> None:
        """basic.nack / basic.reject of a stream delivery (any requeue flag)."""
        raise not_implemented(f"basic.nack and basic.reject not supported by stream queues {self.rs}")

    def reset_expiry(self) -> None:
        """Streams have no x-expires."""

    @staticmethod
    def is_policy_applicable(policy: Policy) -> bool:
        """No key of the policy is one a stream refuses (observed: max-length or message-ttl beside
        max-age, and the policy does not apply at all)."""
        return not any(k in UNSUPPORTED_POLICY_KEYS for k in policy.definition)

    def apply_policy(self, policy: Policy | None) -> None:
        """x-arguments combined with the policy as rabbit_stream_queue does: the smaller of the two
        for max-length-bytes, max-age and the segment size."""
        if policy is not None and not self.is_policy_applicable(policy):
            policy = None
        self.policy = policy
        args = self.arguments
        max_bytes = _int_setting(args, "x-max-length-bytes")
        max_age = _age_setting(args)
        segment = _int_setting(args, "x-stream-max-segment-size-bytes")
        if policy is not None:
            max_bytes = _smaller(max_bytes, _int_or_none(policy.get("max-length-bytes")))
            age = policy.get("max-age")
            if isinstance(age, str):
                with contextlib.suppress(Exception):  # the policy was validated when it was set
                    max_age = _smaller(max_age, SA.max_age_ms(age.encode()))
            segment = _smaller(segment, _int_or_none(policy.get("stream-max-segment-size-bytes")))
        self.log.max_bytes = max_bytes
        self.log.max_age_ms = max_age
        self.log.segment_bytes = segment if segment is not None else SA.DEFAULT_SEGMENT_BYTES

    # -- messages in --------------------------------------------------------------------------

    def would_overflow(self, size: int) -> bool:
        return False

    def crashes_on(self, msg: StoredMessage) -> bool:
        return _has_decimal_header(msg)

    def enqueue(self, msg: StoredMessage, seq: int = 0) -> None:
        """Append one chunk. `seq` (reserved by persistence as `self.seq + 1`) is the store's
        position of the message: the offset it takes plus one, so a restart finds each message
        at its offset."""
        kept = stream_message(msg)
        self.published += 1
        self._boot_stamps = None
        log = self.log
        seq = log.write_offset + 1
        persistence = self.vhost.persistence if self.store is not None else None
        now = self._now_ms()
        new_chunk = not log.chunk_open
        self._append(kept, now)
        if new_chunk:
            if persistence is not None:
                persistence.stream_timestamps(self, [(seq, now)])
            if self._in_pass:  # the second publish of this pass: the rest join its chunk
                log.chunk_open = True
                self.seq = log.write_offset  # the chunk's next record takes the next offset
            else:  # the first publish of a pass is a chunk alone (the writer was idle)
                self._in_pass = True
                self.clock.call_later(0.0, self._close_chunk)
        self.try_deliver()
        self._tell_watchers(persistence)

    def _tell_watchers(self, persistence: QueueStore[QueueHost] | None) -> None:
        """The watchers hear of new records once they committed (coalesced)."""
        if self.watchers and not self._grew_pending:
            self._grew_pending = True
            if persistence is not None:
                persistence.when_committed(self, self._grew)
            else:
                self.clock.call_later(0.0, self._grew)

    def enqueue_wire(self, chunk: WireChunk, persist: Callable[[int, int], None] | None = None) -> None:
        """Append a stream-protocol publish frame as one chunk of its own, kept as it came
        (`WireChunk`): the log's accounting, delivery and commit tracking are done once for the
        chunk. `persist(first position, chunk time ms)` writes it to the store first, before
        anything the append may trigger (retention's removals come after it in the store)."""
        if self.log.chunk_open:
            self._close_chunk()
        log = self.log
        now = self._now_ms()
        if persist is not None:
            persistence = self.vhost.persistence
            if persistence is not None:
                persistence.stream_written_beside(self)
            persist(log.write_offset + 1, now)
        n = chunk.count
        self.published += n
        self._boot_stamps = None
        self._dropped(log.append_chunk(chunk, now))
        self.seq = log.write_offset
        self.count += n
        self.bytes += chunk.body_bytes
        self.resident += chunk.unit * n
        if self.store is not None:
            self._since_sync += n - 1
            self._track_commits()
        self.try_deliver()
        self._tell_watchers(self.vhost.persistence if self.store is not None else None)

    def enqueue_chunk(self, msgs: Sequence[StoredMessage]) -> None:
        """Append `msgs` as one chunk (a stream-protocol publish frame, whose store write was made
        at the positions `enqueue` gives them). The first record is `enqueue`d; the others join
        its chunk, which takes no new segment, timestamp or retention check, so what is done per
        chunk (delivery, commit tracking) is done once."""
        self.enqueue(msgs[0])
        self.open_chunk()
        if len(msgs) > 1:
            log = self.log
            resident = body_bytes = 0
            for msg in msgs[1:]:
                kept = stream_message(msg)
                log.append(kept, 0)  # joins the open chunk: nothing is dropped
                body_bytes += len(kept.body)
                resident += resident_cost(kept)
            n = len(msgs) - 1
            self.published += n
            self.count += n
            self.bytes += body_bytes
            self.resident += resident
            self.seq = log.write_offset
            if self.store is not None:
                self._since_sync += n - 1
                self._track_commits()
            self.try_deliver()
        self.close_chunk()

    def _grew(self) -> None:
        self._grew_pending = False
        for watcher in list(self.watchers):
            watcher()

    def open_chunk(self) -> None:
        """The records enqueued next join the chunk the last one started (a stream-protocol
        publish frame is one chunk), until `close_chunk`."""
        self.log.chunk_open = True
        self.seq = self.log.write_offset

    def close_chunk(self) -> None:
        """The next record starts a new chunk."""
        self._close_chunk()

    def message_at(self, i: int) -> StoredMessage:
        """The message of the log's record at index `i` (read back from the store if paged out)."""
        return self._message(i)

    def _close_chunk(self) -> None:
        """The event loop moved on: the next publish starts a chunk (and may roll the segment)."""
        self._in_pass = False
        self.log.chunk_open = False
        self.seq = self.log.write_offset

    def restore_state(self, state: dict[int, tuple[int, int, int]]) -> None:
        """Each chunk's first message carries the chunk's time; a store written before times were
        kept has none (then every message is a chunk of the restart's time)."""
        self._boot_stamps = state or None

    def restore(self, seq: int, msg: StoredMessage, redelivered: bool) -> None:
        """A message read from the store at boot: it is committed, its body may leave memory. (One
        that crashed its publish, a decimal header, was stored before it was refused: skipped.)"""
        try:
            msg = stream_message(msg)
        except AmqpError:
            return
        stamps = self._boot_stamps
        if stamps is None:
            timestamp: int | None = self._now_ms()
        else:
            timestamp = stamps[seq][2] if seq in stamps and stamps[seq][2] else None
            if timestamp is None and not len(self.log):
                timestamp = self._now_ms()
        self.log.restore(seq - 1, msg, timestamp)
        self.count += 1
        self.bytes += len(msg.body)
        self.resident += resident_cost(msg)
        self.seq = self.log.write_offset
        self._committed_below = self.log.next_offset
        self._evict()

    def restore_index(self, rows: Iterable[tuple[int, int, int, int, int, int]]) -> None:
        """Records from the store's index at boot, oldest first: (seq, chunk time ms or 0 to join
        the chunk before, exchange, routing key, properties and body sizes). The bodies stay in
        the store and are read back a page at a time when a consumer reaches them, so a restart
        costs the index, not the log."""
        log = self.log
        now = self._now_ms()
        for seq, ts, exchange, routing_key, props, body in rows:
            timestamp = ts or (None if len(log) else now)
            log.restore_index(seq - 1, record_size(exchange, routing_key, props, body), body, timestamp)
            self.count += 1
            self.bytes += body
        self.seq = log.write_offset
        self._committed_below = log.next_offset

    def _append(self, msg: StoredMessage, now_ms: int) -> None:
        dropped = self.log.append(msg, now_ms)
        self.seq = self.log.write_offset
        self.count += 1
        self.bytes += len(msg.body)
        self.resident += resident_cost(msg)
        self._dropped(dropped)
        if self.store is not None:
            self._track_commits()

    def _dropped(self, dropped: Dropped | None) -> None:
        """Retention dropped these records: uncount them, and remove them from the store."""
        if dropped is None:
            return
        self.count -= len(dropped.seqs)
        self.bytes -= dropped.body_bytes
        self.resident -= dropped.resident_bytes
        persistence = self.vhost.persistence
        if self.store is not None and persistence is not None:  # a kept stream stores all
            persistence.positions_removed(self, dropped.seqs)

    # -- paging -------------------------------------------------------------------------------

    def _track_commits(self) -> None:
        """Every PAGE appends, learn from the store when what came before has committed."""
        self._since_sync += 1
        persistence = self.vhost.persistence
        if self._since_sync < PAGE or self._sync_pending or self.store is None or persistence is None:
            self._evict()
            return
        self._since_sync = 0
        self._sync_pending = True
        mark = self.log.next_offset
        persistence.when_committed(self, lambda: self._committed(mark))

    def _committed(self, mark: int) -> None:
        self._sync_pending = False
        self._committed_below = max(self._committed_below, mark)
        self._evict()

    def _evict(self) -> None:
        """Drop the oldest committed, stored messages while they cost more than RESIDENT_BYTES (only
        with a store that can read them back)."""
        if (
            self.resident <= RESIDENT_BYTES
            or self._evicted_below >= self._committed_below  # nothing newly committed to drop
            or not self._can_read_back()
        ):
            return
        log = self.log
        msgs, end = log.msgs, log.end
        i = log.index_of(self._evicted_below)
        stop = log.index_of(self._committed_below)  # the first record not known to be committed
        while i < stop and self.resident > RESIDENT_BYTES:
            m = msgs[i]
            if isinstance(m, WireChunk):  # the rest of its chunk at once
                j = min(stop, log.chunk_end(i))
                msgs[i:j] = [None] * (j - i)
                self.resident -= m.unit * (j - i)
                i = j
                continue
            if m is not None:  # with a store every record is stored (see `enqueue`)
                self.resident -= resident_cost(m)
                msgs[i] = None
            i += 1
        self._evicted_below = log.offsets[i] if i < end else log.next_offset

    def _can_read_back(self) -> bool:
        """Bodies leave memory only if the persistence can read them back."""
        persistence = self.vhost.persistence
        return self.store is not None and persistence is not None and persistence.can_read_back(self)

    def _message(self, i: int) -> StoredMessage:
        """The message of the log's record `i`, read back from the store (a page at a time) if it
        left memory."""
        msg = self.log.message(i)
        if msg is not None:
            return msg
        seq = self.log.offsets[i] + 1
        msg = self._page.get(seq)
        if msg is None:
            persistence = self.vhost.persistence
            if persistence is None or not self._can_read_back():
                raise internal_error()
            rows = persistence.read_page(self, seq, PAGE)
            self._page = {seq: stream_message(stored) for seq, stored in rows}
            msg = self._page.get(seq)
            if msg is None:  # the store lost a committed message
                raise internal_error()
        return msg

    def _now_ms(self) -> int:
        return int(self.clock.wall() * 1000)

    # -- messages out -------------------------------------------------------------------------

    def try_deliver(self) -> None:
        """Each consumer reads on from its own offset while its channel has credit."""
        if self._delivering or self.deleted or not self.consumers:
            return
        self._delivering = True
        try:
            log = self.log
            for c in list(self.consumers):
                pos = self.positions.get(c)
                if pos is None:
                    continue
                channel = c.channel
                while pos < log.next_offset and channel.can_deliver(c):
                    i = log.index_of(pos)
                    if i >= log.end:
                        pos = log.next_offset
                        break
                    offset = log.offsets[i]
                    pos = offset + 1
                    self.positions[c] = pos
                    self.deliver_to(c, Entry(0, delivered_message(self._message(i), offset, self.name), 0.0))
                self.positions[c] = pos
        finally:
            self._delivering = False

    def get(self, no_ack: bool) -> Entry | None:
        raise not_implemented(f"basic.get not supported by stream queues {self.rs}")

    def requeue(self, entries: list[Entry]) -> None:
        """A closed channel's or recovered deliveries are not read again: the log stays as it is."""

    def dead_letter(self, entries: list[Entry], reason: str) -> None:
        """Nothing leaves a stream but by retention; reject/nack are refused (`check_reject`)."""

    def purge(self) -> int:
        raise not_implemented(f"queue.purge not supported by stream queues {self.rs}")

    def check_recover(self) -> None:
        """basic.recover (and recover-async) with a stream delivery unacked crashes RabbitMQ
        3.10.8's channel: the connection closes with 541 INTERNAL_ERROR naming no method."""
        raise internal_error()

    def delete(self) -> int:
        """Cancel the consumers (basic.cancel to each) and drop the log; delete-ok reports 0."""
        self.deleted = True
        notify_cancelled(self.clock, list(self.consumers))  # after the deleting method's reply
        self.consumers.clear()
        self.positions.clear()
        self.log.clear()
        self._page = {}
        self.count = self.bytes = self.resident = 0
        return 0

    # -- consumers ----------------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        spec = SA.parse_offset(consumer.args.get(SA.OFFSET_ARG), self.rs, self._now_ms())
        self.consumers.append(consumer)
        self.positions[consumer] = self.log.start_offset(spec)
        self._evict()  # after a restart the store is attached only once the log is rebuilt
        self.try_deliver()

    def remove_consumer(self, consumer: Consumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        self.positions.pop(consumer, None)

    @property
    def active_consumer(self) -> Consumer | None:
        return None

    # -- reading ------------------------------------------------------------------------------

    @property
    def message_count(self) -> int:
        """Declare-ok's count: RabbitMQ 3.10.8 reports the leader's lagging committed counter,
        0 right after confirmed publishes."""
        return 0

    @property
    def consumer_count(self) -> int:
        """Declare-ok's consumer count is always 0 for a stream."""
        return 0

    @property
    def stats(self) -> dict[str, int]:
        out: dict[str, int] = {}
        if self.published:
            out["publish"] = self.published
        if self.stat_deliver:
            out.update(
                ack=self.stat_ack,
                deliver=self.stat_deliver,
                deliver_no_ack=0,
                get=0,
                get_no_ack=0,
                get_empty=0,
                deliver_get=self.stat_deliver,
                redeliver=0,
            )
        return out

    def details(self) -> dict[str, object]:
        """Offsets, and membership as rabbit_stream_queue reports it: the members (the node the
        stream lives on, which the read model fills in when none was placed; RabbitMQ 3.10.8 shows
        ["rabbit@<node>"] for `members` and `online`, and a null leader over the management API)."""
        return {
            "first_offset": self.log.first_offset,
            "next_offset": self.log.next_offset,
            "members": list(self.members),
        }


def _int_or_none(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _smaller(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)
