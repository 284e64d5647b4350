"""Message rates as RabbitMQ's management computes them: the change between the two latest samples."""

from __future__ import annotations

SAMPLE_INTERVAL = 5.0
"""Seconds between rate samples: RabbitMQ's default `collect_statistics_interval`."""

DEPTHS = ("messages", "messages_ready", "messages_unacknowledged")
TOTALS = ("", "")
"""The sample key of the broker-wide queue totals (no queue has an empty vhost name)."""

SampleKey = tuple[str, ...]
"""A queue's is (vhost, queue); a vhost's and an exchange's have three parts, so none collide."""


def vhost_key(vhost: str) -> SampleKey:
    return ("vhost", vhost, "")


def exchange_key(vhost: str, exchange: str) -> SampleKey:
    return ("exchange", vhost, exchange)


class RateSamples:
    """The two latest samples of every counter, so a rate is the change per second between them.

    RabbitMQ's management reports each `*_details.rate` over its latest sampling interval: it drops
    to 0.0 one interval after activity stops, and is 0.0 before two samples exist.
    """

    def __init__(self) -> None:
        self._previous: tuple[float, dict[SampleKey, dict[str, int]]] = (0.0, {})
        self._latest: tuple[float, dict[SampleKey, dict[str, int]]] = (0.0, {})

    def take(self, now: float, values: dict[SampleKey, dict[str, int]]) -> None:
        self._previous, self._latest = self._latest, (now, values)

    def of(self, key: SampleKey) -> dict[str, float]:
        (t0, before), (t1, after) = self._previous, self._latest
        old, new = before.get(key), after.get(key)
        if old is None or new is None or t1 <= t0:
            return {}
        return {k: round((v - old.get(k, 0)) / (t1 - t0), 1) for k, v in new.items()}
