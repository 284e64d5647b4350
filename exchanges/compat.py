"""Behaviours that changed between RabbitMQ versions, chosen per broker (default: 3.10.8, the reference)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

WEIGHT_CAP = 10_000
"""Largest consistent-hash binding weight accepted. RabbitMQ 3.10.8 has no cap; 4.2.6/4.3.0 added this
one to fix unbounded bucket-map memory growth (a CVE). hashbroker always caps, with 4.2.6's text."""


@dataclass(frozen=True, slots=True)
class Compat:
    """Version switches.

    header_hash: "typed" hashes a header's `{Type, Value}` tuple (RabbitMQ <= 3.12); "raw" hashes the
        bare value and seeds integers directly (3.13+).
    modulus_order: "binding-table" walks bindings ordered by binding key, then destination (3.x
        plugin); "sorted" orders destinations by (kind, name) (4.3, where the type moved into core).
    unknown_type_code: reply code for an unknown exchange type: 503 (<= 3.13.2) or 406 (3.13.3+).
    """

    header_hash: Literal["typed", "raw"] = "typed"
    modulus_order: Literal["binding-table", "sorted"] = "binding-table"
    unknown_type_code: int = 503

    @classmethod
    def for_version(cls, version: str) -> Compat:
        """Switches as RabbitMQ `version` ("3.10.8", "4.3.0"...) behaves."""
        parts = tuple(int(p) for p in version.split(".")[:3])
        return cls(
            header_hash="raw" if parts >= (3, 13) else "typed",
            modulus_order="sorted" if parts >= (4, 3) else "binding-table",
            unknown_type_code=406 if parts >= (3, 13, 3) else 503,
        )


DEFAULT_COMPAT = Compat()
