"""The Erlang atom, as every part of the term emulation represents it.

Kept apart from `exchanges.erlang.terms` (phash2, term order) so that what only prints or compares
terms, such as the `~p` printer, does not load the hash core.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final


@dataclass(frozen=True, slots=True)
class Atom:
    """An Erlang atom (`undefined`, `true`, `longstr`...): equal only to the same atom, never to a
    number or a binary."""

    name: str


TRUE: Final = Atom("true")
FALSE: Final = Atom("false")
UNDEFINED: Final = Atom("undefined")


FIELD_ATOM_TERMS: Final[Mapping[str, Callable[[Any], object]]] = {
    "bool": lambda value: TRUE if value else FALSE,
    "void": lambda value: UNDEFINED,
    "decimal": tuple,
}
"""The AMQP field types whose Erlang term is not their Python value, as `rabbit_binary_parser`
decodes them: a boolean is the atom `true` or `false`, void is `undefined`, a decimal the tuple
`{Scale, Value}`; each maps the Python value to that term."""
