"""What the management plugin needs from the broker, stated as protocols (the broker satisfies them).

The management API runs above the whole broker and could reach anything in it; these protocols say
what it actually uses, so the rest of the broker can change behind them and the management modules
need not import the server. `ManagementBroker` is the object the server hands over when it starts
the plugin (`broker.management.start_management`); the server's `Broker` matches it structurally, and
mypy checks that where the server makes the call.

Reads go through views: the entities' own (`Queue.info()`, `Exchange.info()`, the read model in
`broker.entities.info`) and, for AMQP connections and channels, the few session members below
(`ConnectionReads`, `ChannelReads`), which `broker.management.sessions` turns into session views.
Changes go through the admin operations here (vhosts, users and permissions in the registry,
policies, cluster nodes, tracing on a vhost) and through an AMQP session of the caller for queues,
exchanges, bindings and messages; `broker.management.writes` is the one module that makes them.
"""

from __future__ import annotations

import builtins
from collections.abc import Collection, Mapping, Sized
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from broker.session.ports import AlarmView, ChannelIdentity, ConnectionIdentity, Server, ServerSettings

if TYPE_CHECKING:
    from amqpwire.errors import AmqpError
    from amqpwire.fields import FieldTable
    from broker.entities.cluster import Cluster
    from broker.entities.events import Events
    from broker.entities.policy import Policy
    from broker.entities.users import Registry


class ManagementSettings(ServerSettings, Protocol):
    """The settings the management API reports or applies, beyond those of a connection (the
    login rules among them)."""

    @property
    def rabbitmq_compat_version(self) -> str: ...
    @property
    def default_user(self) -> str: ...


# -- sessions ------------------------------------------------------------------------------------


class MessageReads(Protocol):
    @property
    def body(self) -> bytes: ...


class EntryReads(Protocol):
    @property
    def msg(self) -> MessageReads: ...


class UnackedReads(Protocol):
    """One delivery a channel holds until it is acknowledged."""

    @property
    def queue(self) -> object: ...  # the queue it came from, by identity
    @property
    def entry(self) -> EntryReads: ...


class LimiterReads(Protocol):
    @property
    def prefetch(self) -> int: ...
    @property
    def global_prefetch(self) -> int: ...


class ChannelReads(ChannelIdentity, Protocol):
    """What /api/channels shows of an AMQP channel: which one it is, and its state."""

    @property
    def consumers(self) -> Sized: ...
    @property
    def unacked(self) -> Mapping[int, UnackedReads]: ...
    @property
    def limiter(self) -> LimiterReads: ...
    @property
    def confirm(self) -> bool: ...
    @property
    def tx(self) -> object: ...  # None unless the channel is transactional


@runtime_checkable
class TracksClient(Protocol):
    """What a session records about its client and its traffic (RabbitMQ's connection stats)."""

    @property
    def client_properties(self) -> FieldTable: ...
    @property
    def user_provided_name(self) -> str | None: ...
    @property
    def connected_at(self) -> int: ...  # ms since the epoch
    @property
    def recv_oct(self) -> int: ...
    @property
    def send_oct(self) -> int: ...
    @property
    def recv_cnt(self) -> int: ...
    @property
    def send_cnt(self) -> int: ...


class ConnectionReads(TracksClient, ConnectionIdentity, Protocol):
    """What /api/connections shows of an AMQP connection: who it is, what it records of its
    client, and the rest below."""

    @property
    def vhost_name(self) -> str: ...
    @property
    def peer(self) -> str: ...  # "host:port"
    @property
    def state(self) -> str: ...
    @property
    def frame_max(self) -> int: ...
    @property
    def channel_max(self) -> int: ...
    @property
    def heartbeat(self) -> int: ...
    @property
    def auth_mechanism(self) -> str: ...
    @property
    def tls_info(self) -> Mapping[str, str | None] | None: ...  # None: not TLS
    @property
    def channels(self) -> Mapping[int, ChannelReads]: ...
    def fail(self, err: AmqpError, culprit: tuple[int, int], fatal: bool = False, detail: str = "") -> None:
        """Close the connection with `err` (DELETE /api/connections/{name} sends 320)."""


