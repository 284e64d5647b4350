"""`fanout`: every bound destination gets every message; keys and arguments are ignored."""

from __future__ import annotations

from exchanges.base import Destination, ExchangeType, Message
from exchanges.registry import register


@register
class FanoutExchange(ExchangeType):
    type_name = "fanout"

    def route(self, message: Message) -> list[Destination]:
        return list(dict.fromkeys(b.destination for b in self.bindings))
