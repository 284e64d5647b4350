"""The queue-type behaviour (RabbitMQ's rabbit_queue_type) and the registry keyed by x-queue-type.

`Queue` is what channels, vhosts, policies and management use for every queue; each queue type is a
subclass in its own module that registers itself with `@register`. `Queue(vhost, name, ...)` builds
the type that the `x-queue-type` argument names (classic when absent), so a new type is a new
module that registers itself, not a new branch in the callers. `register` refuses a type that
leaves any of `INTERFACE` unimplemented.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, TypeVar

from amqpwire.errors import AmqpError, ReplyCode
from amqpwire.fields import Field, FieldTable
from broker.entities.info import ConsumerView, QueueView

if TYPE_CHECKING:
    from broker.entities.message import StoredMessage
    from broker.entities.policy import Policy
    from broker.entities.queues.consumers import Consumer
    from broker.entities.vhost import VHost
    from broker.store import Store


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


class Queue:
    """A queue of any type: the attributes every type keeps, and the operations each implements."""

    type_name: ClassVar[str] = ""

    # state every type keeps (read by channels, policies and the read model)
    vhost: VHost
    name: str
    name_wire: bytes  # the name as an AMQP shortstr
    durable: bool
    exclusive_owner: object | None
    auto_delete: bool
    arguments: FieldTable
    consumers: deque[Consumer]  # in delivery order
    count: int  # ready messages
    bytes: int  # body bytes of the ready messages
    unacked: int  # delivered, not yet settled
    seq: int  # last position handed out (= messages published into the queue)
    deleted: bool
    store: Store | None  # set by the vhost's persistence when the queue is kept
    policy: Policy | None  # the effective policy
    single_active: bool
    overflow: str
    dlx: str | None
    dlrk: str | None
    stat_ack: int
    stat_refused: int = 0  # publishes its overflow refused: they count in message_stats `publish`

    def __new__(
        cls,
        vhost: VHost,
        name: str,
        *,
        durable: bool,
        exclusive_owner: object | None,
        auto_delete: bool,
        arguments: FieldTable,
    ) -> Queue:
        impl = queue_class(arguments) if cls is Queue else cls
        return object.__new__(impl)

    def _set_identity(
        self,
        vhost: VHost,
        name: str,
        durable: bool,
        exclusive_owner: object | None,
        auto_delete: bool,
        arguments: FieldTable,
    ) -> None:
        """The declared attributes every type keeps, as its constructor received them."""
        self.vhost = vhost
        self.clock = vhost.clock
        self.name = name
        raw = name.encode("utf-8", errors="surrogateescape")
        self.name_wire = bytes((len(raw),)) + raw
        self.durable = durable
        self.exclusive_owner = exclusive_owner
        self.auto_delete = auto_delete
        self.arguments = arguments

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

    def would_overflow(self, size: int) -> bool:
        """True when a message of `size` body bytes must be refused (reject-publish limits)."""
        raise NotImplementedError

    def enqueue(self, msg: StoredMessage, seq: int = 0) -> None:
        """Accept a routed message; `seq` a position reserved by persistence, else the next."""
        raise NotImplementedError

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

    def settled(self, n: int = 1) -> None:
        """`n` unacked messages were acked, rejected or requeued."""
        raise NotImplementedError

    def ack(self, entries: Sequence[Entry]) -> None:
        """Consumers acked these deliveries: they leave the queue for good (and count as acks)."""
        raise NotImplementedError

    def forget_unstored(self, seq: int) -> bool:
        """The store write of the message at `seq` failed and its publisher is nacked: take it out
        if it is still ready, so the queue holds only what a restart brings back; True if it was.
        A type that keeps a log (streams) leaves it there, as RabbitMQ's stream keeps what it wrote."""
        return False

    def requeue(self, entries: list[Entry]) -> None:
        """Return unacked messages (marked redelivered) and deliver again."""
        raise NotImplementedError

    def dead_letter(self, entries: list[Entry], reason: str) -> None:
        """Messages leave for good ("rejected", "expired", "maxlen"): forget, then dead-letter."""
        raise NotImplementedError

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
    def message_count(self) -> int:
        """Ready messages after dropping the expired head (queue.declare-ok's count)."""
        raise NotImplementedError

    @property
    def consumer_count(self) -> int:
        return len(self.consumers)

    @property
    def stats(self) -> dict[str, int]:
        """RabbitMQ's per-queue message_stats counters."""
        raise NotImplementedError

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

    def header_field(self) -> Field:
        return Field("longstr", self.name.encode())


INTERFACE: tuple[str, ...] = (
    "validate_arguments",
    "check_equivalent",
    "check_consume",
    "check_delete",
    "reset_expiry",
    "apply_policy",
    "would_overflow",
    "enqueue",
    "restore",
    "try_deliver",
    "get",
    "settled",
    "ack",
    "requeue",
    "dead_letter",
    "purge",
    "delete",
    "add_consumer",
    "remove_consumer",
    "active_consumer",
    "message_count",
    "stats",
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
        raise AmqpError(ReplyCode.NOT_IMPLEMENTED, f"queue type '{name}' is not supported by hashbroker")
    return cls


def queue_type_names() -> list[str]:
    return sorted({*_TYPES, *_LAZY_MODULES})
