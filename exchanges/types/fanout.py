"""`fanout`: every bound destination gets every message; keys and arguments are ignored."""

from __future__ import annotations

from collections.abc import Sequence

from exchanges.base import Binding, Destination, ExchangeType, Message
from exchanges.registry import register


@register
class FanoutExchange(ExchangeType):
    """The distinct destinations, in the order of each one's oldest remaining binding, are listed
    on the first message after the bindings changed, not on every bind or unbind: deleting a queue
    bound to a fanout exchange with thousands of others costs nothing beyond its own bindings."""

    type_name = "fanout"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._route: list[Destination] | None = None

    def add_binding(self, binding: Binding) -> None:
        super().add_binding(binding)
        self._route = None

    def remove_bindings(self, bindings: Sequence[Binding]) -> None:
        super().remove_bindings(bindings)
        self._route = None

    def route(self, message: Message) -> list[Destination]:
        found = self._route
        if found is None:
            found = self._route = list(dict.fromkeys(b.destination for b in self.bindings))
        return found.copy()
