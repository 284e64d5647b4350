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
    from broker.management.ports import ManagementBroker

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
        return self._http.port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self, host: str, port: int) -> None:
        await self._http.start(host, port)
        self.host = host
        self.context.http_host, self.context.http_port = host, self.port
        self.state.sample()
        self._sampler = asyncio.get_running_loop().create_task(self._sample_forever())
        log.info("management API listening on http://%s:%d/api/", host, self.port)

    async def _sample_forever(self) -> None:
        """Sample counters for the message rates every SAMPLE_INTERVAL seconds, as RabbitMQ does."""
        while True:
            await asyncio.sleep(SAMPLE_INTERVAL)
            self.state.sample()

    async def close(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
        await self._http.close()


async def start_management(broker: ManagementBroker, host: str, port: int) -> ManagementServer:
    """Start the management API for a started `broker` (call on the broker's loop; port 0 = any)."""
    server = ManagementServer(broker)
    await server.start(host, port)
    return server
