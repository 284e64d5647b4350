"""Differential scenarios for Erlang terms in queue declaration errors: a redeclare with a table or
array argument that differs prints the values with `~p` (each table entry with its own type,
binaries by the printable-Latin-1 rule: `\\n` escaped, bytes >= 0xA0 as themselves).

RabbitMQ 3.10.8 is the truth; hashbroker must produce the same observation.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.differential_support import Ctx, Registry, attempt, run_differential

registry = Registry()
scenario = registry.scenario

# x-queue-master-locator is checked only for a queue that is not exclusive: an exclusive one keeps
# any value, so its redeclare compares the two tables term by term
LOCATOR = "x-queue-master-locator"


@scenario
def scenario_inequivalent_table_and_array_arguments(ctx: Ctx) -> Any:
    out: dict[str, Any] = {}
    cases = {
        "table": ({"a": "b", "n": 1}, {"a": "c\n\xe9"}),
        "array": (["b", 2], ["\xe9\n"]),
        "dropped": (["b", 2], None),
    }
    for label, (first, second) in cases.items():
        ch = ctx.connect().channel()
        q = ctx.queue(label)
        ch.queue_declare(q, exclusive=True, arguments={LOCATOR: first})
        again = {LOCATOR: second} if second is not None else {}
        out[label] = attempt(
            lambda ch=ch, q=q, again=again: ch.queue_declare(q, exclusive=True, arguments=again)
        )
    return out


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("name", "target"), registry.params())
def test_differential(name: str, target: str, request: pytest.FixtureRequest) -> None:
    run_differential(registry, name, target, request)
