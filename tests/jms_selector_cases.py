"""Generated JMS selector cases: selector terms (as a JMS client would send them, and odder ones),
typed message headers, and how to run them on a broker or predict them with `exchanges`.

A case is K selectors (each bound to its own queue of one x-jms-topic exchange) and M messages;
its outcome is, per message, the indices of the selectors that took it, or "crash" where the
evaluation fails (connection closed with 541). Generation draws from a `random.Random`, so a seed
makes a case (the recorded cases) and hypothesis can drive it (`st.randoms`).
"""

from __future__ import annotations

import random
import struct
from typing import Any

import pika
import pika.exceptions

import exchanges
from amqpwire.errors import AmqpError
from amqpwire.fields import Field, FieldTable
from tests.xtypes_support import Typed

NAMES = ["a", "b", "c", "s"]
ALPHABET = "ab%_!x"


def erl_binary(text: str) -> str:
    return '<<"' + text.replace("\\", "\\\\").replace('"', '\\"') + '">>'


def erl_float(value: float) -> str:
    return f"{value:.17e}"


def _literal(rng: random.Random) -> str:
    kind = rng.randrange(7)
    if kind == 0:
        return str(rng.choice([0, 1, -1, 2, 7, 100, 2501, -3, 2**40]))
    if kind == 1:
        return erl_float(rng.choice([0.0, 0.5, 1.0, -2.5, 2.0, 1e10, 7.0]))
    if kind == 2:
        return erl_binary("".join(rng.choice(ALPHABET) for _ in range(rng.randrange(4))))
    if kind == 3:
        return rng.choice(["true", "false"])
    if kind == 4:
        return rng.choice(["undefined", "foo", "plus_infinity"])
    if kind == 5:
        return str(rng.randrange(-5, 6))
    return erl_binary(rng.choice(["a", "b", "ab", "x"]))


def _ident(rng: random.Random) -> str:
    return "{ident, " + erl_binary(rng.choice(NAMES)) + "}"


def value_expr(rng: random.Random, depth: int) -> str:
    kind = rng.randrange(6 if depth > 0 else 3)
    if kind in (0, 1):
        return _ident(rng)
    if kind == 2:
        return _literal(rng)
    if kind == 3:
        op = rng.choice(["+", "-", "*", "/"])
        return "{'" + op + "', " + value_expr(rng, depth - 1) + ", " + value_expr(rng, depth - 1) + "}"
    if kind == 4:
        return "{'-', " + value_expr(rng, depth - 1) + "}"
    return bool_expr(rng, depth - 1)


def _pattern(rng: random.Random) -> str:
    return erl_binary("".join(rng.choice(ALPHABET) for _ in range(rng.randrange(5))))


def bool_expr(rng: random.Random, depth: int) -> str:
    kind = rng.randrange(12 if depth > 0 else 9)
    if kind == 0:
        op = rng.choice(["=", "<>", "<", ">", "<=", ">="])
        return "{'" + op + "', " + value_expr(rng, depth) + ", " + value_expr(rng, depth) + "}"
    if kind == 1:
        op = rng.choice(["between", "not_between"])
        low, high = value_expr(rng, 0), value_expr(rng, 0)
        if rng.random() < 0.5:
            return "{'" + op + "', " + value_expr(rng, depth) + ", {range, " + low + ", " + high + "}}"
        return "{'" + op + "', " + value_expr(rng, depth) + ", " + low + ", " + high + "}"
    if kind == 2:
        op = rng.choice(["in", "not_in"])
        items = ", ".join(_literal(rng) for _ in range(rng.randrange(4)))
        return "{'" + op + "', " + _ident(rng) + ", [" + items + "]}"
    if kind == 3:
        op = rng.choice(["like", "not_like"])
        escape = rng.choice(["no_escape", "no_escape", '<<"!">>', '<<"%">>'])
        if rng.random() < 0.15:
            return "{'" + op + "', " + _ident(rng) + ", {" + _pattern(rng) + ", " + escape + "}}"
        return "{'" + op + "', " + _ident(rng) + ", " + _pattern(rng) + ", " + escape + "}"
    if kind == 4:
        return "{'" + rng.choice(["is_null", "not_null"]) + "', " + _ident(rng) + "}"
    if kind in (5, 6):
        return _ident(rng)
    if kind == 7:
        return rng.choice(["true", "false", "undefined"])
    if kind == 8:
        return "{'not', " + _ident(rng) + "}"
    if kind == 9:
        return "{'not', " + bool_expr(rng, depth - 1) + "}"
    op = rng.choice(["and", "or"])
    return "{'" + op + "', " + bool_expr(rng, depth - 1) + ", " + bool_expr(rng, depth - 1) + "}"


def _float32(value: float) -> float:
    return float(struct.unpack(">f", struct.pack(">f", value))[0])


