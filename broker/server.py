"""`Broker`: owns settings, virtual hosts and the listening socket.

async with Broker(port=0) as b:
    print(b.url)
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import logging
import os
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from broker.settings import Settings

if TYPE_CHECKING:
    from broker.channel import Channel
    from broker.cluster import Cluster
    from broker.connection import Connection
    from broker.entities.vhost import VHost
    from broker.message import StoredMessage
    from broker.policy_runtime import BrokerPolicies
    from broker.store import Store
    from exchanges.compat import Compat

log = logging.getLogger("hashbroker.server")


class Broker:
    """A running (or startable) hashbroker instance."""

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
        self._reply_channels: dict[str, Channel] = {}
        self.management: Any = None
        self.store: Store | None = None  # issue 5: opened by start(), closed by stop()
        self._policies: BrokerPolicies | None = None

    @property
    def policies(self) -> BrokerPolicies:
        """Policy engine and emulated cluster (issue 4; the management API finds it here).

        Built on first use, after the socket listens: it pulls in the exchanges library."""
        if self._policies is None:
            from broker.policy_runtime import BrokerPolicies

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

    # -- lifecycle ----------------------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        # -- store (issue 5): open before listening, so a refused data dir never accepts clients
        from broker.store import NULL_DATA_DIR, open_store

        data_dir = self.settings.data_dir or NULL_DATA_DIR
        store = self.store = open_store(data_dir, sync=self.settings.store_sync)
        try:
            snapshot = store.load()
        except BaseException:
            await store.close()
            raise
        # Listen first: the kernel queues early connections while the exchange types (the
        # slowest import) load, so clients can connect as soon as possible after start-up.
        try:
            self._server = await loop.create_server(
                self._protocol_factory, self.settings.host, self.settings.port, reuse_address=True
            )
        except BaseException:
            await store.close()
            raise
        from broker.entities.vhost import VHost

        self.vhosts = {self.settings.default_vhost: VHost(self.settings.default_vhost, self.compat, loop)}
        # -- store (issue 5): rebuild before any client can act (no await until the store runs)
        if store.persistent:
            from broker import durability

            durability.rebuild(self, store, snapshot)
            store.start(loop)
            durability.record_new_vhosts(self, store, snapshot)
            log.info("durable state in %s (sync=%s)", store.location, self.settings.store_sync)
        else:
            store.start(loop)
        for vhost in self.vhosts.values():
            self.policies.attach(vhost)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        log.info(
            "hashbroker listening on %s:%d (AMQP 0-9-1, routing as RabbitMQ %s)",
            self.host,
            self.port,
            self.settings.rabbitmq_compat_version,
        )
        if self.settings.management_port is not None:
            from broker.management import start_management  # lazy: keeps start-up import-light

            self.management = await start_management(
                self, self.settings.management_host or self.host, self.settings.management_port
            )

    def _protocol_factory(self) -> asyncio.Protocol:
        from broker.transport import AmqpProtocol

        return AmqpProtocol(self)

    async def stop(self) -> None:
        if self._server is None:
            return
        if self.management is not None:
            await self.management.close()
            self.management = None
        self._server.close()
        self.policies.close()
        for conn in list(self.connections):
            conn.transport.close()
            conn.connection_lost()
        await self._server.wait_closed()
        self._server = None
        if self.store is not None:  # issue 5: commit what is pending, release the data dir
            await self.store.close()
        log.info("hashbroker stopped")

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

    def connection_made(self, conn: Connection) -> None:
        self.connections.add(conn)

    def connection_lost(self, conn: Connection) -> None:
        self.connections.discard(conn)

    def check_credentials(self, user: str, password: str) -> bool:
        s = self.settings
        return hmac.compare_digest(user.encode(), s.default_user.encode()) and hmac.compare_digest(
            password.encode(), s.default_pass.encode()
        )

    # -- direct reply-to ------------------------------------------------------------------------------

    def register_reply_channel(self, channel: Channel) -> str:
        suffix = base64.urlsafe_b64encode(os.urandom(18)).decode().rstrip("=")
        self._reply_channels[suffix] = channel
        return suffix

    def unregister_reply_channel(self, suffix: str) -> None:
        self._reply_channels.pop(suffix, None)

    def deliver_reply(self, msg: StoredMessage) -> bool:
        suffix = msg.routing_key[len("amq.rabbitmq.reply-to.") :]
        ch = self._reply_channels.get(suffix)
        if ch is None or not ch.open:
            return False
        ch.deliver_direct_reply(msg)
        return True
