"""The queue-type interface (RabbitMQ's rabbit_queue_type), its ports, and the registry keyed by
x-queue-type.

`Queue` is what channels, vhosts, policies and management use for every queue; each queue type is a
subclass in its own module that registers itself with `@register`. `Queue(vhost, name, ...)` builds
the type that the `x-queue-type` argument names (classic when absent), so a new type is a new
module that registers itself, not a new branch in the callers. `register` refuses a type that
leaves any of `INTERFACE` unimplemented.

What a queue needs from outside is stated here as ports, satisfied structurally: `QueueHost` (its
vhost: name, clock, persistence, dead-lettering, deletion), `QueueStore` (what it tells the
persistence), `ConsumerChannel` (the channel that owns a consumer). They live in this module with
`Queue`, `Entry` and `Consumer` because they name one another: a host and a store are told about a
queue and its entries, a channel is handed a queue's entry, a queue holds its host and consumers.
Nothing here imports the vhost, the persistence or the store.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol, Self, TypedDict, TypeVar, Unpack

from amqpwire.errors import not_implemented, resource_name
from amqpwire.fields import FieldTable
from broker.entities.info import ConsumerView, QueueView
from broker.entities.queues.consumer_ring import CONSUMER_NAME_ARGUMENT
from broker.protocol.methods import shortstr

if TYPE_CHECKING:
    from broker.entities.clock import Clock
    from broker.entities.message import StoredMessage
    from broker.entities.policy import Policy


#: How a queue type names a resource in its refusals (the name the queue types import).
resource = resource_name


class Entry:
    """One message in one queue. `seq` is its original position, kept across requeues;
    `expires` is the clock time it dies at (0.0: never)."""

    __slots__ = ("expires", "msg", "redelivered", "seq")
    #: The store keeps this entry whatever its delivery mode (a quorum queue's log keeps all).
    always_stored: ClassVar[bool] = False

    def __init__(self, seq: int, msg: StoredMessage, expires: float) -> None:
        self.seq = seq
        self.msg = msg
        self.redelivered = False
        self.expires = expires

    def __lt__(self, other: Entry) -> bool:
        return self.seq < other.seq


# -- consumers ------------------------------------------------------------------------------------


class ConsumerChannel(Protocol):
    """What a queue needs from the channel that owns a consumer."""

    def can_deliver(self, consumer: Consumer) -> bool: ...
    def deliver(self, consumer: Consumer, queue: Queue, entry: Entry) -> None: ...
    def consumer_cancelled_by_server(self, consumer: Consumer) -> None: ...


class Consumer:
    """One basic.consume. `group`: the members (one per local shard) of one consumer of a sharded
    pseudo-queue under consistent-hash selection; they share the tag and the prefetch."""

    __slots__ = (
        "args",
        "channel",
        "exclusive",
        "group",
        "no_ack",
        "prefetch",
        "priority",
        "queue",
        "tag",
        "tag_wire",
        "unacked",
    )

    def __init__(
        self,
        channel: ConsumerChannel,
        tag: str,
        queue: Queue,
        no_ack: bool,
        exclusive: bool,
        prefetch: int,
        args: FieldTable,
        priority: int = 0,
    ) -> None:
        self.channel = channel
        self.tag = tag
        self.tag_wire = shortstr(tag)
        self.queue = queue
        self.no_ack = no_ack
        self.exclusive = exclusive
        self.prefetch = prefetch
        self.unacked = 0
        self.args = args
        self.priority = priority
        self.group: list[Consumer] | None = None

    @property
    def ring_key(self) -> str:
        """The name hashed onto the consumer ring: the x-consumer-name argument, else the tag."""
        f = self.args.get(CONSUMER_NAME_ARGUMENT)
        if f is None or f.type != "longstr":
            return self.tag
        return str(f.value.decode("utf-8", errors="surrogateescape"))


# -- what a queue needs from its vhost and the store ----------------------------------------------


class PageSpool(Protocol):
    """An append-only byte stream on disk that a queue pages messages out to
    (broker.store.page_spool implements it)."""

    def append(self, blob: bytes) -> int:
        """Write `blob` at the end; returns its offset in the stream."""
        ...

    def read(self, start: int, end: int) -> bytes:
        """The bytes from `start` to `end` (written before)."""
        ...

    def release(self, upto: int) -> None:
        """Nothing before `upto` will be read again: its disk space may go."""
        ...

    def close(self) -> None:
        """Drop the whole stream."""
        ...


class StoreHandle(Protocol):
    """The store a kept queue carries (`Queue.store`): its presence marks the queue as kept; the
    session writes its deliveries and acks through it (broker.store.Store satisfies it)."""

    def remove_messages(self, vhost: str, queue: str, seqs: Iterable[int]) -> None: ...
    def mark_redelivered(self, vhost: str, queue: str, seqs: Iterable[int]) -> None: ...


H = TypeVar("H", contravariant=True)


class QueueStore(Protocol[H]):
    """What the queue types tell the persistence (broker.entities.persistence.Persistence, over the
    host type `H` its placement records name). Only a kept queue (`store` set) calls it."""

    def messages_removed(self, q: Queue, entries: Sequence[Entry]) -> None:
        """Messages left the queue for good (expired, dropped, dead-lettered)."""
        ...

    def queue_purged(self, q: Queue, ready: Sequence[Entry], paged: Sequence[int] = ()) -> None:
        """The ready messages were purged: those in memory and, while some are unacked, the
        stored positions of the paged ones."""
        ...

    def spool_factory(self) -> Callable[[], PageSpool] | None:
        """Where queues page messages out of memory, or None: no paging."""
        ...

    def queue_placed(self, vhost: H, q: Queue) -> None:
        """A replicated queue's members and leader were chosen: they are kept with its record."""
        ...

    def positions_removed(self, q: Queue, seqs: Iterable[int]) -> None:
        """Positions left the queue for good (a stream's retention, a held dead letter forwarded)."""
        ...

    def delivery_state(self, q: Queue, states: Iterable[tuple[int, bool, int, int]]) -> None:
        """(seq, checked_out, delivery_count, return_order) of quorum messages."""
        ...

    def dead_letters_held(self, q: Queue, held: Iterable[tuple[int, str, int]]) -> None:
        """(seq, reason, order) of quorum messages held in the queue's dead-letter store."""
        ...

    def stream_timestamps(self, q: Queue, stamps: Iterable[tuple[int, int]]) -> None:
        """(seq, wall-clock ms) of a stream's chunks."""
        ...

    def stream_written_beside(self, q: Queue) -> None:
        """The stream `q` is about to write a chunk outside this port (a stream-protocol publish
        frame kept whole): what the port still holds of it is written first, so the store keeps
        the stream's positions in order."""
        ...

    def can_read_back(self, q: Queue) -> bool:
        """Whether `read_page` can return the queue's messages (then bodies may leave memory)."""
        ...

    def read_page(self, q: Queue, seq: int, limit: int) -> list[tuple[int, StoredMessage]]:
        """Up to `limit` committed messages of the queue from position `seq` on, in order."""
        ...

    def when_committed(self, q: Queue, callback: Callable[[], None]) -> None:
        """Call `callback` (on the event loop) once every write made so far has committed."""
        ...


