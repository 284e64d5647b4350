"""`Broker`: owns settings, virtual hosts and the listening socket.

async with Broker(port=0) as b:
    print(b.url)
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from amqpwire.errors import connection_forced
from broker.runtime.settings import Settings

if TYPE_CHECKING:
    import ssl

    from broker.entities.cluster import Cluster
    from broker.entities.message import StoredMessage
    from broker.entities.queues.catalog import Entry, Queue
    from broker.entities.vhost import VHost
    from broker.runtime.policies import BrokerPolicies
    from broker.session.connection import Connection
    from broker.session.ports import ReplyTarget
    from broker.store import Snapshot, Store
    from broker.streamproto.connection import StreamConnection
    from exchanges.compat import Compat

log = logging.getLogger("hashbroker.server")
SHUTDOWN_GRACE = 1.0
"""Seconds `stop` waits for clients' close-ok after the shutdown close (RabbitMQ waits for its
readers to finish closing before the node stops)."""


class LoopClock:
    """broker.entities.clock.Clock on an asyncio loop: the entities' TTL and x-expires timers."""

    __slots__ = ("loop",)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def now(self) -> float:
        return self.loop.time()

    def call_later(self, delay: float, fn: Callable[[], None]) -> asyncio.TimerHandle:
        return self.loop.call_later(delay, fn)

    def wall(self) -> float:
        return time.time()


class StoreLedger:
    """What the store keeps of deliveries (broker.session.ports.MessageLedger), for a broker whose
    store is persistent: a message of a kept queue taken with no-ack is forgotten, one delivered for
    an ack is marked redelivered (a restart redelivers it flagged), an acked one is forgotten.

    The redelivered marks of one loop iteration go to the store together, one write per queue, at
    the end of the iteration: a consumer with a prefetch window is sent many messages at once,
    and each write wakes the store's writer thread. The store writes them asynchronously anyway, so
    a restart sees the same marks as when each was written at once."""

    __slots__ = ("_is_stored", "_loop", "_marks", "_stored_seqs")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # loaded here, not at module level: only a broker with a persistent store needs durability
        from broker.runtime.durability import is_stored, stored_seqs

        self._is_stored = is_stored
        self._stored_seqs = stored_seqs
        self._loop = loop
        self._marks: dict[Queue, list[int]] = {}  # the marks of this iteration, by queue

    def delivered(self, queue: Queue, entry: Entry, no_ack: bool) -> None:
        store = queue.store
        if store is None or not self._is_stored(entry):
            return
        if no_ack:
            store.remove_messages(queue.vhost.name, queue.name, (entry.seq,))
        elif not entry.redelivered:
            marks = self._marks
            if not marks:
                self._loop.call_soon(self.flush)
            seqs = marks.get(queue)
            if seqs is None:
                marks[queue] = [entry.seq]
            else:
                seqs.append(entry.seq)

    def flush(self) -> None:
        """Write the marks collected (a queue deleted meanwhile has no positions left to mark)."""
        marks, self._marks = self._marks, {}
        for queue, seqs in marks.items():
            store = queue.store
            if store is not None and not queue.deleted:
                store.mark_redelivered(queue.vhost.name, queue.name, seqs)

    def settled(self, queue: Queue, entries: Sequence[Entry]) -> None:
        store = queue.store
        if store is not None:
            store.remove_messages(queue.vhost.name, queue.name, self._stored_seqs(entries))


