"""RabbitMQ's route-table order: Erlang term order, checked against `erl` itself.

`exchanges.erlang.terms.term_order_key` must sort terms exactly as Erlang's `=<` does, because the
route table (x-modulus-hash positions, the consistent-hash ring rebuilt on boot) is ordered by the
`#binding{}` record. Random terms of every class a binding record holds (numbers, atoms, binaries,
tuples, lists, nested) are sorted by Erlang and by Python; the index orders must be identical.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from typing import Any

import pytest

from amqpwire.fields import FieldTable
from exchanges.base import Binding, Destination
from exchanges.erlang.terms import Atom, term_order_key
from exchanges.route_order import route_table_order


def erlang_literal(term: Any) -> str:
    if isinstance(term, int):
        return str(term)
    if isinstance(term, float):
        return format(term, ".17e")  # always digits.digits e exponent: a valid Erlang float
    if isinstance(term, Atom):
        return "'" + term.name.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(term, bytes):
        return "<<" + ",".join(str(b) for b in term) + ">>"
    if isinstance(term, tuple):
        return "{" + ",".join(erlang_literal(t) for t in term) + "}"
    if isinstance(term, list):
        return "[" + ",".join(erlang_literal(t) for t in term) + "]"
    raise TypeError(type(term))


def random_term(rng: random.Random, depth: int = 0) -> Any:
    kinds = ["int", "float", "atom", "binary"] + (["tuple", "list"] if depth < 3 else [])
    kind = rng.choice(kinds)
    if kind == "int":
        return rng.choice(
            [0, 1, -1, 2, 255, 256, 1 << 27, -(1 << 27), 1 << 64, -(1 << 70), rng.randint(-9, 9)]
        )
    if kind == "float":
        return rng.choice([0.0, 1.0, -1.0, 0.5, 2.0, 1e16, -3.25, 255.0])
    if kind == "atom":
        return Atom(
            rng.choice(["a", "b", "ab", "undefined", "true", "false", "queue", "exchange", "longstr"])
        )
    if kind == "binary":
        return bytes(rng.choice([0, 1, 97, 98, 200, 255]) for _ in range(rng.randint(0, 3)))
    items = [random_term(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return tuple(items) if kind == "tuple" else items


def erlang_sorted_indices(terms: list[Any]) -> list[int]:
    pairs = ",".join(f"{{{i},{erlang_literal(t)}}}" for i, t in enumerate(terms))
    program = (
        f"L = [{pairs}], S = lists:sort(fun({{_, A}}, {{_, B}}) -> A =< B end, L), "
        'io:format("~w~n", [[I || {I, _} <- S]]), halt().'
    )
    out = subprocess.run(["erl", "-noshell", "-eval", program], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [int(x) for x in out.stdout.strip().strip("[]").split(",") if x]


@pytest.mark.skipif(shutil.which("erl") is None, reason="Erlang (erl) is not installed on this machine")
def test_term_order_matches_erlang_sort() -> None:
    rng = random.Random(20261123)
    terms = [random_term(rng) for _ in range(1500)]
    # both sorts are stable, so even terms Erlang holds equal (1 and 1.0) keep the same relative order
    python = sorted(range(len(terms)), key=lambda i: term_order_key(terms[i]))
    assert python == erlang_sorted_indices(terms)


def test_route_table_order_sorts_key_bytes_then_kind_then_name_then_arguments() -> None:
    def b(kind: str, name: str, key: str, **args: str) -> Binding:
        table = FieldTable.from_python(args) if args else FieldTable()
        return Binding(Destination(kind, name), key, table)  # type: ignore[arg-type]

    bindings = [
        b("queue", "q", "9"),
        b("queue", "b", "10"),
        b("queue", "a", "10", z="1"),
        b("queue", "a", "10"),
        b("exchange", "z", "10"),
        b("queue", "a", "1"),
    ]
    ordered = sorted(bindings, key=route_table_order)
    # "1" < "10" < "9" as bytes; exchange before queue; a bare [] before a non-empty argument list
    assert [(x.key, x.destination.kind, x.destination.name, len(x.arguments)) for x in ordered] == [
        ("1", "queue", "a", 0),
        ("10", "exchange", "z", 0),
        ("10", "queue", "a", 0),
        ("10", "queue", "a", 1),
        ("10", "queue", "b", 0),
        ("9", "queue", "q", 0),
    ]
