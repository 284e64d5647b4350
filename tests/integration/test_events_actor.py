"""The event hub's acting user belongs to one read of one connection: a read that ends its
connection (a client's connection.close) leaves it as it was, so later events told outside any
client's command (a stream-protocol declaration, a timer) are not put on that client's account."""

from __future__ import annotations

import pika

from broker.embedded import BrokerThread
from broker.entities.events import INTERNAL_USER


def test_the_acting_user_is_restored_after_a_read_that_closes_the_connection() -> None:
    with BrokerThread(host="127.0.0.1", port=0) as b:
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        conn.channel()
        conn.close()
        assert b.broker.events.actor == INTERNAL_USER
        assert b.broker.events.counts["connection.closed"] == 1