class QueueHost(Protocol):
    """What a queue needs from the vhost it lives in (broker.entities.vhost.VHost satisfies it)."""

    @property
    def name(self) -> str: ...

    @property
    def clock(self) -> Clock:
        """Time and timers for message TTL, x-expires and retries."""
        ...

    @property
    def persistence(self) -> QueueStore[Self] | None:
        """What keeps durable state (None: nothing is kept)."""
        ...

    @property
    def active_consumer_selection(self) -> str:
        """How a single active consumer is chosen: "first" or "consistent-hash"."""
        ...

    @property
    def dead_letter_retry_seconds(self) -> float:
        """How long a quorum queue's dead-letter worker waits before forwarding again."""
        ...

    def dead_letter(self, q: Queue, msgs: list[StoredMessage], reason: str) -> int:
        """Publish dead-lettered copies of `msgs` to `q`'s dead-letter exchange; how many queues
        took them (0: none, so a quorum queue's at-least-once worker keeps them)."""
        ...

    def delete_queue(self, q: Queue, reason: str = "deleted") -> int:
        """Remove `q` with its bindings and consumers (x-expires, auto-delete, owner gone)."""
        ...


# -- the queue-type interface ---------------------------------------------------------------------


class Declared(TypedDict):
    """What queue.declare gives a queue besides its vhost and name (every type's constructor)."""

    durable: bool
    exclusive_owner: object | None
    auto_delete: bool
    arguments: FieldTable


