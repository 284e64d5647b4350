"""`headers`: a binding matches on the message's header table, as RabbitMQ 3.10.8 does it.

What RabbitMQ 3.10.8 does (checked against a live broker, see tests/test_headers.py):

* `x-match` is read from the first `x-match` binding argument: "all" (also when absent), "any",
  "all-with-x" or "any-with-x". Anything else is refused at bind time with 406 and Erlang-formatted
  text; the `x-match` entry itself never takes part in matching.
* Other binding arguments whose name starts with "x-" are ignored, except in the *-with-x modes.
* A binding argument of type void only asks for the header to be present.
* Values are compared with Erlang's `==` on the decoded terms, *not* by type: every integer type
  (timestamp included) equals a float/double of the same value, longstr equals binary with the same
  bytes, bool is an atom (so `true` never equals 1), decimal is a `{Scale, Value}` tuple equal only
  to the same decimal, and arrays/tables compare element by element including each element's type
  tag and order (`[]` and an empty table are equal). `rabbit_misc:type_class` is not used here.
* With no remaining arguments, "all" matches every message (even one without headers) and "any"
  matches none. A message without headers behaves like an empty table.
* Duplicate names: both tables are stable-sorted by name and merged, so the i-th binding entry for a
  name is compared with the i-th header of that name only; extra headers are ignored and a binding
  entry with no partner fails.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from amqpwire.errors import precondition_failed
from amqpwire.fields import FieldTable
from exchanges.base import Binding, Destination, ExchangeType, Message
from exchanges.erlang.format import format_term
from exchanges.registry import register
from exchanges.types.header_terms import ErlangTerm, erlang_term, freeze, same_term

X_MATCH: Final = "x-match"
_MODES: Final[dict[bytes, tuple[bool, bool]]] = {
    # x-match value -> (any instead of all, x- arguments take part)
    b"all": (False, False),
    b"any": (True, False),
    b"all-with-x": (False, True),
    b"any-with-x": (True, True),
}


# --- Compiled bindings ---------------------------------------------------------------------------

_PRESENT: Final = object()
"""Expected value of a void binding argument: any header of that name will do."""


@dataclass(frozen=True, slots=True)
class _Check:
    name: str
    occurrence: int  # pairs with the header of the same name at this position (see module doc)
    expected: ErlangTerm  # or _PRESENT

    def anchor(self) -> tuple[str, object]:
        if self.occurrence == 0 and self.expected is not _PRESENT:
            return ("value", (self.name, freeze(self.expected)))
        return ("name", self.name)

    def passes(self, headers: dict[str, list[ErlangTerm]]) -> bool:
        values = headers.get(self.name)
        if values is None or len(values) <= self.occurrence:
            return False
        return self.expected is _PRESENT or same_term(values[self.occurrence], self.expected)


@dataclass(frozen=True, slots=True)
class _Pattern:
    """A binding's arguments reduced to what `headers_match/5` looks at, computed once per bind."""

    any_mode: bool
    checks: tuple[_Check, ...]

    @classmethod
    def compile(cls, arguments: FieldTable) -> _Pattern:
        any_mode, with_x = x_match_mode(arguments)
        checks: list[_Check] = []
        seen: dict[str, int] = {}
        for name, value in arguments:
            if name == X_MATCH or (name.startswith("x-") and not with_x):
                continue
            occurrence = seen.get(name, 0)
            seen[name] = occurrence + 1
            expected = _PRESENT if value.type == "void" else erlang_term(value)
            checks.append(_Check(name, occurrence, expected))
        return cls(any_mode, tuple(checks))

    def anchors(self) -> dict[tuple[str, object], bool]:
        """Index keys under which this pattern is filed, each with whether being found under it
        already decides the match.

        An "all" pattern can only match a message that has its first checked header, with the
        expected value when one is given; an "any" pattern only one that has at least one of its
        checked headers, and finding it under a first-occurrence key means that check passed.
        Keys are `("name", name)` or `("value", (name, frozen value))`; an "all" pattern with no
        checks is `("always", None)`, an "any" pattern with none has no key: it never matches.
        """
        if not self.checks:
            return {} if self.any_mode else {("always", None): True}
        if not self.any_mode:
            first = self.checks[0]
            return {first.anchor(): len(self.checks) == 1 and first.occurrence == 0}
        out: dict[tuple[str, object], bool] = {}
        for check in self.checks:
            key = check.anchor()
            out[key] = out.get(key, False) or check.occurrence == 0
        return out

    def matches(self, headers: dict[str, list[ErlangTerm]]) -> bool:
        if self.any_mode:
            return any(check.passes(headers) for check in self.checks)
        return all(check.passes(headers) for check in self.checks)


