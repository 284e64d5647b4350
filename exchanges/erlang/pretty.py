"""`~p` of the terms the headers exchange decodes field values to, for its x-match error text.

`exchanges.types.header_terms` builds those terms with an atom class of its own; the printer
(`exchanges.erlang.format.format_term`) prints `exchanges.erlang.terms.Atom`, so the atoms are
carried over first. When header_terms builds `exchanges.erlang.terms.Atom` itself, this module is
`format_term` and its importers can call that directly.
"""

from __future__ import annotations

from exchanges.erlang.atom import Atom
from exchanges.erlang.format import format_term
from exchanges.types import header_terms


def erlang_pretty(term: object, column: int = 1) -> str:
    """`io_lib:format("~p", [Term])` starting at `column` (see `exchanges.erlang.format`)."""
    return format_term(_with_printer_atoms(term), column)


def _with_printer_atoms(term: object) -> object:
    if isinstance(term, header_terms.Atom):
        return Atom(term.name)
    if isinstance(term, list):
        return [_with_printer_atoms(item) for item in term]
    if isinstance(term, tuple):
        return tuple(_with_printer_atoms(item) for item in term)
    return term