class Queue:
    """A queue of any type: the attributes every type keeps, and the operations each implements."""

    type_name: ClassVar[str] = ""

    # state every type keeps (read by channels, policies and the read model)
    vhost: QueueHost
    clock: Clock
    name: str
    durable: bool
    exclusive_owner: object | None
    auto_delete: bool
    arguments: FieldTable
    consumers: deque[Consumer]  # in delivery order
    unacked: int  # delivered, not yet settled
    seq: int  # last position handed out (= messages published into the queue)
    deleted: bool
    store: StoreHandle | None  # set by the vhost's persistence when the queue is kept
    policy: Policy | None  # the effective policy
    single_active: bool
    dlx: str | None
    dlrk: str | None

    # RabbitMQ's per-queue message_stats counters, bumped where messages leave (`seq` +
    # `stat_refused` is the publish count; `stat_refused`: publishes the overflow refused;
    # `stat_empty_get`: see `stats`)
    stat_deliver = stat_deliver_no_ack = stat_get = stat_get_no_ack = stat_redeliver = stat_ack = (
        stat_refused
    ) = 0
    stat_empty_get: bool = False

    def __new__(cls, vhost: QueueHost, name: str, **declared: Unpack[Declared]) -> Queue:
        impl = queue_class(declared["arguments"]) if cls is Queue else cls
        return object.__new__(impl)

    def __init__(
        self,
        vhost: QueueHost,
        name: str,
        *,
        durable: bool,
        exclusive_owner: object | None,
        auto_delete: bool,
        arguments: FieldTable,
    ) -> None:
        """The declared attributes every type keeps; a type's constructor composes its parts after."""
        self.vhost = vhost
        self.clock = vhost.clock
        self.name = name
        self.durable = durable
        self.exclusive_owner = exclusive_owner
        self.auto_delete = auto_delete
        self.arguments = arguments
        self.unacked = 0
        self.deleted = False
        self.store = None
        self.policy = None

    @property
    def rs(self) -> str:
        """The queue as RabbitMQ names it in error texts."""
        return resource_name("queue", self.name, self.vhost.name)

    # -- declaration --------------------------------------------------------------------------

    @classmethod
    def validate_arguments(
        cls, args: FieldTable, qname: str, vhost: str, *, durable: bool, exclusive: bool, auto_delete: bool
    ) -> None:
        """Refuse declare arguments or properties this type does not take (RabbitMQ's replies)."""
        raise NotImplementedError

    def check_equivalent(self, durable: bool, auto_delete: bool, arguments: FieldTable) -> None:
        """A redeclare must match this queue (406 "inequivalent arg ..." as RabbitMQ words it)."""
        raise NotImplementedError

    def check_consume(self, arguments: FieldTable, *, exclusive: bool, no_ack: bool, prefetch: int) -> None:
        """basic.consume's checks for this type (consume arguments, exclusive use, ...)."""
        raise NotImplementedError

    def check_delete(self, *, if_unused: bool, if_empty: bool) -> None:
        """queue.delete's if-unused / if-empty refusals for this type."""
        raise NotImplementedError

    # -- optional hooks: defaults for a single-node, non-replicated type --------------------------

    replicated: ClassVar[bool] = False
    """Whether the type keeps members on several nodes of the (emulated) cluster (`place`)."""
    members: Sequence[str] = ()
    leader: str | None = None

    def place(
        self, nodes: Sequence[str], declaring: str, replicas: Mapping[str, int], leaders: Mapping[str, int]
    ) -> None:
        """Choose the nodes a replicated queue lives on; a non-replicated one is the declarer's."""

    def restore_placement(self, members: Sequence[str], leader: str) -> None:
        """At boot, before the queue is added: the members and leader its stored record kept (none
        for a non-replicated type, or a record stored before placements were kept)."""

    def is_policy_applicable(self, policy: Policy) -> bool:
        """Whether a matching policy may apply at all (a type may refuse a policy as a whole)."""
        return True

    def check_reject(self) -> None:
        """basic.reject / basic.nack's refusal, for types that keep every message (streams)."""

    def check_recover(self) -> None:
        """basic.recover's refusal while the channel holds an unacked delivery of this queue, for
        types whose requeue RabbitMQ cannot do (a stream's crashes its channel: `internal_error`)."""

    def check_global_qos(self, global_prefetch: int) -> None:
        """basic.consume's refusal of a channel-wide prefetch, for types that do not support one."""

    def requeue_on_close(self, entries: list[Entry]) -> None:
        """A closed channel's unacked messages come back (a type may order or count them apart
        from a nack's requeue)."""
        self.requeue(entries)

    def reset_expiry(self) -> None:
        """The queue was used (declared, consumed, fetched): restart its x-expires countdown."""
        raise NotImplementedError

    def apply_policy(self, policy: Policy | None) -> None:
        """Apply an effective policy (or None) on top of the x-arguments."""
        raise NotImplementedError

    # -- messages in --------------------------------------------------------------------------

    @property
    def overflow(self) -> str:
        """What a full queue does: "drop-head", "reject-publish" or "reject-publish-dlx"."""
        raise NotImplementedError

    def would_overflow(self, size: int) -> bool:
        """True when a message of `size` body bytes must be refused (reject-publish limits)."""
        raise NotImplementedError

    def enqueue(self, msg: StoredMessage, seq: int = 0) -> None:
        """Accept a routed message; `seq` a position reserved by persistence, else the next."""
        raise NotImplementedError

    def enqueue_run(self, msgs: list[StoredMessage]) -> None:
        """`enqueue` of each of `msgs`, in order (a type may take them together)."""
        enqueue = self.enqueue
        for msg in msgs:
            enqueue(msg)

    def crashes_on(self, msg: StoredMessage) -> bool:
        """Whether `enqueue(msg)` would crash (a publishing channel gets 541 INTERNAL_ERROR); a
        dead letter, which has no channel to close, is not delivered to such a queue."""
        return False

    def restore(self, seq: int, msg: StoredMessage, redelivered: bool) -> None:
        """Put back a message read from the store at boot (no delivery, no write)."""
        raise NotImplementedError

    keeps_transient: ClassVar[bool] = False
    """Whether a kept queue of the type stores transient messages too (`publish` writes them)."""

    def restore_state(self, state: dict[int, tuple[int, int, int]]) -> None:
        """Before `restore`: seq -> (delivery_count, return_order, timestamp ms) the store kept
        beside the messages (quorum queues, streams); other types keep none."""

    def restore_dead_letters(self, held: Mapping[int, tuple[str, int]]) -> None:
        """Before `restore`: seq -> (reason, order) of the messages the store kept as held in the
        queue's dead-letter store (quorum queues' at-least-once dead-lettering); other types hold none."""

    def purge_keeps_stored(self) -> bool:
        """Whether stored positions besides the ready messages stay through a purge (unacked
        messages; a quorum queue's held dead letters): then the purged ones are forgotten by name."""
        return self.unacked > 0

    # -- messages out -------------------------------------------------------------------------

    def try_deliver(self) -> None:
        """Hand ready messages to consumers with credit."""
        raise NotImplementedError

    def get(self, no_ack: bool) -> Entry | None:
        """basic.get: take the head message; `count` is then what get-ok reports."""
        raise NotImplementedError

    def deliver_to(self, consumer: Consumer, entry: Entry) -> None:
        """Give a message to a consumer: the one place a delivery is counted in message_stats."""
        if consumer.no_ack:
            self.stat_deliver_no_ack += 1
        else:
            self.unacked += 1
            self.stat_deliver += 1
        if entry.redelivered:
            self.stat_redeliver += 1
        consumer.channel.deliver(consumer, self, entry)

    def count_get(self, entry: Entry, no_ack: bool) -> None:
        """basic.get's message_stats counters for a fetched message."""
        if no_ack:
            self.stat_get_no_ack += 1
        else:
            self.stat_get += 1
        if entry.redelivered:
            self.stat_redeliver += 1

    def settled(self, n: int = 1) -> None:
        """`n` unacked messages were acked, rejected or requeued."""
        self.unacked -= n

    def ack(self, entries: Sequence[Entry]) -> None:
        """Consumers acked these deliveries: they leave the queue for good (and count as acks)."""
        self.unacked -= len(entries)
        self.stat_ack += len(entries)

    def forget_unstored(self, seq: int) -> bool:
        """The store write of the message at `seq` failed and its publisher is nacked: take it out
        if it is still ready, so the queue holds only what a restart brings back; True if it was.
        A type that keeps a log (streams) leaves it there, as RabbitMQ's stream keeps what it wrote."""
        return False

    def requeue(self, entries: list[Entry]) -> None:
        """Return unacked messages (marked redelivered) and deliver again."""
        raise NotImplementedError

    def dead_letter(self, entries: list[Entry], reason: str) -> None:
        """Messages leave for good ("rejected", "expired", "maxlen"): a kept queue's store forgets
        them, then they are dead-lettered to the queue's dead-letter exchange, if any."""
        persistence = self.vhost.persistence
        if self.store is not None and entries and persistence is not None:
            persistence.messages_removed(self, entries)
        if entries and self.dlx is not None:
            self.vhost.dead_letter(self, [e.msg for e in entries], reason)

    def purge(self) -> int:
        """Drop the ready messages; returns how many."""
        raise NotImplementedError

    def delete(self) -> int:
        """The vhost deletes the queue: cancel its consumers and timers, drop its messages;
        returns the ready count it had."""
        raise NotImplementedError

    # -- consumers ----------------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        raise NotImplementedError

    def remove_consumer(self, consumer: Consumer) -> None:
        raise NotImplementedError

    @property
    def active_consumer(self) -> Consumer | None:
        """The single active consumer (single-active-consumer queues, ring members), else None."""
        raise NotImplementedError

    # -- reading ------------------------------------------------------------------------------

    @property
    def count(self) -> int:
        """Ready messages."""
        raise NotImplementedError

    @property
    def bytes(self) -> int:
        """Body bytes of the ready messages."""
        raise NotImplementedError

    @property
    def message_count(self) -> int:
        """Ready messages after dropping the expired head (queue.declare-ok's count)."""
        raise NotImplementedError

    @property
    def consumer_count(self) -> int:
        return len(self.consumers)

    @property
    def stats(self) -> dict[str, int]:
        """The queue's message_stats counters as RabbitMQ 3.10.8 reports them (observed live).

        `publish` appears once a message entered the queue; the deliver-side keys once a basic.get
        or a delivery happened, zeros included. `get_empty` stays 0: 3.10.8 counts empty gets per
        channel, never per queue.
        """
        out: dict[str, int] = {}
        if self.seq or self.stat_refused:
            out["publish"] = self.seq + self.stat_refused
        delivered = self.stat_deliver + self.stat_deliver_no_ack + self.stat_get + self.stat_get_no_ack
        if delivered or self.stat_empty_get:
            out["ack"] = self.stat_ack
            out["deliver"] = self.stat_deliver
            out["deliver_no_ack"] = self.stat_deliver_no_ack
            out["get"] = self.stat_get
            out["get_no_ack"] = self.stat_get_no_ack
            out["get_empty"] = 0
            out["deliver_get"] = delivered
            out["redeliver"] = self.stat_redeliver
        return out

    @property
    def policy_name(self) -> str | None:
        return self.policy.name if self.policy is not None else None

    def details(self) -> dict[str, object]:
        """Type-specific read-model fields (none for classic queues)."""
        return {}

    def info(self) -> QueueView:
        """A snapshot for management and tools (no expiry runs while reading)."""
        active = self.active_consumer
        consumers = tuple(
            ConsumerView(
                tag=c.tag,
                ack_required=not c.no_ack,
                exclusive=c.exclusive,
                prefetch_count=c.prefetch,
                priority=c.priority,
                arguments=c.args,
                active=active is None or c is active,
                channel=c.channel,
            )
            for c in self.consumers
        )
        return QueueView(
            vhost=self.vhost.name,
            name=self.name,
            type=self.type_name,
            durable=self.durable,
            auto_delete=self.auto_delete,
            exclusive=self.exclusive_owner is not None,
            owner=self.exclusive_owner,
            arguments=self.arguments,
            policy=self.policy_name,
            messages_ready=self.count,
            messages_unacknowledged=self.unacked,
            message_bytes_ready=self.bytes,
            consumers=consumers,
            single_active_consumer_tag=active.tag if active is not None else None,
            exclusive_consumer_tag=next((c.tag for c in self.consumers if c.exclusive), None),
            stats=self.stats,
            details=self.details(),
        )


