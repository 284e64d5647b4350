"""Message rates as RabbitMQ's management computes them: the change between the two latest samples."""

from __future__ import annotations

SAMPLE_INTERVAL = 5.0
"""Seconds between rate samples: RabbitMQ's default `collect_statistics_interval`."""

DEPTHS = ("messages", "messages_ready", "messages_unacknowledged")
TOTALS = ("", "")
"""The sample key of the broker-wide queue totals (no queue has an empty vhost name)."""


class RateSamples:
    """The two latest samples of every counter, so a rate is the change per second between them.

    RabbitMQ's management reports each `*_details.rate` over its latest sampling interval: it drops
    to 0.0 one interval after activity stops, and is 0.0 before two samples exist.
    """

    def __init__(self) -> None:
        self._previous: tuple[float, dict[tuple[str, str], dict[str, int]]] = (0.0, {})
        self._latest: tuple[float, dict[tuple[str, str], dict[str, int]]] = (0.0, {})

    def take(self, now: float, values: dict[tuple[str, str], dict[str, int]]) -> None:
        self._previous, self._latest = self._latest, (now, values)

    def of(self, key: tuple[str, str]) -> dict[str, float]:
        (t0, before), (t1, after) = self._previous, self._latest
        old, new = before.get(key), after.get(key)
        if old is None or new is None or t1 <= t0:
            return {}
        return {k: round((v - old.get(k, 0)) / (t1 - t0), 1) for k, v in new.items()}
