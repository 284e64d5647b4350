"""The errors the bridge raises about brokers and about the Python that Spark runs the bridge in.

This module imports nothing but the standard library, so that `import spark_bridge` (and the
probe that checks an executor's Python) works even where pamqp or pyarrow are missing.
"""

from __future__ import annotations

from typing import Any


class AmqpBridgeError(RuntimeError):
    """Base class of every error the bridge raises about the broker."""


class BrokerUnavailableError(AmqpBridgeError):
    """No AMQP broker answered (refused, timed out, or the handshake failed)."""


class ConnectionLostError(AmqpBridgeError):
    """The connection dropped or the broker closed it while messages were in flight."""


class PublishFailedError(AmqpBridgeError):
    """The broker nacked or (under `mandatory`) returned messages, or a row cannot be encoded as an
    AMQP message (a value out of the range the protocol allows); the message names the row."""


class ChannelClosedError(AmqpBridgeError):
    """The broker closed the channel in answer to a synchronous method (404, 406, ...).

    `reply_code` and `reply_text` are the broker's; the message is "<reply_code> <reply_text>"
    unless `message` (the same facts with more context) is given.
    """

    def __init__(self, reply_code: int, reply_text: str, message: str | None = None) -> None:
        super().__init__(message if message is not None else f"{reply_code} {reply_text}")
        self.reply_code = reply_code
        self.reply_text = reply_text

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.reply_code, self.reply_text, str(self)))


class WorkerEnvironmentError(AmqpBridgeError):
    """Spark's Python workers run an interpreter that cannot import the bridge's dependencies."""
