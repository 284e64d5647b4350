"""The channel's cache of granted write permissions (checked on every publish).

A granted decision is remembered per exchange name until the user registry changes (any user or
permission change bumps its version); a refusal is never cached, so it is re-checked and reported
with RabbitMQ's 403 text every time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.auth import Registry

CACHE_LIMIT = 256


class WriteCache:
    __slots__ = ("_allowed", "_auth", "_check", "_version")

    def __init__(self, auth: Registry, check: Callable[[str, str, str], None]) -> None:
        self._auth = auth
        self._check = check  # check(kind, resource, name) raises AmqpError 403
        self._version = -1
        self._allowed: set[str] = set()

    def check_write(self, exchange: str) -> None:
        auth = self._auth
        if auth.version != self._version:
            self._allowed.clear()
            self._version = auth.version
        if exchange not in self._allowed:
            self._check("write", "exchange", exchange)
            if len(self._allowed) >= CACHE_LIMIT:
                self._allowed.clear()
            self._allowed.add(exchange)
