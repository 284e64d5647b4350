"""The one place for AMQP reply codes and the error that carries them, code and text as RabbitMQ sends.

Neither the routing library nor the protocol core does I/O, so they cannot close channels themselves:
they raise `AmqpError` and the session layer turns it into `channel.close` (soft) or `connection.close`
(hard) with exactly this text. The named constructors below keep the code and its name together at the
call site (`not_found("no queue 'q' in vhost '/'")` instead of a bare 404).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum


class ReplyCode(IntEnum):
    """AMQP 0-9-1 reply codes, named as RabbitMQ prints them in reply texts."""

    CONTENT_TOO_LARGE = 311
    NO_ROUTE = 312
    NO_CONSUMERS = 313
    CONNECTION_FORCED = 320
    INVALID_PATH = 402
    ACCESS_REFUSED = 403
    NOT_FOUND = 404
    RESOURCE_LOCKED = 405
    PRECONDITION_FAILED = 406
    FRAME_ERROR = 501
    SYNTAX_ERROR = 502
    COMMAND_INVALID = 503
    CHANNEL_ERROR = 504
    UNEXPECTED_FRAME = 505
    RESOURCE_ERROR = 506
    NOT_ALLOWED = 530
    NOT_IMPLEMENTED = 540
    INTERNAL_ERROR = 541


REPLY_NAMES: dict[int, str] = {code.value: code.name for code in ReplyCode}

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

    def reworded(self, explanation: str) -> AmqpError:
        """The same refusal (code, scope, method) with another explanation."""
        return AmqpError(self.reply_code, explanation, hard=self.hard, in_method=self.in_method)


def truncate_reply_text(text: str) -> str:
    """A reply text is a shortstr: past 255 bytes RabbitMQ keeps 252 bytes and appends "..."."""
    raw = text.encode("utf-8", "surrogateescape")
    if len(raw) <= 255:
        return text
    return (raw[:252] + b"...").decode("utf-8", "surrogateescape")


def resource_name(kind: str, name: str, vhost: str) -> str:
    """rabbit_misc:rs/1, how every reply names a queue or an exchange: "queue 'q' in vhost '/'"."""
    return f"{kind} '{name}' in vhost '{vhost}'"


def resource_not_found(kind: str, name: str, vhost: str) -> AmqpError:
    """rabbit_misc:not_found/1: 404 "no queue 'q' in vhost '/'"."""
    return not_found(f"no {resource_name(kind, name, vhost)}")


def internal_error(explanation: str = "", *, hard: bool = True) -> AmqpError:
    """What a crashing RabbitMQ process produces: 541 naming no method (0/0), bare "INTERNAL_ERROR"
    when the connection's reader or channel crashed; `hard=False` closes only the channel."""
    return AmqpError(ReplyCode.INTERNAL_ERROR, explanation, hard=hard, in_method=False)


def _with_code(code: ReplyCode) -> Callable[[str], AmqpError]:
    """The named constructor of one reply code's error; the code decides channel or connection."""

    def make(explanation: str) -> AmqpError:
        return AmqpError(code, explanation)

    make.__name__ = make.__qualname__ = code.name.lower()
    return make


precondition_failed = _with_code(ReplyCode.PRECONDITION_FAILED)
not_found = _with_code(ReplyCode.NOT_FOUND)
access_refused = _with_code(ReplyCode.ACCESS_REFUSED)
resource_locked = _with_code(ReplyCode.RESOURCE_LOCKED)
not_implemented = _with_code(ReplyCode.NOT_IMPLEMENTED)
not_allowed = _with_code(ReplyCode.NOT_ALLOWED)
command_invalid = _with_code(ReplyCode.COMMAND_INVALID)
channel_error = _with_code(ReplyCode.CHANNEL_ERROR)
syntax_error = _with_code(ReplyCode.SYNTAX_ERROR)
unexpected_frame = _with_code(ReplyCode.UNEXPECTED_FRAME)
connection_forced = _with_code(ReplyCode.CONNECTION_FORCED)


def frame_error(explanation: str, *, in_method: bool = True) -> AmqpError:
    return AmqpError(ReplyCode.FRAME_ERROR, explanation, in_method=in_method)
