"""RabbitMQ-shaped management HTTP API for hashbroker (`/api/overview`, `/api/queues`, ...).

    server = await start_management(broker, "127.0.0.1", 15672)   # on the broker's event loop
    ...
    await server.close()

It runs on the broker's own event loop so it can read state without locks. What it needs from the
broker is the port `broker.management.ports.ManagementBroker`, which the server satisfies; reads go
through `broker.management.state` (views only), every change through `broker.management.writes`,
which runs queue, exchange, binding and message writes through the AMQP channel's own code as the
HTTP user, so they obey exactly the AMQP semantics.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from broker.management.api import Api
from broker.management.context import Context
from broker.management.http import HttpServer
from broker.management.rates import SAMPLE_INTERVAL
from broker.management.state import BrokerState
from broker.management.writes import Writes

if TYPE_CHECKING:
    import ssl

    from broker.management.ports import ManagementBroker

    TlsListener = tuple[int, ssl.SSLContext, float]
    """The HTTPS listener: port, SSL context, TLS handshake timeout in seconds."""

__all__ = ["ManagementServer", "start_management"]

log = logging.getLogger("hashbroker.management")


class ManagementServer:
    """A running management listener; `port` is the bound port (resolved when 0 was asked for)."""

    def __init__(self, broker: ManagementBroker) -> None:
        self.state = BrokerState(broker)
        self.context = Context(self.state, Writes(broker))
        self.api = Api(self.context)
        self._http = HttpServer(self.api.handle, self.api.check)
        self.host = ""
        self._sampler: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        """The HTTP port (the HTTPS one when only HTTPS listens)."""
        return self._http.port or self._http.tls_port

    @property
    def tls_port(self) -> int:
        """The HTTPS port; 0 when HTTPS is off."""
        return self._http.tls_port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self, host: str, port: int | None, tls: TlsListener | None = None) -> None:
        """Serve HTTP on `port` and/or HTTPS as `tls` says (RabbitMQ's management.tcp and
        management.ssl listeners); None = that one is off."""
        if port is not None:
            await self._http.start(host, port)
            log.info("management API listening on http://%s:%d/api/", host, self._http.port)
        if tls is not None:
            tls_port, context, handshake_timeout = tls
            await self._http.start(host, tls_port, tls=context, tls_handshake_timeout=handshake_timeout)
            log.info("management API listening on https://%s:%d/api/", host, self._http.tls_port)
        self.host = host
        self.context.http_host, self.context.http_port = host, self._http.port
        self.context.https_port = self._http.tls_port
        self.state.sample()
        self._sampler = asyncio.get_running_loop().create_task(self._sample_forever())

    async def _sample_forever(self) -> None:
        """Sample counters for the message rates every SAMPLE_INTERVAL seconds, as RabbitMQ does."""
        while True:
            await asyncio.sleep(SAMPLE_INTERVAL)
            self.state.sample()

    async def close(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
        await self._http.close()


async def start_management(
    broker: ManagementBroker, host: str, port: int | None, tls: TlsListener | None = None
) -> ManagementServer:
    """Start the management API for a started `broker` (call on the broker's loop; port 0 = any;
    `tls`: the HTTPS listener's port, SSL context and handshake timeout)."""
    server = ManagementServer(broker)
    await server.start(host, port, tls)
    return server
