"""The AMQP 1.0 record conversion as the stream protocol names it: the stream queue owns it (an
AMQP 0-9-1 consumer of a stream reads records through it too)."""

from broker.entities.queues.stream.convert import (
    Amqp091Message,
    UnconvertibleError,
    from_amqp091,
    to_amqp091,
)

__all__ = ["Amqp091Message", "UnconvertibleError", "from_amqp091", "to_amqp091"]