# -- stream protocol sessions --------------------------------------------------------------------


class StreamPublisherReads(Protocol):
    """What /api/stream/publishers shows of a declared publisher."""

    publisher_id: int
    stream: str
    reference: str | None
    published: int
    confirmed: int
    errored: int


class StreamSubscriptionReads(Protocol):
    """What /api/stream/consumers shows of a subscription (`credit` in chunks, `offset` the
    first offset of the last chunk sent)."""

    subscription_id: int
    stream: str
    credit: int
    consumed: int
    offset: int

    @property
    def properties(self) -> Mapping[str, str]: ...
    @property
    def committed_offset(self) -> int: ...


class StreamConnectionReads(Protocol):
    """What /api/stream/connections shows of a stream-protocol connection: who, from where, the
    negotiated limits, the socket counters, its publishers and subscriptions by id."""

    username: str
    vhost: str
    peer_host: str
    peer_port: int
    host: str
    port: int
    auth_mechanism: str
    frame_max: int
    heartbeat: int | None
    connected_at: int  # ms since the epoch
    recv_cnt: int
    recv_oct: int
    send_cnt: int
    send_oct: int

    @property
    def name(self) -> str: ...
    @property
    def is_open(self) -> bool: ...
    @property
    def client_properties(self) -> Mapping[str, str]: ...
    @property
    def publishers(self) -> Mapping[int, StreamPublisherReads]: ...
    @property
    def subscriptions(self) -> Mapping[int, StreamSubscriptionReads]: ...
    def force_close(self, reason: str) -> None: ...  # the socket closes, no close frame is sent


# -- node ----------------------------------------------------------------------------------------


class AlarmReads(AlarmView, Protocol):
    """The resource monitor as a connection sees it (which alarms are set), and the figures
    /api/nodes reports."""

    @property
    def memory_limit(self) -> int: ...
    @property
    def mem_alarm(self) -> bool: ...
    @property
    def disk_free(self) -> int: ...
    @property
    def disk_limit(self) -> int: ...
    @property
    def disk_alarm(self) -> bool: ...


class PolicyAdmin(Protocol):
    """The policy engine: stored policies, and the emulated cluster's membership (sharding follows
    the nodes, so joining and leaving go through the engine)."""

    def list(self, vhost: str | None = None) -> builtins.list[Policy]: ...
    def get(self, vhost: str, name: str) -> Policy | None: ...
    def put(self, policy: Policy) -> bool: ...  # True when new
    def delete(self, vhost: str, name: str) -> bool: ...
    def add_node(self, node: str) -> bool: ...  # False when already a member
    def remove_node(self, node: str) -> None: ...
    def queue_node(self, queue_name: str) -> str: ...


# -- the broker ----------------------------------------------------------------------------------


class ManagementBroker(Server, Protocol):
    """The running broker as the management plugin sees it: what a connection sees of it (the AMQP
    listener's address, the vhosts, the settings, alarms and cluster, which management reads in
    more detail), and the admin surface below.

    Call everything on the broker's event loop (the management server runs there), which is what
    makes reading the broker's unlocked state safe.
    """

    @property
    def settings(self) -> ManagementSettings: ...
    @property
    def tls_port(self) -> int | None: ...  # the AMQPS listener, None when off
    @property
    def connections(self) -> Collection[ConnectionReads]: ...
    @property
    def stream_connections(self) -> Collection[StreamConnectionReads]: ...  # empty: no stream listener
    @property
    def auth(self) -> Registry: ...  # users and permissions
    @property
    def events(self) -> Events: ...  # the event hub the writes tell (broker.entities.events)
    @property
    def policies(self) -> PolicyAdmin: ...
    @property
    def cluster(self) -> Cluster: ...
    @property
    def alarms(self) -> AlarmReads: ...
    @property
    def store(self) -> object: ...  # the message store (broker.store.health reads its state); None
    def check_credentials(self, user: str, password: str) -> bool: ...
    def reply_channel_exists(self, suffix: str) -> bool: ...
    def add_vhost(self, name: str, description: str = "", tags: tuple[str, ...] = ()) -> bool: ...
    def delete_vhost(self, name: str) -> bool: ...
