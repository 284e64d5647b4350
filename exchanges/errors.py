"""AMQP errors raised by routing code, carrying the reply code and text RabbitMQ would send.

The exchanges library has no I/O, so it cannot close channels itself; it raises `AmqpError` and the
broker turns it into `channel.close` (soft) or `connection.close` (hard) with exactly this text.
"""

from __future__ import annotations

REPLY_NAMES: dict[int, str] = {
    311: "CONTENT_TOO_LARGE",
    312: "NO_ROUTE",
    313: "NO_CONSUMERS",
    320: "CONNECTION_FORCED",
    402: "INVALID_PATH",
    403: "ACCESS_REFUSED",
    404: "NOT_FOUND",
    405: "RESOURCE_LOCKED",
    406: "PRECONDITION_FAILED",
    501: "FRAME_ERROR",
    502: "SYNTAX_ERROR",
    503: "COMMAND_INVALID",
    504: "CHANNEL_ERROR",
    505: "UNEXPECTED_FRAME",
    506: "RESOURCE_ERROR",
    530: "NOT_ALLOWED",
    540: "NOT_IMPLEMENTED",
    541: "INTERNAL_ERROR",
}

HARD_ERROR_CODES = frozenset({320, 402, 501, 502, 503, 504, 505, 506, 530, 540, 541})


class AmqpError(Exception):
    """An error with an AMQP reply code; `reply_text` is the full text as RabbitMQ puts it on the wire.

    RabbitMQ prefixes the explanation with the code's name: "PRECONDITION_FAILED - ...". Whether the
    error closes the channel or the connection is RabbitMQ's choice per error, not purely per code
    (503 COMMAND_INVALID is a connection error, 406 a channel error), so `hard` can be overridden.
    """

    def __init__(
        self, reply_code: int, explanation: str, *, hard: bool | None = None, in_method: bool = True
    ) -> None:
        self.reply_code = reply_code
        self.explanation = explanation
        name = REPLY_NAMES.get(reply_code, "ERROR")
        self.reply_text = truncate_reply_text(f"{name} - {explanation}" if explanation else name)
        self.hard = reply_code in HARD_ERROR_CODES if hard is None else hard
        self.in_method = in_method
        """False when RabbitMQ reports class/method 0/0 (a crash, not a method's refusal)."""
        super().__init__(self.reply_text)


def truncate_reply_text(text: str) -> str:
    """A reply text is a shortstr: past 255 bytes RabbitMQ keeps 252 bytes and appends "..."."""
    raw = text.encode("utf-8", "surrogateescape")
    if len(raw) <= 255:
        return text
    return (raw[:252] + b"...").decode("utf-8", "surrogateescape")


def internal_error() -> AmqpError:
    """What a crashing RabbitMQ plugin produces: connection close 541 "INTERNAL_ERROR", 0/0."""
    return AmqpError(541, "", hard=True, in_method=False)


def precondition_failed(explanation: str) -> AmqpError:
    return AmqpError(406, explanation)
