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
from amqpwire.fields import Field, FieldTable
from exchanges.base import Binding, Destination, ExchangeType, Message
from exchanges.erlang_format import erlang_float, format_binary_p, printable_latin1
from exchanges.registry import register

X_MATCH: Final = "x-match"
_MODES: Final[dict[bytes, tuple[bool, bool]]] = {
    # x-match value -> (any instead of all, x- arguments take part)
    b"all": (False, False),
    b"any": (True, False),
    b"all-with-x": (False, True),
    b"any-with-x": (True, True),
}
_INTEGER_TYPES: Final = frozenset(
    {"byte", "unsignedbyte", "short", "unsignedshort", "signedint", "unsignedint", "long", "timestamp"}
)


# --- Field values as the Erlang terms RabbitMQ compares ------------------------------------------


@dataclass(frozen=True, slots=True)
class Atom:
    """An Erlang atom: equal only to the same atom, never to a number or binary."""

    name: str


TRUE: Final = Atom("true")
FALSE: Final = Atom("false")
UNDEFINED: Final = Atom("undefined")

ErlangTerm = object
"""int | float | bytes | Atom | tuple (Erlang tuple) | list (Erlang list), nested."""


def erlang_term(value: Field) -> ErlangTerm:
    """The term `rabbit_binary_parser` decodes a field value to, minus its top-level type tag.

    Python's `==` on these terms then agrees with Erlang's: ints and floats compare numerically,
    Atom and bytes never equal numbers, and tuples never equal lists.
    """
    kind, raw = value
    if kind in _INTEGER_TYPES:
        return int(raw)
    if kind in ("float", "double"):
        return float(raw)
    if kind in ("longstr", "binary"):
        return bytes(raw)
    if kind == "bool":
        return TRUE if raw else FALSE
    if kind == "void":
        return UNDEFINED
    if kind == "decimal":
        return tuple(raw)
    if kind == "array":
        return [(Atom(item.type), erlang_term(item)) for item in raw]
    if kind == "table":
        return [(_name_bytes(name), Atom(item.type), erlang_term(item)) for name, item in raw]
    raise ValueError(f"unknown field type {kind!r}")


def freeze(term: ErlangTerm) -> object:
    """A hashable stand-in for a term; equal terms (in Erlang's `==`) get equal stand-ins, since
    Python hashes equal ints and floats alike. Lists are the only unhashable terms."""
    if isinstance(term, list):
        return ("list", tuple(freeze(item) for item in term))
    if isinstance(term, tuple):
        return tuple(freeze(item) for item in term)
    return term


def _name_bytes(name: str) -> bytes:
    return name.encode("utf-8", "surrogateescape")


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
        return self.expected is _PRESENT or values[self.occurrence] == self.expected


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
        self._patterns: dict[Binding, _Pattern] = {}
        # anchor -> binding -> (destination, pattern to evaluate, or None when the anchor decides)
        self._anchored: dict[tuple[str, object], dict[Binding, tuple[Destination, _Pattern | None]]] = {}
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    # The base class keeps bindings in a list; a dict makes unbinding O(1) instead of O(bindings).
    @property
    def bindings(self) -> list[Binding]:
        return list(self._patterns)

    @bindings.setter
    def bindings(self, value: Sequence[Binding]) -> None:
        self._patterns = {}
        self._anchored = {}
        for binding in value:
            self.add_binding(binding)

    def validate_binding(self, binding: Binding) -> None:
        """Refuse an x-match RabbitMQ would refuse, with its 406 text (`validate_binding/2`)."""
        value = binding.arguments.get(X_MATCH)
        if value is None or (value.type == "longstr" and bytes(value.value) in _MODES):
            return
        if value.type == "longstr":
            prefix = "Invalid x-match field value "
            shown = erlang_pretty(erlang_term(value), column=len(prefix) + 1)
            raise precondition_failed(f"{prefix}{shown}; expected all, any, all-with-x, or any-with-x")
        prefix = f"Invalid x-match field type {value.type} (value "
        shown = erlang_pretty(erlang_term(value), column=len(prefix) + 1)
        raise precondition_failed(f"{prefix}{shown}); expected longstr")

    def add_binding(self, binding: Binding) -> None:
        if binding in self._patterns:
            return
        pattern = _Pattern.compile(binding.arguments)
        self._patterns[binding] = pattern
        for anchor, decides in pattern.anchors().items():
            filed = None if decides else pattern
            self._anchored.setdefault(anchor, {})[binding] = (binding.destination, filed)

    def remove_bindings(self, bindings: Sequence[Binding]) -> None:
        for binding in bindings:
            pattern = self._patterns.pop(binding, None)
            if pattern is None:
                continue
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


# --- Erlang's ~p, for the x-match error text -----------------------------------------------------
#
# RabbitMQ formats the offending value with io_lib:format("~p"), whose output (OTP 25) wraps long
# lists and tuples at 80 columns and prints binaries as text only when every byte is printable
# Latin-1. What follows is io_lib_pretty's algorithm (print/pp/cind) for the terms a field value
# can decode to; the column matters because continuation lines are indented to it.

