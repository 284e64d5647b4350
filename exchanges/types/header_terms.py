"""Field values as the Erlang terms RabbitMQ's headers exchange compares with `==`.

`rabbit_binary_parser` decodes a header to an Erlang term; the headers exchange then compares terms,
not types. The Python values built here compare (and hash, through `freeze`) the way Erlang's `==`
does on those terms.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from amqpwire.fields import Field
from exchanges.erlang.atom import FIELD_ATOM_TERMS, Atom

_INTEGER_TYPES: Final = frozenset(
    {"byte", "unsignedbyte", "short", "unsignedshort", "signedint", "unsignedint", "long", "timestamp"}
)


ErlangTerm = object
"""int | float | bytes | Atom | tuple (Erlang tuple) | list (Erlang list), nested."""


def erlang_term(value: Field) -> ErlangTerm:
    """The term `rabbit_binary_parser` decodes a field value to, minus its top-level type tag.

    Python's `==` on these terms then agrees with Erlang's: ints and floats compare numerically,
    Atom and bytes never equal numbers, and tuples never equal lists. Nested tables and arrays are
    built with an explicit stack: RabbitMQ accepts headers nested deeper than Python recurses.
    """
    kind, raw = value
    if kind != "array" and kind != "table":
        return _scalar_term(kind, raw)
    root: list[object] = []
    stack: list[tuple[Iterator[Any], bool, list[object]]] = [(iter(raw), kind == "table", root)]
    while stack:
        items, table, out = stack[-1]
        for item in items:
            name, field = item if table else ("", item)
            inner_kind, inner = field
            if inner_kind == "array" or inner_kind == "table":
                child: list[object] = []
                out.append(
                    (_name_bytes(name), Atom(inner_kind), child) if table else (Atom(inner_kind), child)
                )
                stack.append((iter(inner), inner_kind == "table", child))
                break
            term = _scalar_term(inner_kind, inner)
            out.append((_name_bytes(name), Atom(inner_kind), term) if table else (Atom(inner_kind), term))
        else:
            stack.pop()
    return root


def _scalar_term(kind: str, raw: Any) -> ErlangTerm:
    if kind in _INTEGER_TYPES:
        return int(raw)
    if kind in ("float", "double"):
        return float(raw)
    if kind in ("longstr", "binary"):
        return bytes(raw)
    special = FIELD_ATOM_TERMS.get(kind)
    if special is None:
        raise ValueError(f"unknown field type {kind!r}")
    return special(raw)


_LIST, _TUPLE = object(), object()


def freeze(term: ErlangTerm) -> object:
    """A hashable stand-in for a term; equal terms (in Erlang's `==`) get equal stand-ins, since
    Python hashes equal ints and floats alike. Lists are the only unhashable terms.

    A list or tuple becomes one flat tuple of tokens (a start marker with the length, then the
    items' tokens), so that hashing a deeply nested header neither recurses nor exhausts the C stack.
    """
    if not isinstance(term, list | tuple):
        return term
    tokens: list[object] = []
    stack: list[Iterator[object]] = [iter((term,))]
    while stack:
        for item in stack[-1]:
            if isinstance(item, list | tuple):
                tokens.append((_LIST if isinstance(item, list) else _TUPLE, len(item)))
                stack.append(iter(item))
                break
            tokens.append(item)
        else:
            stack.pop()
    return tuple(tokens)


def same_term(a: ErlangTerm, b: ErlangTerm) -> bool:
    """Erlang's `==` on two terms, at any nesting depth."""
    try:
        return a == b
    except RecursionError:
        return freeze(a) == freeze(b)


def _name_bytes(name: str) -> bytes:
    return name.encode("utf-8", "surrogateescape")
