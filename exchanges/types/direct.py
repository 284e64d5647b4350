"""`direct`: a message goes to every destination whose binding key equals one of its routing keys."""

from __future__ import annotations

from collections.abc import Sequence

from exchanges.base import Binding, Destination, ExchangeType, Message
from exchanges.registry import register


@register
class DirectExchange(ExchangeType):
    """Bindings are filed by key (each key's in binding order), so binding and unbinding cost the
    same however many keys and queues the exchange has. `route` reads a per-key list of distinct
    destinations, built on the first message after that key's bindings changed: the list a message
    gets is as long as that anyway."""

    type_name = "direct"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._by_key: dict[str, dict[Binding, Destination]] = {}
        self._routes: dict[str, list[Destination]] = {}

    def add_binding(self, binding: Binding) -> None:
        if self.has_binding(binding):
            return
        super().add_binding(binding)
        key = binding.key
        filed = self._by_key.get(key)
        if filed is None:
            self._by_key[key] = {binding: binding.destination}
        else:
            filed[binding] = binding.destination
        self._routes.pop(key, None)

    def remove_bindings(self, bindings: Sequence[Binding]) -> None:
        present = [b for b in bindings if self.has_binding(b)]
        super().remove_bindings(present)
        for binding in present:
            key = binding.key
            filed = self._by_key[key]
            del filed[binding]
            if not filed:
                del self._by_key[key]
            self._routes.pop(key, None)

    def _route_of(self, key: str) -> list[Destination]:
        """List (and remember) the distinct destinations of a bound key."""
        found = self._routes[key] = list(dict.fromkeys(self._by_key[key].values()))
        return found

    def route(self, message: Message) -> list[Destination]:
        keys = message.routing_keys
        if len(keys) == 1:
            key = keys[0]
            found = self._routes.get(key)
            if found is None:
                if key not in self._by_key:
                    return []
                found = self._route_of(key)
            return [found[0]] if len(found) == 1 else found.copy()
        out: dict[Destination, None] = {}
        by_key = self._by_key
        for key in keys:
            filed = by_key.get(key)
            if filed is not None:
                for dest in filed.values():
                    out[dest] = None
        return list(out)
