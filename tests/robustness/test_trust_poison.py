"""A content header whose property bytes are malformed (a short string running past the end) is
refused at publish with RabbitMQ 3.10.8's 541 (0/0), so it never reaches a queue where a later
dead-lettering or expiry would trip over it. Compared with the live RabbitMQ."""

from __future__ import annotations

import struct
from urllib.parse import urlsplit

from pamqp import commands

from broker.embedded import BrokerThread
from tests.differential_support import RawAmqp


def publish_broken_message_id(port: int) -> tuple[object, ...]:
    c = RawAmqp("127.0.0.1", port, timeout=5)
    c.open_channel(1)
    c.send(1, commands.Queue.Declare(queue="poison", exclusive=True, arguments={"x-message-ttl": 50}))
    assert isinstance(c.recv()[1], commands.Queue.DeclareOk)
    c.send(1, commands.Basic.Publish(exchange="", routing_key="poison"))
    props = struct.pack(">H", 1 << 7) + bytes([200]) + b"abc"  # message_id: 200 octets announced, 3 sent
    payload = struct.pack(">HHQ", 60, 0, 2) + props
    c.send_bytes(struct.pack(">BHI", 2, 1, len(payload)) + payload + b"\xce")
    c.send_bytes(struct.pack(">BHI", 3, 1, 2) + b"hi\xce")
    channel, close = c.recv()
    c.close()
    return (channel, type(close).__name__, *(getattr(close, f, None) for f in ("reply_code", "class_id")))


EXPECTED = (0, "Close", 541, 0)


def test_malformed_properties_refused_at_publish() -> None:
    with BrokerThread(port=0) as b:
        assert publish_broken_message_id(b.port) == EXPECTED


def test_malformed_properties_on_rabbitmq(rabbitmq_url: str) -> None:
    assert publish_broken_message_id(urlsplit(rabbitmq_url).port or 5672) == EXPECTED
