"""Closing a client's connection from the management API, as rabbit_mgmt_wm_connection does.

`DELETE /api/connections/{name}` closes the AMQP connection with 320 CONNECTION_FORCED (class and
method 0/0) and the reason the caller gave in the `X-Reason` header, or RabbitMQ's default text.
"""

from __future__ import annotations

from amqpwire.errors import connection_forced
from broker.management.ports import ConnectionReads

DEFAULT_REASON = "Closed via management plugin"


def force_close(conn: ConnectionReads, reason: str | None) -> None:
    """Send connection.close 320 with `reason` (the default when None or empty)."""
    conn.fail(connection_forced(reason or DEFAULT_REASON), (0, 0))
