"""What the session needs from the layers around it, stated as protocols (aiormq's `abc.py` is the model).

The session (a connection, its channels) is driven by bytes and writes bytes; everything else it
uses comes through these ports, which the objects above satisfy structurally:

- `Server`: what one connection reads of the broker it belongs to. The application shell's
  broker object implements it; the session's unit tests pass a small fake. It is made of
  `ServerSettings` (the settings the session reads), `AccessControl` (logins and permissions),
  `AlarmView` (publishers blocked or in flow), `NodeName` (the node clients are told they
  reached), the direct reply-to registry, the registry of open connections, the vhosts by name and
  the `MessageLedger` (what the store keeps of deliveries).
- `ChannelServer`: the part of `Server` a channel reads (access checks, the ledger, direct
  reply-to).
- `ChannelOwner`: what a channel needs from the connection that owns it: an `Outbox` for what it
  sends (typed messages, which the owner encodes), the acting user's permission check, the vhost,
  and closing. `broker.session.connection` implements it over a socket; management's in-process
  session implements it in memory.
- `ChannelHandle`: what a connection needs from its channels (closing them, flushing confirms).
- `Transport` and `Scheduler`: the byte stream under a connection and the loop that runs its timers.

The session imports this module, the entities and the protocol, and nothing above itself: no
broker object, no store, no runtime module.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Container, Mapping, Sequence, Set
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from amqpwire.errors import AmqpError
    from broker.entities.message import StoredMessage
    from broker.entities.queues.catalog import Consumer, Entry, Queue
    from broker.entities.vhost import VHost


# -- the server, as a connection sees it ---------------------------------------------------------------


class ServerSettings(Protocol):
    """The settings a connection reads: the limits it offers at tune and the login rules."""

    @property
    def channel_max(self) -> int: ...

    @property
    def frame_max(self) -> int: ...

    @property
    def heartbeat(self) -> int: ...

    @property
    def max_message_size(self) -> int:
        """The largest message body a publisher may send (406 beyond)."""
        ...

    @property
    def loopback_users(self) -> Collection[str]:
        """Users who may log in only from the local host."""
        ...

    @property
    def silent_close_delay(self) -> float:
        """Seconds a connection refused at login, failed in its handshake or closed for a fatal
        frame error is kept, unread, before its socket is reset (RabbitMQ's ?SILENT_CLOSE_DELAY, 3 s)."""
        ...


class AccessControl(Protocol):
    """The user registry: who may log in, enter a vhost and use a resource."""

    @property
    def version(self) -> int:
        """Bumped by every user or permission change: a channel's cached grants are void after one."""
        ...

    @property
    def permissions(self) -> Container[tuple[str, str]]:
        """(vhost, user) pairs with a permission entry: connection.open needs one."""
        ...

    def check_credentials(self, name: str, password: str) -> bool: ...

    @property
    def users(self) -> Container[str]:
        """The names of the users who exist (EXTERNAL logs a user in by name, without a password)."""
        ...

    def check(self, user: str, vhost: str, kind: str, resource: str, name: str) -> None:
        """rabbit_access_control:check_resource_access: raise 403 unless the user's `kind` pattern
        (configure, write or read) in `vhost` matches `name`."""
        ...


class AlarmView(Protocol):
    """Whether publishers must wait, read once per socket read."""

    @property
    def blocked_by(self) -> Set[str]:
        """The resources with an alarm set; empty (falsy) while publishers may go on."""
        ...

    @property
    def flow(self) -> bool:
        """The store is behind its publishers: a publishing connection is not read until it catches up."""
        ...

    @property
    def reason(self) -> str:
        """connection.blocked's text for the alarms set now ("low on memory")."""
        ...


class NodeName(Protocol):
    @property
    def local(self) -> str:
        """The node clients reach (server properties' cluster_name, the tracer's `node`)."""
        ...


class MessageLedger(Protocol):
    """What the store keeps of deliveries. A broker that keeps nothing has none (`Server.ledger` is
    None), so a channel pays one `is None` test per delivery and ack."""

    def delivered(self, queue: Queue, entry: Entry, no_ack: bool) -> None:
        """`entry` left `queue` for a client: with no_ack it is gone for good; otherwise a restart
        must give it back marked redelivered."""
        ...

    def settled(self, queue: Queue, entries: Sequence[Entry]) -> None:
        """The client acknowledged `entries` of `queue`: the store forgets them."""
        ...


class ReplyTarget(Protocol):
    """The channel holding a direct reply-to consumer (amq.rabbitmq.reply-to)."""

    @property
    def open(self) -> bool: ...

    def deliver_direct_reply(self, msg: StoredMessage) -> None: ...


class ReplyRegistry(Protocol):
    """Direct reply-to consumers across every connection, by the suffix of their reply queue name."""

    def register_reply_channel(self, channel: ReplyTarget) -> str:
        """Register `channel`'s reply consumer; the suffix of its amq.rabbitmq.reply-to.<suffix> name."""
        ...

    def unregister_reply_channel(self, suffix: str) -> None: ...

    def reply_channel_exists(self, suffix: str) -> bool: ...

    def deliver_reply(self, msg: StoredMessage) -> bool:
        """Hand `msg` (routed to amq.rabbitmq.reply-to.<suffix>) to its consumer; False: none."""
        ...


class ChannelServer(ReplyRegistry, Protocol):
    """The broker, as a channel sees it: the access checks, what the store keeps of deliveries and
    the direct reply-to consumers. Management's in-process session needs no more of it."""

    @property
    def auth(self) -> AccessControl: ...

    @property
    def ledger(self) -> MessageLedger | None: ...


class Server(ChannelServer, Protocol):
    """The broker, as one connection and its channels see it."""

    @property
    def settings(self) -> ServerSettings: ...

    @property
    def alarms(self) -> AlarmView: ...

    @property
    def cluster(self) -> NodeName: ...

    @property
    def host(self) -> str:
        """The address the broker listens on (the local half of a connection's name)."""
        ...

    @property
    def port(self) -> int: ...

    @property
    def vhosts(self) -> Mapping[str, VHost]: ...

    def connection_lost(self, conn: object) -> None:
        """`conn` closed: it leaves the broker's connections (the server registered it)."""
        ...


# -- the socket, as a connection sees it ---------------------------------------------------------------


class Transport(Protocol):
    """The byte stream under a connection (an asyncio transport, or a test's in-memory one)."""

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """ "peername" (a (host, port) tuple for TCP) and "socket" are read."""
        ...


class Timer(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    """The event loop as a connection uses it (asyncio's; a test's manual clock): flushes run soon,
    handshake, heartbeat and close timers later."""

    def call_soon(self, callback: Callable[..., object], *args: Any) -> object: ...

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> Timer: ...


# -- a connection, as its channels see it ------------------------------------------------------------


class ChannelHandle(Protocol):
    """What a connection does with one of its channels."""

    number: int
    closing: bool

    @property
    def open(self) -> bool: ...

    def flush_confirms(self) -> None:
        """Send the publisher confirms due (one multiple ack)."""
        ...

    def teardown(self) -> None:
        """The channel is gone (closed by either side, or with its connection)."""
        ...


class Outbox(Protocol):
    """Where a channel's output goes, as typed messages: the outbox encodes them (a connection frames
    them onto its socket with `broker.protocol.methods`; management's in-process session keeps
    them). Replies without a message are method payloads encoded by `broker.protocol.replies`."""

    @property
    def paused(self) -> bool:
        """The peer is not reading (write back-pressure): deliveries wait."""
        ...

    def send_method(self, channel: int, payload: bytes) -> None:
        """One method (class id, method id, fields) with no content."""
        ...

    def send_deliver(
        self,
        channel: int,
        consumer_tag: bytes,
        delivery_tag: int,
        redelivered: bool,
        msg: StoredMessage,
        backlog: int = 0,
    ) -> None:
        """basic.deliver of `msg` to a consumer (`consumer_tag` encoded as a shortstr, as the
        consumer keeps it); `backlog` is the channel's unacknowledged deliveries (0 for no-ack):
        the write of a delivery to a consumer with work in hand may wait briefly for others."""
        ...

    def send_get_ok(
        self, channel: int, delivery_tag: int, redelivered: bool, message_count: int, msg: StoredMessage
    ) -> None:
        """basic.get-ok with `msg`; `message_count` is what the queue holds after it."""
        ...

    def send_return(self, channel: int, reply_code: int, reply_text: str, msg: StoredMessage) -> None:
        """basic.return of a publish no queue took."""
        ...

    def send_confirm(self, channel: int, ack: bool, seq: int, multiple: bool) -> None:
        """basic.ack (or basic.nack) of the publishes up to `seq` (only `seq` unless `multiple`)."""
        ...

    def want_flush_confirms(self, channel: ChannelHandle) -> None:
        """Call `channel.flush_confirms()` before the output is next written."""
        ...


class ConnectionIdentity(Protocol):
    """Who a connection is, as the tracer's headers and management's views name it."""

    @property
    def user(self) -> str: ...

    @property
    def name(self) -> str:
        """The connection's name ("peer -> local"), as management and the tracer show it."""
        ...


class ChannelIdentity(Protocol):
    """Which channel of which connection, in which vhost: what the tracer reads of a channel a
    publish or delivery happened on, and the start of what management shows of one. The number
    and the vhost are fixed when the channel opens."""

    number: int
    vhost: VHost

    @property
    def conn(self) -> ConnectionIdentity: ...


class ChannelOwner(Outbox, ConnectionIdentity, Protocol):
    """The connection a channel belongs to: its server, user, vhost, output and closing.

    It is also the `Principal` of the declarations (`broker.session.declarations`): the acting
    user's permission check and the owner of exclusive queues."""

    @property
    def broker(self) -> ChannelServer: ...

    @property
    def vhost_obj(self) -> VHost: ...

    @property
    def cancel_notify(self) -> bool:
        """The client understands a server-sent basic.cancel (consumer_cancel_notify)."""
        ...

    exclusive_queues: list[Queue]

    def check_access(self, kind: str, resource: str, name: str) -> None: ...

    def announce_consumer(self, kind: str, number: int, consumer: Consumer) -> None:
        """Tell the broker's events that channel `number` added or cancelled `consumer`
        (`kind`: consumer.created or consumer.deleted)."""

    def channel_closed(self, channel: ChannelHandle) -> None:
        """The channel finished closing (the client's channel.close, or its close-ok to ours)."""
        ...

    def close_channel(
        self, channel: ChannelHandle, err: AmqpError, culprit: tuple[int, int] = (0, 0)
    ) -> None:
        """Close the channel for a soft error (channel.close carrying it)."""
        ...