def header_field(rng: random.Random) -> Field:
    kind = rng.randrange(10)
    if kind == 0:
        return Field("longstr", "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(4))).encode())
    if kind == 1:
        return Field("longstr", rng.choice([b"a", b"b", b"ab", b"x", b"7"]))
    if kind == 2:
        return Field("signedint", rng.choice([0, 1, -1, 2, 7, 100, 2501, -3]))
    if kind == 3:
        return Field("long", rng.choice([2**40, 7, -1]))
    if kind == 4:
        return Field(rng.choice(["byte", "short"]), rng.randrange(-5, 6))
    if kind == 5:
        return Field("double", rng.choice([0.0, 0.5, 1.0, -2.5, 2.0, 1e10, 7.0]))
    if kind == 6:
        return Field("float", _float32(rng.choice([0.5, 2.0, -2.5, 7.0])))
    if kind == 7:
        return Field("bool", rng.random() < 0.5)
    if kind == 8:
        return Field("signedint", rng.randrange(-5, 6))
    return Field(rng.choice(["timestamp", "unsignedint", "longstr"]), 3 if rng.random() < 0.3 else b"ab%")


def _fix(field: Field) -> Field:
    """Timestamps and unsigned integers carry integers, never bytes."""
    if field.type in ("timestamp", "unsignedint") and not isinstance(field.value, int):
        return Field(field.type, 3)
    if field.type == "longstr" and isinstance(field.value, int):
        return Field("longstr", b"3")
    return field


def headers(rng: random.Random) -> list[tuple[str, Field]]:
    chosen = [n for n in NAMES if rng.random() < 0.6]
    return [(n, _fix(header_field(rng))) for n in chosen]


def make_case(rng: random.Random, selectors: int = 4, messages: int = 4) -> dict[str, Any]:
    return {
        "selectors": [bool_expr(rng, 2) + "." for _ in range(selectors)],
        "messages": [headers(rng) for _ in range(messages)],
    }


def predict(case: dict[str, Any]) -> list[Any]:
    """What `exchanges` routes: per message the selector indices, or "crash"."""
    bindings = [(str(i), "k", {"rjms_erlang_selector": s}) for i, s in enumerate(case["selectors"])]
    out: list[Any] = []
    for entries in case["messages"]:
        try:
            (routed,) = exchanges.predict("x-jms-topic", bindings, ["rk"], headers=FieldTable(entries))
        except AmqpError as exc:
            assert exc.reply_code == 541, exc
            out.append("crash")
        else:
            out.append(sorted(int(d) for d in routed))
    return out


class BrokerRunner:
    """Runs cases on a broker: one x-jms-topic exchange and K queues, reused case after case."""

    def __init__(self, url: str, prefix: str, selectors: int = 4) -> None:
        self.url = url
        self.exchange = f"{prefix}.jms"
        self.queues = [f"{prefix}.q{i}" for i in range(selectors)]
        self._connect()
        for q in self.queues:
            self.ch.queue_declare(q, auto_delete=True)

    def _connect(self) -> None:
        self.conn = pika.BlockingConnection(pika.URLParameters(self.url))
        self.ch = self.conn.channel()
        self.ch.confirm_delivery()

    def run(self, case: dict[str, Any]) -> list[Any]:
        ch = self.ch
        ch.exchange_delete(self.exchange)
        ch.exchange_declare(self.exchange, "x-jms-topic", auto_delete=False)
        for q, selector in zip(self.queues, case["selectors"], strict=True):
            ch.queue_purge(q)
            ch.queue_bind(q, self.exchange, "k", arguments={"rjms_erlang_selector": selector})
        out: list[Any] = []
        for i, entries in enumerate(case["messages"]):
            props = pika.BasicProperties(headers={n: Typed(f.type, f.value) for n, f in entries})
            try:
                self.ch.basic_publish(self.exchange, "rk", str(i).encode(), props)
                out.append([])
            except pika.exceptions.ConnectionClosedByBroker as exc:
                assert exc.reply_code == 541, exc
                out.append("crash")
                self._connect()
        for index, q in enumerate(self.queues):
            while True:
                method, _props, body = self.ch.basic_get(q, auto_ack=True)
                if method is None:
                    break
                out[int(body)].append(index)
        return out

    def close(self) -> None:
        try:
            self.ch.exchange_delete(self.exchange)
            for q in self.queues:
                self.ch.queue_delete(q)
            self.conn.close()
        except pika.exceptions.AMQPError:
            pass


def case_to_json(case: dict[str, Any]) -> dict[str, Any]:
    def value(field: Field) -> Any:
        return field.value.decode("latin-1") if isinstance(field.value, bytes) else field.value

    return {
        "selectors": case["selectors"],
        "messages": [[[n, f.type, value(f)] for n, f in entries] for entries in case["messages"]],
    }


def case_from_json(data: dict[str, Any]) -> dict[str, Any]:
    def field(type_name: str, value: Any) -> Field:
        return Field(type_name, value.encode("latin-1") if type_name == "longstr" else value)

    return {
        "selectors": data["selectors"],
        "messages": [[(n, field(t, v)) for n, t, v in entries] for entries in data["messages"]],
    }
