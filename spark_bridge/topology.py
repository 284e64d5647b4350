"""Declaring test topologies and reading queue depths over plain AMQP.

Production topologies belong to whoever runs the broker; the sink only declares an exchange (and
queues bound to it) when asked with `declareExchange=true`, which is what tests, examples and
benchmarks need to be self-contained. Declaration happens once, on the driver, before any task
publishes, because x-consistent-hash assigns buckets in binding order: binding from several
executors at once could permute that order and change the routing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pamqp import commands

from spark_bridge._amqp import AmqpAddress, AmqpConnection, ChannelClosedError
from spark_bridge.options import Binding, parse_bindings

__all__ = [
    "Binding",
    "PassiveCount",
    "declare_topology",
    "delete_topology",
    "parse_bindings",
    "passive_counts",
]


def declare_topology(
    conn: AmqpConnection,
    exchange: str,
    exchange_type: str,
    arguments: Mapping[str, Any] | None,
    bindings: Sequence[Binding],
    *,
    durable: bool = False,
) -> None:
    """Declare the exchange, then each queue and its binding, strictly in the given order."""
    if exchange:
        conn.rpc(
            commands.Exchange.Declare(
                exchange=exchange,
                exchange_type=exchange_type,
                durable=durable,
                auto_delete=False,
                arguments=dict(arguments or {}),
            ),
            commands.Exchange.DeclareOk,
        )
    for binding in bindings:
        conn.rpc(
            commands.Queue.Declare(queue=binding.queue, durable=durable, auto_delete=False),
            commands.Queue.DeclareOk,
        )
        if exchange:
            conn.rpc(
                commands.Queue.Bind(queue=binding.queue, exchange=exchange, routing_key=binding.key),
                commands.Queue.BindOk,
            )


def delete_topology(uri: str, exchange: str | None, queues: Sequence[str]) -> None:
    """Delete queues and the exchange if they exist (tests start from a clean slate)."""
    with AmqpConnection(AmqpAddress.parse(uri), connection_name="spark_bridge topology") as conn:
        for queue in queues:
            conn.rpc(commands.Queue.Delete(queue=queue), commands.Queue.DeleteOk)
        if exchange:
            conn.rpc(commands.Exchange.Delete(exchange=exchange), commands.Exchange.DeleteOk)


@dataclass(frozen=True)
class PassiveCount:
    """What a passive queue.declare tells: ready messages and consumers (None if no such queue)."""

    queue: str
    messages_ready: int | None
    consumers: int | None


def passive_counts(uri: str, queues: Sequence[str]) -> list[PassiveCount]:
    """Exact ready/consumer counts by passive `queue.declare`, one connection for all queues.

    A missing queue closes the channel with 404; the connection reopens it and reports None.
    """
    out: list[PassiveCount] = []
    with AmqpConnection(AmqpAddress.parse(uri), connection_name="spark_bridge queue_counts") as conn:
        for queue in queues:
            try:
                ok = conn.rpc(commands.Queue.Declare(queue=queue, passive=True), commands.Queue.DeclareOk)
            except ChannelClosedError as exc:
                if exc.reply_code == 404:
                    out.append(PassiveCount(queue, None, None))
                    continue
                raise
            out.append(PassiveCount(queue, int(ok.message_count), int(ok.consumer_count)))
    return out