_LINE = 80


class _NoGood(Exception):
    """io_lib_pretty's `throw(no_good)`: this tagged-tuple indentation does not fit."""


@dataclass(slots=True)
class _Layout:
    """io_lib_pretty's intermediate format: `text` for atomic pieces (the `?ATM` case), else the
    children of a list/tuple or the byte strings of a non-printable binary."""

    kind: str  # "text" | "bin" | "list" | "tuple"
    length: int
    text: str = ""
    items: tuple[_Layout, ...] = ()
    parts: tuple[str, ...] = ()
    tagged: bool = False

    @property
    def atomic(self) -> bool:
        return self.kind == "text"


def erlang_pretty(term: ErlangTerm, column: int = 1) -> str:
    """`io_lib:format("~p", [Term])` starting at `column`, as text whose UTF-8 encoding (with
    surrogateescape) is the bytes RabbitMQ sends: the Latin-1 characters ~p emits for a binary's
    bytes are those very bytes on the wire."""
    if isinstance(term, list | tuple | bytes):
        layout = _layout(term)
        if layout.length < _LINE - column:
            text = _write(layout)
        else:
            indent = _choose_tag_indent(layout, column)
            text = _pp(layout, column, layout.length, indent, " " * (column - 1), 0, 0)
    else:
        text = _write_atomic(term)
    return text.encode("latin-1").decode("utf-8", "surrogateescape")


def _write_atomic(term: ErlangTerm) -> str:
    if isinstance(term, Atom):
        return term.name  # every atom a field decodes to is a plain lowercase word
    if isinstance(term, float):
        return erlang_float(term)
    return str(term)


def _layout(term: ErlangTerm) -> _Layout:
    """`print_length/6` with unlimited depth."""
    if isinstance(term, bytes):
        return _layout_binary(term)
    if isinstance(term, list | tuple):
        if not term:
            text = "[]" if isinstance(term, list) else "{}"
            return _Layout("text", 2, text=text)
        items = tuple(_layout(item) for item in term)
        length = 2 + sum(item.length for item in items) + len(items) - 1
        if isinstance(term, list):
            return _Layout("list", length, items=items)
        tagged = isinstance(term[0], Atom) and len(term) > 1
        return _Layout("tuple", length, items=items, tagged=tagged)
    text = _write_atomic(term)
    return _Layout("text", len(text), text=text)


def _layout_binary(value: bytes) -> _Layout:
    if not value:
        return _Layout("text", 4, text="<<>>")
    if printable_latin1(value):
        text = format_binary_p(value).decode("latin-1")
        return _Layout("text", len(text), text=text)
    parts = tuple(str(b) for b in value)
    return _Layout("bin", 4 + sum(map(len, parts)) + len(parts) - 1, parts=parts)


def _write(layout: _Layout) -> str:
    if layout.kind == "text":
        return layout.text
    if layout.kind == "bin":
        return "<<" + ",".join(layout.parts) + ">>"
    inner = ",".join(_write(item) for item in layout.items)
    return f"[{inner}]" if layout.kind == "list" else f"{{{inner}}}"


def _fits(layout: _Layout, col: int, most: int, ld: int, width: int) -> bool:
    return layout.length < _LINE - col - ld and layout.length + width + ld <= most


def _fits_after(item: _Layout, col: int, most: int, ld: int, width: int) -> bool:
    """The `pp_tail` test for appending `,Item` to the current line."""
    size = 1 + item.length
    if ld == 0:
        return item.atomic and size + 1 < _LINE - col and width + size + 1 <= most
    return item.atomic and size < _LINE - col - ld and width + size + ld <= most


def _last_depth(rest: Sequence[_Layout], ld: int) -> int:
    return 0 if rest else ld + 1


def _choose_tag_indent(layout: _Layout, col: int) -> int:
    """`while_fail([-1, 4], cind, 1)`: the first tagged-tuple indentation that fits."""
    for indent in (-1, 4):
        try:
            return _cind(layout, col, layout.length, indent, 0, 0)
        except _NoGood:
            continue
    return 1


def _pp(layout: _Layout, col: int, most: int, tind: int, ind: str, ld: int, width: int) -> str:
    if _fits(layout, col, most, ld, width):
        return _write(layout)
    if layout.kind == "list":
        return "[" + _pp_list(layout.items, col + 1, most, tind, " " + ind, ld, width + 1) + "]"
    if layout.kind == "tuple" and layout.tagged:
        return "{" + _pp_tag_tuple(layout.items, col, most, tind, ind, ld, width + 1) + "}"
    if layout.kind == "tuple":
        return "{" + _pp_list(layout.items, col + 1, most, tind, " " + ind, ld, width + 1) + "}"
    if layout.kind == "bin":
        return _pp_binary(layout.parts, col + 2, most, "  " + ind, ld, width)
    return layout.text


