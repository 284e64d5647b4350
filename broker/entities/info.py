"""The read model: what the management API, `ctl` and definitions export show of the broker.

Plain frozen snapshots. `Queue.info()` and `Exchange.info()` build the entities' views, so readers
never reach into a queue type's internals or guess attribute names; the session views
(`ConnectionView`, `ChannelView`) describe AMQP connections and channels with plain values, so a
reader needs no session type. Reading one never changes the broker (no expiry runs while a snapshot
is taken).

The views refer to sessions only by identity: `ConsumerView.channel` and `QueueView.owner` are the
session objects themselves, opaque here (this layer sits below the sessions); a reader that shows
them joins them with the session views of the same objects.
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
    channel: object  # the owning channel, by identity (see ChannelView)


@dataclass(frozen=True)
class QueueView:
    vhost: str
    name: str
    type: str  # x-queue-type: "classic", ...
    durable: bool
    auto_delete: bool
    exclusive: bool
    owner: object | None  # the exclusive owner connection, by identity (see ConnectionView)
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
    # Body bytes of the messages delivered and awaiting an ack. The deliveries are held by the
    # channels, so whoever builds the view from the queue alone leaves 0 and the reader that holds
    # the session views fills it in.
    message_bytes_unacknowledged: int = 0


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
    publish_in: int = 0  # publishes to this exchange (RabbitMQ's message_stats.publish_in)
    publish_out: int = 0  # queues its publishes reached (message_stats.publish_out)
    # The detail a listing of every exchange must not pay for: the bindings cost O(bindings) and
    # the routing state O(ring size) to snapshot. Readers that need them take
    # `Exchange.bindings_in_order()` and `Exchange.routing_state`; a view built without them
    # leaves these empty.
    bindings: tuple[Binding, ...] = ()
    routing_state: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class BindingView:
    """One binding as RabbitMQ lists it: from `source` (an exchange, "" the default one) to a queue
    or an exchange."""

    vhost: str
    source: str
    destination: str
    destination_type: str  # "queue" or "exchange"
    routing_key: str
    arguments: FieldTable

    @classmethod
    def of(cls, vhost: str, source: str, binding: Binding) -> BindingView:
        d = binding.destination
        return cls(vhost, source, d.name, d.kind, binding.key, binding.arguments)


@dataclass(frozen=True)
class ConnectionView:
    """An AMQP connection: who, from where, the negotiated limits and the traffic counters."""

    name: str
    user: str
    vhost: str
    peer_host: str
    peer_port: int
    host: str  # the listener the client connected to
    port: int
    channels: int
    state: str
    frame_max: int
    channel_max: int
    timeout: int  # the negotiated heartbeat, seconds
    auth_mechanism: str
    client_properties: FieldTable  # as the client sent them
    user_provided_name: str | None  # the client's "connection_name" property
    connected_at: int  # ms since the epoch
    recv_oct: int  # bytes read
    send_oct: int  # bytes written
    recv_cnt: int  # frames read
    send_cnt: int  # frames written
    tls: Mapping[str, str | None] | None = None  # ssl_protocol, ssl_cipher, peer_cert_subject...


@dataclass(frozen=True)
class ChannelView:
    number: int
    connection: ConnectionView
    consumer_count: int
    messages_unacknowledged: int
    prefetch_count: int  # for consumers created from now on (basic.qos global=false)
    global_prefetch_count: int  # the channel-wide limit (basic.qos global=true)
    confirm: bool
    transactional: bool
