"""What a management write is addressed to and how it fails, apart from how it is carried out.

Kept apart from broker.management.amqp_ops so the views can catch these without importing pika
(which amqp_ops needs) when the management server starts.
"""

from __future__ import annotations

from dataclasses import dataclass

ACK_MODES = ("ack_requeue_true", "ack_requeue_false", "reject_requeue_true", "reject_requeue_false")


class AmqpOpError(Exception):
    """The broker closed the channel: `code` and `text` are its reply code and reply text."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(f"{code} {text}")
        self.code = code
        self.text = text

    @property
    def explanation(self) -> str:
        """The text after "NOT_FOUND - ", which RabbitMQ's management shows as `reason`."""
        return self.text.split(" - ", 1)[1] if " - " in self.text else self.text


@dataclass(frozen=True)
class Target:
    """Where and as whom to connect: the HTTP request's credentials are reused for AMQP."""

    host: str
    port: int
    user: str
    password: str
    vhost: str


class DefinitionError(AmqpOpError):
    """An import step failed; `item` says which definition (RabbitMQ reports the failing object)."""

    def __init__(self, code: int, text: str, item: str) -> None:
        super().__init__(code, text)
        self.item = item
