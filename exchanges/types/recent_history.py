"""`x-recent-history` (rabbitmq_recent_history_exchange 3.10.8): fanout that remembers.

Routing is fanout (every binding, keys ignored). Each message routed through the exchange is also
kept, newest first, up to `x-recent-history-length` messages (20 when absent), unless its
`x-recent-history-no-store` header is the boolean true. A new binding gets the kept messages at
once: a queue oldest first, an exchange newest first (the plugin reverses only the queue's list),
each routed through that exchange, where one that reaches no queue is refused with 541
INTERNAL_ERROR and the binding is not made (the plugin crashes inside the binding's transaction).

The plugin keeps the history in a RAM-only Mnesia table: it is lost when the broker restarts, and
forgotten when the exchange is deleted (a new exchange of the same name starts empty). So the
history lives only in this instance and is never persisted.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from amqpwire.errors import precondition_failed
from amqpwire.fields import FieldTable
from exchanges.base import Binding, Destination, Message
from exchanges.erlang.format import format_term
from exchanges.hashing.terms import field_value_term
from exchanges.registry import register
from exchanges.types.fanout import FanoutExchange

LENGTH_ARGUMENT = "x-recent-history-length"
NO_STORE_HEADER = "x-recent-history-no-store"
DEFAULT_LENGTH = 20
"""The plugin's ?KEEP_NB."""
INTEGER_TYPES = frozenset({"byte", "short", "signedint", "long"})
"""The plugin's ?INTEGER_ARG_TYPES: unsigned AMQP integers and timestamps are refused."""


@register
class RecentHistoryExchange(FanoutExchange):
    type_name = "x-recent-history"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.arguments.get(LENGTH_ARGUMENT)
        self.length = int(field.value) if field is not None else DEFAULT_LENGTH
        self.history: deque[Message] = deque(maxlen=self.length)
        """Kept messages, oldest first."""

    @classmethod
    def validate(cls, arguments: FieldTable) -> None:
        field = arguments.get(LENGTH_ARGUMENT)
        if field is None:
            return
        if field.type not in INTEGER_TYPES or field.value <= 0:
            value = format_term(field_value_term(field))
            raise precondition_failed(
                f"Invalid argument {value}, '{LENGTH_ARGUMENT}' must be a positive integer"
            )

    def route(self, message: Message) -> list[Destination]:
        headers = message.headers()
        flag = headers.get(NO_STORE_HEADER) if headers is not None else None
        if flag is None or flag.type != "bool" or flag.value is not True:
            self.history.append(message)
        return super().route(message)

    def bound(self, binding: Binding) -> Sequence[Message]:
        if binding.destination.kind == "queue":
            return list(self.history)
        return list(reversed(self.history))
