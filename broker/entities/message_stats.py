"""RabbitMQ's message_stats above the queues: per vhost (the overview sums them) and per exchange.

RabbitMQ counts these per channel and aggregates them by vhost and exchange in its management
database; the aggregates outlive the channels, queues and exchanges they came from (observed on
3.10.8: a deleted queue's deliveries stay in its vhost's totals). Here the publish side is counted
where a publish is delivered (a transaction's at tx.commit, a rolled-back one never), confirms
where acks are sent (3.10.8 does not count nacks), and the deliver side is the sum of the queues' own counters
(`Queue.stats`) plus what deleted queues had counted.

Observed on 3.10.8: a vhost shows no message_stats before any activity, then all twelve keys
(zeros included). `drop_unroutable` stays 0 there even after unroutable publishes without
`mandatory`, and `get_empty` too (it counts per channel only). An exchange shows `publish_in`
(publishes to it) and `publish_out` (queues its publishes reached, through exchange-to-exchange
bindings too, refused ones included) once each is above zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

#: The deliver-side counters a vhost sums from its queues.
DELIVER_KEYS = (
    "ack",
    "deliver",
    "deliver_get",
    "deliver_no_ack",
    "get",
    "get_empty",
    "get_no_ack",
    "redeliver",
)


class VHostStats:
    """The publish-side counters of one vhost and what its deleted queues and exchanges counted
    (`publish` is the sum of its exchanges' `publish_in`, so a publish counts once)."""

    __slots__ = ("active", "confirm", "publish", "received_confirm", "retired", "return_unroutable", "routed")

    def __init__(self) -> None:
        self.publish = 0  # publishes to exchanges since deleted
        self.confirm = 0
        self.return_unroutable = 0
        # the node-wide global counters (rabbit_global_counters), not message_stats: publishes
        # received on confirm-mode channels, and queues reached by exchanges since deleted
        self.received_confirm = 0
        self.routed = 0
        self.retired = dict.fromkeys(DELIVER_KEYS, 0)
        self.active = False  # a deleted queue had activity

    def retire(self, queue_stats: Mapping[str, int]) -> None:
        """Keep a deleted queue's deliver-side counts in the vhost's totals."""
        for key in DELIVER_KEYS:
            if key in queue_stats:
                self.retired[key] += queue_stats[key]
                self.active = True

    def totals(self, queue_stats: Iterable[Mapping[str, int]], publishes: int) -> dict[str, int] | None:
        """The deliver-side keys, confirm, drop_unroutable, publish and return_unroutable, or None
        before any activity (RabbitMQ shows no message_stats then);
        `publishes`: the sum of the live exchanges' `publish_in`."""
        out = {**self.retired, "confirm": self.confirm, "drop_unroutable": 0}
        out["publish"] = self.publish + publishes
        out["return_unroutable"] = self.return_unroutable
        active = self.active or bool(out["publish"] or self.confirm or self.return_unroutable)
        for stats in queue_stats:
            for key in DELIVER_KEYS:
                if key in stats:
                    out[key] += stats[key]
                    active = True
        return out if active else None


def exchange_stats(publish_in: int, publish_out: int) -> dict[str, int]:
    """An exchange's message_stats: each key once it is above zero."""
    out = {}
    if publish_in:
        out["publish_in"] = publish_in
    if publish_out:
        out["publish_out"] = publish_out
    return out