def x_match_mode(arguments: FieldTable) -> tuple[bool, bool]:
    """(any, with_x) for a binding; unknown values fall back to "all" like `parse_x_match`, which
    matters for bindings that predate validation (RabbitMQ did not always check x-match)."""
    value = arguments.get(X_MATCH)
    if value is None or value.type != "longstr":
        return (False, False)
    return _MODES.get(bytes(value.value), (False, False))


def header_index(headers: FieldTable | None) -> dict[str, list[ErlangTerm]]:
    """Header values by name, duplicates kept in wire order (keysort is stable)."""
    index: dict[str, list[ErlangTerm]] = {}
    if headers:
        for name, value in headers:
            index.setdefault(name, []).append(erlang_term(value))
    return index


# --- The exchange type ---------------------------------------------------------------------------


@register
class HeadersExchange(ExchangeType):
    """RabbitMQ evaluates every binding of the exchange for every message. Here each binding is
    filed under the headers it needs (see `_Pattern.anchors`), so a message only evaluates the
    bindings filed under its own header names and values; the outcome is the same."""

    type_name = "headers"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._patterns: dict[Binding, _Pattern] = {}
        # anchor -> binding -> (destination, pattern to evaluate, or None when the anchor decides)
        self._anchored: dict[tuple[str, object], dict[Binding, tuple[Destination, _Pattern | None]]] = {}

    def validate_binding(self, binding: Binding) -> None:
        """Refuse an x-match RabbitMQ would refuse, with its 406 text (`validate_binding/2`)."""
        value = binding.arguments.get(X_MATCH)
        if value is None or (value.type == "longstr" and bytes(value.value) in _MODES):
            return
        if value.type == "longstr":
            prefix = "Invalid x-match field value "
            shown = format_term(erlang_term(value), column=len(prefix) + 1)
            raise precondition_failed(f"{prefix}{shown}; expected all, any, all-with-x, or any-with-x")
        prefix = f"Invalid x-match field type {value.type} (value "
        shown = format_term(erlang_term(value), column=len(prefix) + 1)
        raise precondition_failed(f"{prefix}{shown}); expected longstr")

    def add_binding(self, binding: Binding) -> None:
        if self.has_binding(binding):
            return
        super().add_binding(binding)
        pattern = _Pattern.compile(binding.arguments)
        self._patterns[binding] = pattern
        for anchor, decides in pattern.anchors().items():
            filed = None if decides else pattern
            self._anchored.setdefault(anchor, {})[binding] = (binding.destination, filed)

    def remove_bindings(self, bindings: Sequence[Binding]) -> None:
        present = [b for b in bindings if self.has_binding(b)]
        super().remove_bindings(present)
        for binding in present:
            pattern = self._patterns.pop(binding)
            for anchor in pattern.anchors():
                filed = self._anchored[anchor]
                del filed[binding]
                if not filed:
                    del self._anchored[anchor]

    def route(self, message: Message) -> list[Destination]:
        headers = header_index(message.headers())
        out: dict[Destination, None] = {}
        for anchor in self._anchors_of(headers):
            filed = self._anchored.get(anchor)
            if filed is None:
                continue
            for destination, pattern in filed.values():
                if destination not in out and (pattern is None or pattern.matches(headers)):
                    out[destination] = None
        return list(out)

    @property
    def state_summary(self) -> dict[str, int]:
        return {"bindings": len(self._patterns), "index_keys": len(self._anchored)}

    @staticmethod
    def _anchors_of(headers: dict[str, list[ErlangTerm]]) -> Iterator[tuple[str, object]]:
        yield ("always", None)
        for name, values in headers.items():
            yield ("name", name)
            yield ("value", (name, freeze(values[0])))
