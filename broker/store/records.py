"""Plain records the store writes and `load()` returns: no broker objects, so the store stays a leaf.

The broker converts its entities to these at the moment of a change and back when it rebuilds after
a restart. Arguments stay `FieldTable`s (typed AMQP values, order and duplicates kept) because
`x-arguments` and binding arguments must come back exactly as declared: RabbitMQ compares them for
equivalence on redeclare, and the headers exchange matches on their types.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from amqpwire.fields import FieldTable


@dataclass(frozen=True, slots=True)
class VHostRecord:
    name: str
    description: str = ""
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class UserRecord:
    """`password_hash` is whatever the broker's auth layer stores (never a clear-text password)."""

    name: str
    password_hash: str = ""
    hashing_algorithm: str = "rabbit_password_hashing_sha256"
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PermissionRecord:
    """A user's configure/write/read regexes in one vhost."""

    vhost: str
    user: str
    configure: str = ".*"
    write: str = ".*"
    read: str = ".*"


@dataclass(frozen=True, slots=True)
class NamedInVHost:
    """What a record of a thing named within a vhost starts with: its key in the store (the
    policies, exchanges and queues tables are keyed by vhost and name)."""

    vhost: str
    name: str


@dataclass(frozen=True, slots=True)
class PolicyRecord(NamedInVHost):
    """A user policy as `broker.entities.policy.PolicyStore.set` takes it; `definition` is its JSON text."""

    pattern: str
    definition: str
    priority: int = 0
    apply_to: str = "all"


@dataclass(frozen=True, slots=True)
class ExchangeRecord(NamedInVHost):
    type: str
    durable: bool = True
    auto_delete: bool = False
    internal: bool = False
    arguments: FieldTable = field(default_factory=FieldTable)


@dataclass(frozen=True, slots=True)
class QueueRecord(NamedInVHost):
    """A durable queue. `members` and `leader`: where a replicated (quorum) queue was placed on the
    emulated cluster, kept as RabbitMQ keeps the node list in its queue record; empty when the
    queue is not replicated or was stored before placements were kept."""

    durable: bool = True
    exclusive: bool = False
    auto_delete: bool = False
    arguments: FieldTable = field(default_factory=FieldTable)
    members: tuple[str, ...] = ()
    leader: str = ""


@dataclass(frozen=True, slots=True)
class BindingRecord:
    """One binding; `destination_kind` is "queue" or "exchange" (as `exchanges.base.Destination`)."""

    vhost: str
    source: str
    destination_kind: str
    destination: str
    key: str = ""
    arguments: FieldTable = field(default_factory=FieldTable)


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """One persistent message in one queue, as `load()` returns it.

    `seq` is the queue's position (`broker.entities.queues.catalog.Entry.seq`); `properties` are the
    content-header property bytes exactly as received (property flags + property list, i.e.
    `StoredMessage.props`; the class id, weight and body size in front of them are derived).
    """

    vhost: str
    queue: str
    seq: int
    properties: bytes
    body: bytes
    exchange: str
    routing_key: str
    redelivered: bool = False


@dataclass(frozen=True, slots=True)
class DelayedRecord:
    """A message a durable x-delayed-message exchange holds until `due_ms` (wall-clock
    milliseconds), as the plugin keeps it in its disc table. `key` names it in its vhost (the
    broker hands keys out); `routing_key` and `properties` are the message's as published to
    `exchange`."""

    vhost: str
    key: int
    exchange: str
    due_ms: int
    routing_key: str
    properties: bytes
    body: bytes


MessageWrite = tuple[Sequence[tuple[str, int]], bytes, bytes, str, str]
"""A message to store (`Store.write_messages`): its (queue, seq) positions, then its properties,
body, exchange and routing key."""


@dataclass(slots=True)
class Snapshot:
    """Everything durable, in the order the broker must rebuild it.

    Bindings are in the order they were made (per store, across sources), so replaying them rebuilds
    x-consistent-hash rings bucket for bucket. `messages` maps (vhost, queue) to that queue's
    messages in `seq` order; only queues present in `queues` appear.
    """

    vhosts: list[VHostRecord] = field(default_factory=list)
    users: list[UserRecord] = field(default_factory=list)
    permissions: list[PermissionRecord] = field(default_factory=list)
    policies: list[PolicyRecord] = field(default_factory=list)
    exchanges: list[ExchangeRecord] = field(default_factory=list)
    queues: list[QueueRecord] = field(default_factory=list)
    bindings: list[BindingRecord] = field(default_factory=list)
    messages: dict[tuple[str, str], list[MessageRecord]] = field(default_factory=dict)
    #: (vhost, queue) -> seq -> (delivery_count, return_order, timestamp ms) where any is set: the
    #: state quorum queues and streams keep per position beside `messages`.
    queue_state: dict[tuple[str, str], dict[int, tuple[int, int, int]]] = field(default_factory=dict)
    #: (vhost, queue) -> seq -> (dead-letter reason, place in the store) of the quorum messages held
    #: in their queue's dead-letter store (at-least-once: no queue took them yet).
    dead_letters: dict[tuple[str, str], dict[int, tuple[str, int]]] = field(default_factory=dict)
    #: with `load(messages=False)`: (vhost, queue) -> (message count, body bytes, last seq) instead
    depths: dict[tuple[str, str], tuple[int, int, int]] = field(default_factory=dict)
    #: the messages durable delayed exchanges hold, by vhost and key
    delayed: list[DelayedRecord] = field(default_factory=list)

    @property
    def message_count(self) -> int:
        return sum(len(m) for m in self.messages.values())
