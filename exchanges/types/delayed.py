"""`x-delayed-message` (rabbitmq-delayed-message-exchange): routing by `x-delayed-type`, later.

The exchange holds a message for `x-delay` ms and then routes it as an exchange of its
`x-delayed-type` would. This module validates the declare arguments with the plugin's error text
and delegates binding state and routing to an instance of the delayed type; the broker owns the
timer. `delay_ms` reads the header the way the plugin does: a missing, zero, negative or
out-of-range delay means "route now".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from amqpwire.errors import precondition_failed
from amqpwire.fields import FieldTable
from exchanges.base import Binding, Destination, ExchangeType, Message
from exchanges.registry import find_type, register

MAX_DELAY_MS = 4_294_967_295
INVALID_TYPE = "Invalid argument, 'x-delayed-type' must be an existing exchange type"
INTEGER_FIELD_TYPES = frozenset(
    {"byte", "unsignedbyte", "short", "unsignedshort", "signedint", "unsignedint", "long", "timestamp"}
)


def _delayed_type(arguments: FieldTable) -> type[ExchangeType]:
    field = arguments.get("x-delayed-type")
    if field is None or field.type != "longstr":
        raise precondition_failed(INVALID_TYPE)
    name = field.value.decode("utf-8", "surrogateescape")
    cls = find_type(name)
    if cls is None or name == DelayedMessageExchange.type_name:
        raise precondition_failed(INVALID_TYPE)
    return cls


def delay_ms(message: Message) -> int:
    """Milliseconds to hold `message`; 0 means deliver now."""
    headers = message.headers()
    field = headers.get("x-delay") if headers is not None else None
    if field is None or field.type not in INTEGER_FIELD_TYPES:
        return 0
    value = int(field.value)
    return value if 0 < value <= MAX_DELAY_MS else 0


@register
class DelayedMessageExchange(ExchangeType):
    type_name = "x-delayed-message"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.inner: ExchangeType = _delayed_type(self.arguments)(self.arguments, self.compat)

    @classmethod
    def validate(cls, arguments: FieldTable) -> None:
        _delayed_type(arguments).validate(arguments)

    def validate_binding(self, binding: Binding) -> None:
        self.inner.validate_binding(binding)

    def add_binding(self, binding: Binding) -> None:
        super().add_binding(binding)
        self.inner.add_binding(binding)

    def remove_bindings(self, bindings: Sequence[Binding]) -> None:
        super().remove_bindings(bindings)
        self.inner.remove_bindings(bindings)

    def route(self, message: Message) -> list[Destination]:
        """Routing as the delayed type routes (the broker calls this when the delay is over)."""
        return self.inner.route(message)

    @property
    def state_summary(self) -> dict[str, Any]:
        return {"delayed_type": self.inner.type_name, **self.inner.state_summary}
