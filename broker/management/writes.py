"""Every change the management API makes to queues, exchanges, bindings and messages.

The views call only this module, so how a write reaches the broker is decided here alone: today
each runs as the calling user over a loopback AMQP connection (broker.management.amqp_ops, in a
worker thread, so the channel code makes every check and error text); replacing that with direct
calls into the session layer changes this file and no view.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from broker.management.write_errors import ACK_MODES, AmqpOpError, DefinitionError, Target

if TYPE_CHECKING:
    from broker.management.http import Request

__all__ = ["ACK_MODES", "AmqpOpError", "DefinitionError", "Writes"]


class Writes:
    """Writes on the broker listening at host:port, each as the request's user (user_id checks)."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port

    def _target(self, req: Request, vhost: str) -> Target:
        return Target(self.host, self.port, req.user, req.password, vhost)

    @staticmethod
    async def _run(pick: Callable[[ModuleType], Callable[..., Any]], *args: Any) -> Any:
        """Run the blocking amqp_ops function `pick` names off the loop, which must stay free to serve it.

        amqp_ops (and pika with it) is imported on the first write, not when the server starts.
        """
        from broker.management import amqp_ops

        fn = pick(amqp_ops)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, functools.partial(fn, *args))

    async def declare_queue(
        self, req: Request, vhost: str, name: str, durable: bool, auto_delete: bool, arguments: dict[str, Any]
    ) -> None:
        await self._run(
            lambda ops: ops.declare_queue, self._target(req, vhost), name, durable, auto_delete, arguments
        )

    async def delete_queue(
        self, req: Request, vhost: str, name: str, if_unused: bool, if_empty: bool
    ) -> None:
        await self._run(lambda ops: ops.delete_queue, self._target(req, vhost), name, if_unused, if_empty)

    async def purge_queue(self, req: Request, vhost: str, name: str) -> None:
        await self._run(lambda ops: ops.purge_queue, self._target(req, vhost), name)

    async def get_messages(
        self,
        req: Request,
        vhost: str,
        queue: str,
        count: int,
        ackmode: str,
        encoding: str,
        truncate: int | None,
    ) -> list[dict[str, Any]]:
        target = self._target(req, vhost)
        got: list[dict[str, Any]] = await self._run(
            lambda ops: ops.get_messages, target, queue, count, ackmode, encoding, truncate
        )
        return got

    async def declare_exchange(
        self,
        req: Request,
        vhost: str,
        name: str,
        type_: str,
        durable: bool,
        auto_delete: bool,
        internal: bool,
        arguments: dict[str, Any],
    ) -> None:
        target = self._target(req, vhost)
        await self._run(
            lambda ops: ops.declare_exchange, target, name, type_, durable, auto_delete, internal, arguments
        )

    async def delete_exchange(self, req: Request, vhost: str, name: str, if_unused: bool) -> None:
        await self._run(lambda ops: ops.delete_exchange, self._target(req, vhost), name, if_unused)

    async def publish(
        self,
        req: Request,
        vhost: str,
        exchange: str,
        routing_key: str,
        properties: dict[str, Any],
        body: bytes,
    ) -> bool:
        target = self._target(req, vhost)
        return bool(await self._run(lambda ops: ops.publish, target, exchange, routing_key, properties, body))

    async def bind(
        self,
        req: Request,
        vhost: str,
        source: str,
        destination: str,
        destination_type: str,
        key: str,
        args: dict[str, Any],
    ) -> None:
        target = self._target(req, vhost)
        await self._run(lambda ops: ops.bind, target, source, destination, destination_type, key, args)

    async def unbind(
        self,
        req: Request,
        vhost: str,
        source: str,
        destination: str,
        destination_type: str,
        key: str,
        args: dict[str, Any],
    ) -> None:
        target = self._target(req, vhost)
        await self._run(lambda ops: ops.unbind, target, source, destination, destination_type, key, args)

    async def apply_definitions(
        self,
        req: Request,
        vhost: str,
        queues: list[dict[str, Any]],
        exchanges: list[dict[str, Any]],
        bindings: list[dict[str, Any]],
    ) -> None:
        """Queues, then exchanges, then bindings, in file order; DefinitionError names the failing one."""
        await self._run(
            lambda ops: ops.apply_definitions, self._target(req, vhost), queues, exchanges, bindings
        )
