"""The channel's cache of granted write permissions (checked on every publish).

A granted decision is remembered per exchange name until the user registry changes (any user or
permission change bumps its version); a refusal is never cached, so it is re-checked and reported
with RabbitMQ's 403 text every time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.session.ports import AccessControl

CACHE_LIMIT = 256


class WriteCache:
    """The publisher tests `exchange in allowed and version == auth.version` inline (once per
    message) and calls `check_write` only when that fails."""

    __slots__ = ("_check", "allowed", "auth", "version")

    def __init__(self, auth: AccessControl, check: Callable[[str, str, str], None]) -> None:
        self.auth = auth
        self._check = check  # check(kind, resource, name) raises AmqpError 403
        self.version = -1
        self.allowed: set[str] = set()

    def check_write(self, exchange: str) -> None:
        auth = self.auth
        if auth.version != self.version:
            self.allowed.clear()
            self.version = auth.version
        if exchange not in self.allowed:
            self._check("write", "exchange", exchange)
            if len(self.allowed) >= CACHE_LIMIT:
                self.allowed.clear()
            self.allowed.add(exchange)
