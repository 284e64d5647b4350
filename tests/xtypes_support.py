"""Shared by the tests of the x-random, x-recent-history and x-jms-topic exchange types.

`Typed` lets pika send a header or argument of any AMQP type (pika itself sends no float, double,
byte, short or unsigned integer): the value is encoded by amqpwire's table encoder. `xtypes_broker`
is an embedded hashbroker with the three plugins on (they are off by default).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pika.data

from amqpwire.fields import Field, FieldTable

RANDOM = "rabbitmq_random_exchange"
RECENT_HISTORY = "rabbitmq_recent_history_exchange"
JMS_TOPIC = "rabbitmq_jms_topic_exchange"
XTYPE_PLUGINS = [RANDOM, RECENT_HISTORY, JMS_TOPIC, "rabbitmq_management"]


class Typed:
    """A table value with an explicit AMQP type (`Typed("double", 1.5)`)."""

    def __init__(self, type_name: str, value: Any) -> None:
        self.field = Field(type_name, value)

    def wire(self) -> bytes:
        """The tag and value bytes, as they follow the key in a table."""
        encoded = FieldTable([("k", self.field)]).encode()
        return encoded[2:]  # after the key's shortstr (length byte and "k")

    def __repr__(self) -> str:
        return f"Typed({self.field.type!r}, {self.field.value!r})"


_pika_encode_value = pika.data.encode_value


def _encode_value(pieces: list[bytes], value: Any) -> int:
    if isinstance(value, Typed):
        raw = value.wire()
        pieces.append(raw)
        return len(raw)
    return int(_pika_encode_value(pieces, value))


pika.data.encode_value = _encode_value  # only values wrapped in Typed are handled differently


@contextlib.contextmanager
def xtypes_broker(**kwargs: Any) -> Iterator[Any]:
    """An embedded hashbroker with the three exchange type plugins enabled."""
    from broker.embedded import BrokerThread

    with BrokerThread(host="127.0.0.1", port=0, plugins=XTYPE_PLUGINS, **kwargs) as b:
        yield b
