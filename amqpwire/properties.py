"""The basic class's content properties in the order AMQP 0-9-1 writes them (spec 4.2.6 / 1.8).

One table for the broker (which keeps the publisher's property bytes and locates fields lazily) and
the Spark bridge (which encodes and decodes them on the client side).
"""

from __future__ import annotations

from typing import Final

BASIC_PROPERTIES: Final[tuple[tuple[int, str, str], ...]] = (
    (15, "content_type", "s"),
    (14, "content_encoding", "s"),
    (13, "headers", "t"),
    (12, "delivery_mode", "o"),
    (11, "priority", "o"),
    (10, "correlation_id", "s"),
    (9, "reply_to", "s"),
    (8, "expiration", "s"),
    (7, "message_id", "s"),
    (6, "timestamp", "L"),
    (5, "type", "s"),
    (4, "user_id", "s"),
    (3, "app_id", "s"),
    (2, "cluster_id", "s"),
)
"""(flag bit, name, kind): kind s is a short string, t a field table, o an octet, L a 64-bit integer."""

FLAG_MESSAGE_ID: Final = 1 << 7
"""The message_id property's bit in the flag word."""
