"""What a resource handler is given: the read model, the writes, the caller's rights, the listener.

Handlers (`broker.management.views`) are called as `handler(ctx, request, segments)` with the
path segments after `/api/`. They read through `ctx.state` (views only) and change the broker only
through `ctx.writes`; the URL table (`broker.management.routes`) and the request pipeline
(`broker.management.api`) sit above them and are never imported by them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from broker.management import authz
from broker.management.authz import Identity
from broker.management.http import Request, Response
from broker.management.state import BrokerState
from broker.management.writes import Writes


class Context:
    """Shared by every request; `http_host`/`http_port` are set once the listener is bound."""

    def __init__(self, state: BrokerState, writes: Writes) -> None:
        self.state = state
        self.writes = writes
        self.http_host = ""
        self.http_port = 0
        self.https_port = 0  # the management.ssl listener, 0 when off

    def who(self, req: Request) -> Identity:
        return authz.identity(self.state.registry, req.user, req.password)

    def visible_vhosts(self, req: Request, *, monitors: bool = False) -> set[str]:
        """Vhosts whose objects the caller's lists show (`monitors`: monitoring users see all)."""
        return authz.visible_vhosts(
            self.state.registry, self.who(req), self.state.vhost_names(), monitors=monitors
        )

    def may_use_vhost(self, req: Request, vhost: str) -> bool:
        """Whether the caller may open an AMQP session on `vhost` (writes act as the caller)."""
        return authz.may_access_vhost(self.state.registry, self.who(req), vhost)


Handler = Callable[[Context, Request, list[str]], Awaitable[Response]]
"""A resource handler: (context, request, path segments after /api/) -> response."""
