"""The read model of the entities: what the management API, `ctl` and definitions export show.

Plain frozen snapshots built by `Queue.info()`, `Exchange.info()`, `Consumer`/`VHost` properties,
so readers never reach into a queue type's internals or guess attribute names. Reading one never
changes the broker (no expiry runs while a snapshot is taken).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from amqpwire.fields import FieldTable

if TYPE_CHECKING:
    from exchanges.base import Binding


@dataclass(frozen=True)
class ConsumerView:
    tag: str
    ack_required: bool
    exclusive: bool
    prefetch_count: int
    priority: int
    arguments: FieldTable
    active: bool  # false only for the waiting consumers of a single-active-consumer queue
    channel: object  # the owning channel (the session layer knows its connection and number)


@dataclass(frozen=True)
class QueueView:
    vhost: str
    name: str
    type: str  # x-queue-type: "classic", ...
    durable: bool
    auto_delete: bool
    exclusive: bool
    owner: object | None  # the exclusive owner connection
    arguments: FieldTable
    policy: str | None  # name of the effective policy
    messages_ready: int
    messages_unacknowledged: int
    message_bytes_ready: int
    consumers: tuple[ConsumerView, ...]
    single_active_consumer_tag: str | None
    exclusive_consumer_tag: str | None
    stats: Mapping[str, int]  # RabbitMQ's message_stats counters (Queue.stats)
    details: Mapping[str, object] = field(default_factory=dict)  # type-specific (leader, members, ...)


@dataclass(frozen=True)
class ExchangeView:
    vhost: str
    name: str
    type: str
    durable: bool
    auto_delete: bool
    internal: bool
    arguments: FieldTable
    policy: str | None
    bindings: tuple[Binding, ...]  # in binding order (routing state for x-consistent-hash)
    routing_state: Mapping[str, object]  # the exchange type's state_summary, {} for none
