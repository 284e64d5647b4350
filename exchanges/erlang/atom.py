"""The Erlang atom, as every part of the term emulation represents it.

Kept apart from `exchanges.erlang.terms` (phash2, term order) so that what only prints or compares
terms, such as the `~p` printer, does not load the hash core.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class Atom:
    """An Erlang atom (`undefined`, `true`, `longstr`...): equal only to the same atom, never to a
    number or a binary."""

    name: str


TRUE: Final = Atom("true")
FALSE: Final = Atom("false")
UNDEFINED: Final = Atom("undefined")
