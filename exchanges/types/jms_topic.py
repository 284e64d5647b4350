"""`x-jms-topic` (rabbitmq_jms_topic_exchange 3.10.8): bindings select messages by JMS selector.

Each binding carries the selector its JMS client compiled to an Erlang term, as text in the
longstr argument `rjms_erlang_selector` (e.g. `{'=', {ident, <<"colour">>}, <<"blue">>}.`). A
message goes to every destination one of whose bindings' selectors evaluates to `true` against its
headers (`exchanges.sjx`); the routing and binding keys play no part (the plugin matches all of
the exchange's bindings, whatever their key).

The plugin keeps one selector per (binding key, destination): a second binding with the same key
and destination but another selector replaces the first's, and unbinding either forgets it, so
the remaining binding then selects nothing (both as the plugin's dict does).

Refusals are the plugin's crashes, which clients see as connection close 541 INTERNAL_ERROR: a
binding without the argument, with a non-longstr one, or whose text is not exactly one Erlang term
followed by a dot (the binding is not made); a message whose evaluation fails in Erlang (adding a
string to a number, a selected header of a type the plugin does not read...).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from amqpwire.errors import internal_error
from exchanges.base import Binding, Destination, ExchangeType, Message, dedupe
from exchanges.erlang.parse import TermSyntaxError, parse_term
from exchanges.registry import register
from exchanges.sjx import SelectorCrash, headers_of, selects

SELECTOR_ARGUMENT = "rjms_erlang_selector"


def compiled_selector(binding: Binding) -> Any:
    """The selector term of a binding, or the plugin's crash (541) when it has none or it is not
    one term."""
    field = binding.arguments.get(SELECTOR_ARGUMENT)
    if field is None or field.type != "longstr":
        raise internal_error()
    try:
        return parse_term(field.value.decode("latin-1"))
    except (TermSyntaxError, RecursionError):  # nesting deeper than Python's stack: refused too
        raise internal_error() from None


@register
class JmsTopicExchange(ExchangeType):
    type_name = "x-jms-topic"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._selectors: dict[tuple[str, Destination], Any] = {}

    def validate_binding(self, binding: Binding) -> None:
        compiled_selector(binding)

    def add_binding(self, binding: Binding) -> None:
        if self.has_binding(binding):
            return
        super().add_binding(binding)
        self._selectors[(binding.key, binding.destination)] = compiled_selector(binding)

    def remove_bindings(self, bindings: Sequence[Binding]) -> None:
        present = [b for b in bindings if self.has_binding(b)]
        super().remove_bindings(present)
        for binding in present:
            self._selectors.pop((binding.key, binding.destination), None)

    def route(self, message: Message) -> list[Destination]:
        if not self._selectors:
            return []
        headers = headers_of(message.headers())
        out: list[Destination] = []
        try:
            for binding in self.bindings:
                term = self._selectors.get((binding.key, binding.destination))
                if term is not None and selects(term, headers):
                    out.append(binding.destination)
        except (SelectorCrash, RecursionError):
            raise internal_error() from None
        return dedupe(out)
