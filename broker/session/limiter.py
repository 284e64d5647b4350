"""A channel's delivery credit, as RabbitMQ's rabbit_limiter keeps it.

basic.qos sets a per-consumer prefetch (global=false, applied to consumers created afterwards) or
one limit for the whole channel (global=true). A delivery needing an ack may go to a consumer only
while the consumer (or its pseudo-queue group) holds fewer unacked messages than its prefetch and
the channel holds fewer than the channel-wide limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.entities.queues.catalog import Consumer


class Limiter:
    __slots__ = ("global_prefetch", "prefetch", "unacked")

    def __init__(self) -> None:
        self.prefetch = 0  # for consumers created from now on; 0: unlimited
        self.global_prefetch = 0  # the channel-wide limit; 0: none
        self.unacked = 0  # deliveries of this channel awaiting an ack

    def qos(self, prefetch_count: int, global_: bool) -> None:
        """global=false also lifts a channel-wide limit set before, as RabbitMQ 3.10.8's
        rabbit_channel does (unlimit_prefetch): observed with global 3 then per-consumer 2, two
        consumers get 2 each (4 unacked), not 3 in all."""
        if global_:
            self.global_prefetch = prefetch_count
        else:
            self.prefetch = prefetch_count
            self.global_prefetch = 0

    def allows(self, consumer: Consumer) -> bool:
        """May `consumer` receive one more delivery now?"""
        if consumer.no_ack:
            return True
        if consumer.prefetch:
            group = consumer.group
            held = consumer.unacked if group is None else sum(m.unacked for m in group)
            if held >= consumer.prefetch:
                return False
        return not (self.global_prefetch and self.unacked >= self.global_prefetch)

    def delivered(self, consumer: Consumer | None) -> None:
        """A delivery needing an ack went out (consumer None: basic.get)."""
        self.unacked += 1
        if consumer is not None:
            consumer.unacked += 1

    def settled(self, consumer: Consumer | None, n: int = 1) -> None:
        """`n` deliveries (to `consumer`) were acked, rejected or given back."""
        self.unacked -= n
        if consumer is not None:
            consumer.unacked -= n

    @property
    def channel_wide(self) -> bool:
        """Credit freed by one queue's ack may let the channel's consumers of other queues go."""
        return self.global_prefetch != 0