INTERFACE: tuple[str, ...] = (
    "validate_arguments",
    "check_equivalent",
    "check_consume",
    "check_delete",
    "reset_expiry",
    "apply_policy",
    "overflow",
    "would_overflow",
    "enqueue",
    "restore",
    "try_deliver",
    "get",
    "requeue",
    "purge",
    "delete",
    "add_consumer",
    "remove_consumer",
    "active_consumer",
    "count",
    "bytes",
    "message_count",
)

DEFAULT_TYPE = "classic"
_TYPES: dict[str, type[Queue]] = {}
Q = TypeVar("Q", bound=type[Queue])

#: Types whose module is imported on their first declaration (or boot restore), not at start: a
#: broker that never sees a quorum queue or a stream does not pay their import time and memory.
_LAZY_MODULES = {
    "quorum": "broker.entities.queues.quorum.queue",
    "stream": "broker.entities.queues.stream.queue",
}


def _registered(name: str) -> type[Queue] | None:
    cls = _TYPES.get(name)
    if cls is None and name in _LAZY_MODULES:
        import importlib

        importlib.import_module(_LAZY_MODULES[name])
        cls = _TYPES.get(name)
    return cls


def register(cls: Q) -> Q:
    """Class decorator: make a queue type available under its `type_name`."""
    missing = [n for n in INTERFACE if next(k for k in cls.__mro__ if n in k.__dict__) is Queue]
    if not cls.type_name or missing:
        raise TypeError(f"queue type {cls.__name__} does not implement {', '.join(missing) or 'type_name'}")
    _TYPES[cls.type_name] = cls
    return cls


def type_name_of(arguments: FieldTable) -> str:
    f = arguments.get("x-queue-type")
    if f is None or f.type != "longstr":
        return DEFAULT_TYPE
    return str(f.value.decode("utf-8", errors="surrogateescape"))


def find_queue_type(name: str) -> type[Queue] | None:
    return _registered(name)


def queue_class(arguments: FieldTable) -> type[Queue]:
    """The registered type `x-queue-type` names (540 for a type hashbroker does not have)."""
    name = type_name_of(arguments)
    cls = _registered(name)
    if cls is None:
        raise not_implemented(f"queue type '{name}' is not supported by hashbroker")
    return cls


def queue_type_names() -> list[str]:
    return sorted({*_TYPES, *_LAZY_MODULES})