def _pp_tag_tuple(
    items: Sequence[_Layout], col: int, most: int, tind: int, ind: str, ld: int, width: int
) -> str:
    tag, rest = items[0], items[1:]
    tag_ind = tag.length + 2
    tag_col = col + tag_ind
    if 0 < tind < tag_ind:
        tail = _pp_tail(rest, col + tind, tag_col, most, tind, " " * tind + ind, ld, width + tag.length)
        return tag.text + tail
    tail = _pp_list(rest, tag_col, most, tind, " " * tag_ind + ind, ld, width + tag.length + 1)
    return tag.text + "," + tail


def _pp_list(items: Sequence[_Layout], col: int, most: int, tind: int, ind: str, ld: int, width: int) -> str:
    first, rest = items[0], items[1:]
    text, used = _pp_element(first, col, most, tind, ind, _last_depth(rest, ld), width)
    return text + _pp_tail(rest, col, col + used, most, tind, ind, ld, width + used)


def _pp_tail(
    items: Sequence[_Layout], col0: int, col: int, most: int, tind: int, ind: str, ld: int, width: int
) -> str:
    out: list[str] = []
    for position, item in enumerate(items):
        item_ld = _last_depth(items[position + 1 :], ld)
        if _fits_after(item, col, most, item_ld, width):
            out.append("," + _write(item))
            col += 1 + item.length
            width += 1 + item.length
        else:
            text, used = _pp_element(item, col0, most, tind, ind, item_ld, 0)
            out.append(",\n" + ind + text)
            col = col0 + used
            width = used
    return "".join(out)


def _pp_element(
    item: _Layout, col: int, most: int, tind: int, ind: str, ld: int, width: int
) -> tuple[str, int]:
    if item.atomic and _fits(item, col, most, ld, width):
        return _write(item), item.length
    return _pp(item, col, most, tind, ind, ld, width), _LINE  # _LINE forces the next item onto a new line


def _pp_binary(parts: Sequence[str], col: int, most: int, ind: str, ld: int, width: int) -> str:
    """A non-printable binary too long for the line, broken between byte values."""
    room = max(8, min(_LINE - col, most - 4 - width) - ld)
    left = room
    out = ["<<"]
    for part in parts[:-1]:
        size = len(part) + 1
        if left - size < 0:
            out.append("\n" + ind + part + ",")
            left = room - size
        else:
            out.append(part + ",")
            left -= size
    last = parts[-1]
    out.append("\n" + ind + last if len(last) > left else last)
    out.append(">>")
    return "".join(out)


def _cind(layout: _Layout, col: int, most: int, ind: int, ld: int, width: int) -> int:
    """Check that tagged-tuple indentation `ind` keeps everything within the line (`cind/7`)."""
    if _fits(layout, col, most, ld, width):
        return ind
    if layout.kind == "list" or (layout.kind == "tuple" and not layout.tagged):
        return _cind_list(layout.items, col + 1, most, ind, ld, width + 1)
    if layout.kind == "tuple":
        return _cind_tag_tuple(layout.items, col, most, ind, ld, width + 1)
    return ind


def _cind_tag_tuple(items: Sequence[_Layout], col: int, most: int, ind: int, ld: int, width: int) -> int:
    tag, rest = items[0], items[1:]
    tag_ind = tag.length + 2
    tag_col = col + tag_ind
    if 0 < ind < tag_ind:
        col1 = col + ind
        if most + col1 <= _LINE or col1 <= _LINE // 2:
            return _cind_tail(rest, col1, tag_col, most, ind, ld, width + tag.length)
        raise _NoGood
    if most + tag_col < _LINE or tag_col < _LINE // 2:
        return _cind_list(rest, tag_col, most, ind, ld, width + tag.length + 1)
    raise _NoGood


def _cind_list(items: Sequence[_Layout], col: int, most: int, ind: int, ld: int, width: int) -> int:
    first, rest = items[0], items[1:]
    used = _cind_element(first, col, most, ind, _last_depth(rest, ld), width)
    return _cind_tail(rest, col, col + used, most, ind, ld, width + used)


def _cind_tail(
    items: Sequence[_Layout], col0: int, col: int, most: int, ind: int, ld: int, width: int
) -> int:
    for position, item in enumerate(items):
        item_ld = _last_depth(items[position + 1 :], ld)
        if _fits_after(item, col, most, item_ld, width):
            col += 1 + item.length
            width += 1 + item.length
        else:
            used = _cind_element(item, col0, most, ind, item_ld, 0)
            col = col0 + used
            width = used
    return ind


def _cind_element(item: _Layout, col: int, most: int, ind: int, ld: int, width: int) -> int:
    if item.atomic and _fits(item, col, most, ld, width):
        return item.length
    _cind(item, col, most, ind, ld, width)
    return _LINE
