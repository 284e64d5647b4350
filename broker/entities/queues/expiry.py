"""x-expires: a queue unused for that long is deleted (RabbitMQ's queue expiry).

What counts as a use is the queue type's rule (a classic queue: a declaration, a consumer, a
basic.get; a quorum queue: a consumer or a basic.get only); `IdleExpiry` is the countdown itself,
on the queue's clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.entities.clock import Clock, Timer


class IdleExpiry:
    """The x-expires countdown of one queue: `expired` runs once `ms` passed since the last
    `restart` (never while `ms` is None or after `cancel`)."""

    __slots__ = ("clock", "expired", "ms", "timer")

    def __init__(self, clock: Clock, expired: Callable[[], None], ms: int | None) -> None:
        self.clock = clock
        self.expired = expired
        self.ms = ms
        self.timer: Timer | None = None

    @property
    def running(self) -> bool:
        return self.timer is not None

    def change(self, ms: int | None) -> bool:
        """A policy changed x-expires to `ms`; True if it differs (the caller restarts the
        countdown as its type's rule says)."""
        if ms == self.ms:
            return False
        self.ms = ms
        if ms is None:
            self.cancel()
        return True

    def restart(self) -> None:
        """Start counting again from now (nothing without x-expires)."""
        self.cancel()
        if self.ms is not None:
            self.timer = self.clock.call_later(self.ms / 1000.0, self._fire)

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _fire(self) -> None:
        self.timer = None
        self.expired()