class Broker:
    """A running (or startable) hashbroker instance.

    It is the `broker.session.ports.Server` of every connection it accepts (settings, users, alarms,
    vhosts, the direct reply-to registry, the message ledger) and the host of the alarms
    (`broker.runtime.alarms.AlarmHost`)."""

    def __init__(self, settings: Settings | None = None, **overrides: Any) -> None:
        if settings is None:
            settings = Settings.load(**overrides)
        elif overrides:
            settings = settings.model_copy(update=overrides)
        self.settings = settings
        self._compat: Compat | None = None
        self.host = settings.host
        self.port = settings.port
        self.vhosts: dict[str, VHost] = {}
        self.connections: set[Connection] = set()
        self._server: asyncio.Server | None = None
        self._reply_channels: dict[str, ReplyTarget] = {}
        self.management: Any = None
        self.prometheus: Any = None  # the rabbitmq_prometheus listener, while it runs
        self.stream_server: Any = None  # the rabbitmq_stream listener, while it runs
        self.tls_port: int | None = None  # the AMQPS listener's bound port, while it runs
        from broker.protocol.handshake import PASSWORD_MECHANISMS

        self._mechanisms = PASSWORD_MECHANISMS  # offered on the plain listener (set by start)
        self._tls_server: asyncio.Server | None = None
        from broker.runtime.settings import enabled_plugins

        self.plugins = enabled_plugins(settings)
        """The enabled plugins (with those they need): a disabled plugin's exchange type is unknown
        and its listener does not start, as on a RabbitMQ node without it."""
        self.store: Store | None = None  # opened by start(), closed by stop()
        self.ledger: StoreLedger | None = None  # while the store is persistent
        self._policies: BrokerPolicies | None = None
        self._clock: LoopClock | None = None
        from broker.entities.events import Events
        from broker.entities.users import Registry
        from broker.runtime.alarms import Alarms

        self.auth = Registry()
        self.events = Events()
        """The broker's event hub (rabbit_event): churn counters, and the event exchange when on."""
        self.event_exchange: Any = None  # the rabbitmq_event_exchange plugin, while it is on
        self.alarms = Alarms(self)
        """Resource alarms: `alarms.set(resource, reason)` / `alarms.clear(resource)` block and
        unblock publishers; the memory and disk monitor runs while the broker does."""

    @property
    def policies(self) -> BrokerPolicies:
        """Policy engine and emulated cluster (the management API finds it here).

        Built on first use, after the socket listens: it pulls in the exchanges library."""
        if self._policies is None:
            from broker.runtime.policies import BrokerPolicies

            self._policies = BrokerPolicies(self)
        return self._policies

    @property
    def cluster(self) -> Cluster:
        return self.policies.cluster

    @property
    def compat(self) -> Compat:
        """Version switches for the exchanges library (imported lazily: it is the heaviest import)."""
        if self._compat is None:
            from exchanges.compat import Compat

            self._compat = Compat.for_version(self.settings.rabbitmq_compat_version)
        return self._compat

    def new_vhost(self, name: str) -> VHost:
        """A vhost on this broker's clock, with its persistence when the store keeps state."""
        from broker.entities.vhost import VHost

        if self._clock is None:
            self._clock = LoopClock(asyncio.get_running_loop())
        vhost = VHost(name, self.compat, self._clock)
        vhost.plugins = self.plugins
        if self.store is not None and self.store.persistent:
            from broker.runtime import durability

            durability.attach(vhost, self.store)
        return vhost

    # -- lifecycle ----------------------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        from broker.runtime.transport import AcceptFailureLog, mechanisms, raise_open_files_limit

        raise_open_files_limit()
        self._mechanisms = mechanisms(self.settings.auth_mechanisms, self.plugins, tls=False)
        tls_contexts = self._tls_contexts()  # a refused TLS option stops the start before any listener
        if not isinstance(loop.get_exception_handler(), AcceptFailureLog):
            AcceptFailureLog(loop).install(loop)
        # Listen first: the kernel queues early connections while the store opens and the exchange
        # types (the slowest import) load. No client is served before the rebuild below finishes:
        # there is no await between here and the end of the rebuild.
        self._server = await loop.create_server(
            self._protocol_factory, self.settings.host, self.settings.port, reuse_address=True
        )
        # -- store: a refused data dir closes the listener before any client is served
        from broker.store import NULL_DATA_DIR, open_store

        data_dir = self.settings.data_dir or NULL_DATA_DIR
        try:
            store = self.store = open_store(data_dir, sync=self.settings.store_sync)
        except BaseException:
            self._server.close()
            self._server = None
            raise
        try:
            snapshot = store.load(messages=False)
        except BaseException:
            self._server.close()
            self._server = None
            await store.close()
            raise
        self._clock = LoopClock(loop)
        self.vhosts = {}
        default = self.vhosts[self.settings.default_vhost] = self.new_vhost(self.settings.default_vhost)
        default.description = "Default virtual host"  # as RabbitMQ creates it
        # -- store: rebuild before any client can act (no await until the store runs)
        if store.persistent:
            from broker.runtime import durability

            durability.rebuild(self, store, snapshot)
            store.start(loop)
            durability.record_new_vhosts(self, store, snapshot)
            self._restore_auth(snapshot)
            self.auth.store = durability.StoredUsers(store)
            self.ledger = StoreLedger(loop)
            log.info("durable state in %s (sync=%s)", store.location, self.settings.store_sync)
        else:
            store.start(loop)
            self._restore_auth(snapshot)
        for vhost in self.vhosts.values():
            vhost.events = self.events  # restored objects were not announced: RabbitMQ's recovery is silent
            self.policies.attach(vhost)
        if "rabbitmq_event_exchange" in self.plugins:
            from broker.plugins.event_exchange import EventExchange  # lazy: only when enabled

            if self.event_exchange in self.events.sinks:  # started again: the new default vhost's
                self.events.sinks.remove(self.event_exchange)
            self.event_exchange = EventExchange(self.events, default)
        self.alarms.start(loop, store)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        log.info(
            "hashbroker listening on %s:%d (AMQP 0-9-1, routing as RabbitMQ %s)",
            self.host,
            self.port,
            self.settings.rabbitmq_compat_version,
        )
        amqps, https = tls_contexts
        if amqps is not None:
            await self._start_tls(amqps)
        http_port, https_port = self.settings.management_port, self.settings.management_ssl_port
        if (http_port is not None or https is not None) and "rabbitmq_management" in self.plugins:
            from broker.management import start_management  # lazy: keeps start-up import-light

            tls = None
            if https is not None and https_port is not None:
                tls = (https_port, https, self.settings.ssl_handshake_timeout)
            self.management = await start_management(
                self, self.settings.management_host or self.host, http_port, tls=tls
            )
        from broker.runtime.settings import prometheus_port

        metrics_port = prometheus_port(self.settings, self.plugins)
        if metrics_port is not None:
            from broker.plugins.prometheus import start_prometheus  # lazy: only when enabled

            self.prometheus = await start_prometheus(
                self, self.settings.management_host or self.host, metrics_port
            )
        if self.settings.stream_port is not None and "rabbitmq_stream" in self.plugins:
            await self._start_streams(self.settings.stream_port)

    async def _start_streams(self, port: int) -> None:
        """RabbitMQ's stream protocol on `port` over this broker's streams (loaded only when on)."""
        import socket

        from broker.runtime.stream_adapter import BrokerStreams
        from broker.streamproto.server import StreamServer

        s = self.settings
        streams = BrokerStreams(
            self,
            loopback_users=s.loopback_users,
            advertised_host=s.stream_advertised_host or socket.gethostname(),
            advertised_port=port,
            cluster_name=self.cluster.local,
        )
        self.stream_server = StreamServer(streams, host=self.host, port=port)
        await self.stream_server.start()
        streams.advertised_port = self.stream_server.port
        log.info("stream protocol listening on %s:%d", self.host, self.stream_server.port)

    def _tls_contexts(self) -> tuple[ssl.SSLContext | None, ssl.SSLContext | None]:
        """The SSL contexts of the AMQPS and the HTTPS management listeners (None: off)."""
        s = self.settings
        if s.tls_port is None and s.management_ssl_port is None:
            return None, None
        from broker.runtime import tls

        amqp, http = tls.amqp_options(s), tls.management_options(s)
        return (
            tls.listener_context(amqp, "AMQPS listener") if amqp is not None else None,
            tls.listener_context(http, "HTTPS management listener") if http is not None else None,
        )

    async def _start_tls(self, context: ssl.SSLContext) -> None:
        """The AMQPS listener (RabbitMQ's listeners.ssl): the TLS handshake, bounded by
        ssl_handshake_timeout, comes before the AMQP one; EXTERNAL is offered here only."""
        from broker.runtime.tls import PeerCertificates
        from broker.runtime.transport import AmqpProtocol, mechanisms

        s = self.settings
        offer = mechanisms(s.auth_mechanisms, self.plugins, tls=True)
        peers = PeerCertificates(s.ssl_verify, s.ssl_cert_login_from)
        loop = asyncio.get_running_loop()
        self._tls_server = await loop.create_server(
            lambda: AmqpProtocol(self, offer, peers),
            s.host,
            s.tls_port,
            ssl=context,
            ssl_handshake_timeout=s.ssl_handshake_timeout,
            reuse_address=True,
        )
        self.tls_port = self._tls_server.sockets[0].getsockname()[1]
        log.info("hashbroker listening on %s:%d (AMQP 0-9-1 over TLS)", self.host, self.tls_port)

    def _protocol_factory(self) -> asyncio.Protocol:
        from broker.runtime.transport import AmqpProtocol

        return AmqpProtocol(self, self._mechanisms)

    async def stop(self, grace: float = 0.0) -> None:
        """Stop listening, tell every client why (320), wait up to `grace` seconds for their
        close-ok (`hashbroker serve` waits SHUTDOWN_GRACE; embedded brokers and tests need not),
        drop whoever is left, then commit what the store has pending."""
        if self._server is None:
            return
        if self.stream_server is not None:
            await self.stream_server.stop()
            self.stream_server = None
        if self.prometheus is not None:
            await self.prometheus.close()
            self.prometheus = None
        if self.management is not None:
            await self.management.close()
            self.management = None
        if self._tls_server is not None:
            self._tls_server.close()
        self._server.close()
        self.alarms.stop()
        self.policies.close()
        await self.close_all_connections("shutdown", grace)
        for conn in list(self.connections):
            conn.transport.close()
            conn.connection_lost()
        await self._server.wait_closed()
        self._server = None
        if self._tls_server is not None:
            await self._tls_server.wait_closed()
            self._tls_server = None
            self.tls_port = None
        if self.ledger is not None:
            self.ledger.flush()
        self.ledger = None
        if self.store is not None:  # commit what is pending, release the data dir
            await self.store.close()
        log.info("hashbroker stopped")

    async def close_all_connections(self, reason: str, grace: float) -> None:
        """rabbit_networking:close_all_connections: 320 CONNECTION_FORCED with RabbitMQ's text (class
        and method 0/0) to every connection, then up to `grace` seconds for the close-oks, so
        clients read why they were dropped instead of a bare EOF."""
        err = connection_forced(f"broker forced connection closure with reason '{reason}'")
        for conn in list(self.connections):
            if not conn.closed and not conn.core.closing:
                conn.fail(err, (0, 0))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while loop.time() < deadline and any(not c.silent for c in self.connections):
            await asyncio.sleep(0.01)

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        assert self._server is not None
        await self._server.serve_forever()

    async def __aenter__(self) -> Broker:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        s = self.settings
        return (
            f"amqp://{quote(s.default_user, safe='')}:{quote(s.default_pass, safe='')}"
            f"@{self.host}:{self.port}/"
            f"{quote(s.default_vhost, safe='')}"
        )

    # -- connections ----------------------------------------------------------------------------------

    @property
    def stream_connections(self) -> list[StreamConnection]:
        """The stream-protocol connections past their handshake (none while the listener is off)."""
        return self.stream_server.open_connections() if self.stream_server is not None else []

    def connection_made(self, conn: Connection) -> None:
        self.connections.add(conn)

    def connection_lost(self, conn: object) -> None:
        self.connections.difference_update((conn,))

    @property
    def assembling_bytes(self) -> int:
        """Body bytes all connections hold for messages not yet complete (for a memory alarm)."""
        return sum(conn.core.assembling_bytes for conn in self.connections)

    def check_credentials(self, user: str, password: str) -> bool:
        return self.auth.check_credentials(user, password)

    # -- users, vhosts, permissions -----------------------------------------------------------------

    def _restore_auth(self, snapshot: Snapshot) -> None:
        """Users and permissions from the store; on first boot (none stored) seed the default user
        (administrator, all permissions on the default vhost), as RabbitMQ does on an empty node.
        Seeded entries are written to the store (`auth.store` is set only afterwards, so set it
        here temporarily for persistent stores)."""
        from broker.entities.users import Permission, User

        auth = self.auth
        auth.users.clear()
        auth.permissions.clear()
        auth.changed()
        if snapshot.users:
            for u in snapshot.users:
                auth.users[u.name] = User(u.name, u.password_hash, tuple(u.tags), u.hashing_algorithm)
            for p in snapshot.permissions:
                if p.vhost in self.vhosts and p.user in auth.users:
                    auth.permissions[(p.vhost, p.user)] = Permission(p.configure, p.write, p.read)
            return
        s = self.settings
        store = self.store if self.store is not None and self.store.persistent else None
        if store is not None:
            from broker.runtime.durability import StoredUsers

            auth.store = StoredUsers(store)
        else:
            auth.store = None
        auth.add_user(s.default_user, s.default_pass, ("administrator",))
        auth.set_permissions(s.default_vhost, s.default_user, ".*", ".*", ".*")

    def add_vhost(self, name: str, description: str = "", tags: tuple[str, ...] = ()) -> bool:
        """Create a vhost at run time (False when it exists); policies attach to it at once."""
        if name in self.vhosts:
            return False
        vhost = self.new_vhost(name)
        vhost.description, vhost.tags = description, tags
        if self.store is not None and self.store.persistent:
            from broker.store import VHostRecord

            self.store.put_vhost(VHostRecord(name, description, tags))
        self.vhosts[name] = vhost
        vhost.events = self.events
        from broker.entities.vhost_events import announce_vhost_created

        announce_vhost_created(self.events, vhost)
        self.policies.attach(vhost)
        return True

    def delete_vhost(self, name: str) -> bool:
        """Delete a vhost: its connections are closed with 320 CONNECTION_FORCED (as RabbitMQ),
        then its queues, exchanges, policies and permissions go (also from the store)."""
        vhost = self.vhosts.get(name)
        if vhost is None:
            return False
        from amqpwire.errors import AmqpError

        for conn in list(self.connections):
            if conn.vhost_obj is vhost and not conn.closed:
                conn.fail(AmqpError(320, f"vhost '{name}' is deleted", hard=True), (0, 0))
        del self.vhosts[name]
        from broker.entities import events, vhost_events

        for vname, user in [k for k in self.auth.permissions if k[0] == name]:
            events.announce_permission(self.events, vname, user, None)
        for p in list(self.policies.list(name)):
            self.policies.delete(name, p.name)
        store = self.store if vhost.persistence is not None else None
        from broker.runtime import durability

        durability.attach(vhost, None)
        vhost.delayed.close()  # its held messages go with it: no timer left behind
        for q in list(vhost.queues.values()):
            if not q.deleted:
                vhost.delete_queue(q, reason="vhost deleted")
        self.auth.forget_vhost(name)
        if store is not None:
            store.delete_vhost(name)
        vhost_events.announce_vhost_deleted(self.events, vhost)
        return True

    # -- direct reply-to ------------------------------------------------------------------------------

    def register_reply_channel(self, channel: ReplyTarget) -> str:
        suffix = base64.urlsafe_b64encode(os.urandom(18)).decode().rstrip("=")
        self._reply_channels[suffix] = channel
        return suffix

    def unregister_reply_channel(self, suffix: str) -> None:
        self._reply_channels.pop(suffix, None)

    def reply_channel_exists(self, suffix: str) -> bool:
        """Whether amq.rabbitmq.reply-to.<suffix> names a live direct reply-to consumer."""
        ch = self._reply_channels.get(suffix)
        return ch is not None and ch.open

    def deliver_reply(self, msg: StoredMessage) -> bool:
        suffix = msg.routing_key[len("amq.rabbitmq.reply-to.") :]
        ch = self._reply_channels.get(suffix)
        if ch is None or not ch.open:
            return False
        ch.deliver_direct_reply(msg)
        return True
