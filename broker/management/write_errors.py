"""How a management write fails, apart from how it is carried out (broker.management.writes).

A refusal is the AMQP channel's own: its reply code and reply text, which the views map to
RabbitMQ's HTTP status and {"error", "reason"} body.
"""

from __future__ import annotations

ACK_MODES = ("ack_requeue_true", "ack_requeue_false", "reject_requeue_true", "reject_requeue_false")


class AmqpOpError(Exception):
    """The channel refused the operation: `code` and `text` are its reply code and reply text."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(f"{code} {text}")
        self.code = code
        self.text = text

    @property
    def explanation(self) -> str:
        """The text after "NOT_FOUND - ", which RabbitMQ's management shows as `reason`."""
        return self.text.split(" - ", 1)[1] if " - " in self.text else self.text


class DefinitionError(AmqpOpError):
    """An import step failed; `item` says which definition (RabbitMQ reports the failing object)."""

    def __init__(self, code: int, text: str, item: str) -> None:
        super().__init__(code, text)
        self.item = item


class PropertyTypeError(ValueError):
    """A publish property of the wrong JSON type: RabbitMQ answers 400 with reason [tag, name]."""

    def __init__(self, tag: str, name: str) -> None:
        super().__init__(f"{tag} {name}")
        self.tag = tag
        self.name = name
