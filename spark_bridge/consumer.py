"""Consuming with manual acks: what the `amqp` source reads through.

One consumer on channel 1 with a prefetch window; deliveries queue up in `deliveries` as the frames
arrive and are taken in order. Acks are explicit and cumulative (`multiple`), because the source
settles a whole micro-batch at once when Spark has committed it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pamqp import commands

from spark_bridge._amqp import AmqpConnection


@dataclass(frozen=True)
class Delivery:
    """One message as the broker delivered it (`properties` is pamqp's Basic.Properties)."""

    delivery_tag: int
    redelivered: bool
    exchange: str
    routing_key: str
    properties: Any
    body: bytes


class AmqpConsumer(AmqpConnection):
    """An AmqpConnection that consumes one queue with manual acks."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deliveries: deque[Delivery] = deque()
        self.consumer_tag: str | None = None

    def _delivered(self, method: Any, properties: Any, body: bytes) -> None:
        self.deliveries.append(
            Delivery(
                delivery_tag=int(method.delivery_tag),
                redelivered=bool(method.redelivered),
                exchange=str(method.exchange),
                routing_key=str(method.routing_key),
                properties=properties,
                body=body,
            )
        )

    def message_count(self, queue: str) -> int:
        """Ready messages in `queue` (a passive declare: 404 if it does not exist)."""
        ok = self.rpc(commands.Queue.Declare(queue=queue, passive=True), commands.Queue.DeclareOk)
        return int(ok.message_count or 0)

    def consume(self, queue: str, prefetch: int, arguments: Mapping[str, Any] | None = None) -> str:
        """Set the prefetch window and start consuming `queue` with manual acks."""
        self.rpc(commands.Basic.Qos(prefetch_count=prefetch), commands.Basic.QosOk)
        ok = self.rpc(
            commands.Basic.Consume(queue=queue, no_ack=False, arguments=dict(arguments or {})),
            commands.Basic.ConsumeOk,
        )
        self.consumer_tag = str(ok.consumer_tag)
        return self.consumer_tag

    def take(self, limit: int, wait: float, idle: float = 0.05) -> list[Delivery]:
        """Up to `limit` deliveries: wait at most `wait` seconds for the first, then stop as soon
        as nothing more arrives for `idle` seconds (what is in flight now, not what comes later)."""
        self._process_frames(None)  # frames left buffered behind an rpc's reply
        deadline = time.monotonic() + wait
        while len(self.deliveries) < limit:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            timeout = min(remaining, idle) if self.deliveries else remaining
            if not self._recv(timeout):
                if self.deliveries:
                    break
                continue
            self._process_frames(None)
        count = min(limit, len(self.deliveries))
        return [self.deliveries.popleft() for _ in range(count)]

    def ack(self, delivery_tag: int, multiple: bool = True) -> None:
        self._send_method(commands.Basic.Ack(delivery_tag=delivery_tag, multiple=multiple), self.channel)

    def nack(self, delivery_tag: int, multiple: bool = True, requeue: bool = True) -> None:
        self._send_method(
            commands.Basic.Nack(delivery_tag=delivery_tag, multiple=multiple, requeue=requeue), self.channel
        )
