"""`direct`: a message goes to every destination whose binding key equals one of its routing keys."""

from __future__ import annotations

from collections.abc import Sequence

from exchanges.base import Binding, Destination, ExchangeType, Message
from exchanges.registry import register


@register
class DirectExchange(ExchangeType):
    type_name = "direct"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._by_key: dict[str, list[Destination]] = {}

    def add_binding(self, binding: Binding) -> None:
        super().add_binding(binding)
        self._by_key.setdefault(binding.key, []).append(binding.destination)

    def remove_bindings(self, bindings: Sequence[Binding]) -> None:
        super().remove_bindings(bindings)
        self._by_key = {}
        for b in self.bindings:
            self._by_key.setdefault(b.key, []).append(b.destination)

    def route(self, message: Message) -> list[Destination]:
        keys = message.routing_keys
        if len(keys) == 1:
            found = self._by_key.get(keys[0])
            if found is None:
                return []
            return list(dict.fromkeys(found)) if len(found) > 1 else [found[0]]
        out: dict[Destination, None] = {}
        for key in keys:
            for dest in self._by_key.get(key, ()):
                out[dest] = None
        return list(out)
