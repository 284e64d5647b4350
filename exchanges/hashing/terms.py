"""How RabbitMQ turns message parts into the Erlang terms its hash exchanges feed to phash2."""

from __future__ import annotations

from typing import Any

from amqpwire.fields import Field, FieldTable
from exchanges.erlang.atom import FIELD_ATOM_TERMS
from exchanges.erlang.terms import UNDEFINED, Atom


def key_bytes(text: str) -> bytes:
    """A routing key as the broker received it (non-UTF-8 bytes survive via surrogateescape)."""
    return text.encode("utf-8", "surrogateescape")


def field_value_term(field: Field) -> Any:
    """The Erlang value part of a decoded AMQP field, as rabbit_binary_parser builds it."""
    atom, value = field
    special = FIELD_ATOM_TERMS.get(atom)
    if special is not None:
        return special(value)
    if atom == "table":
        return table_term(value)
    if atom == "array":
        return [typed_field_term(item) for item in value]
    return value


def typed_field_term(field: Field) -> tuple[Atom, Any]:
    """`{Type, Value}`: what `rabbit_misc:table_lookup` returns and RabbitMQ <= 3.12 hashes."""
    return (Atom(field.type), field_value_term(field))


def table_term(table: FieldTable) -> list[tuple[bytes, Atom, Any]]:
    """A field table as Erlang's list of `{Name, Type, Value}` triples."""
    return [(key_bytes(name), Atom(f.type), field_value_term(f)) for name, f in table]


def property_term(name: str, value: Any) -> Any:
    """`message_id`/`correlation_id` hash as binaries, `timestamp` as the decimal text of its seconds."""
    if value is None:
        return UNDEFINED
    if name == "timestamp":
        seconds = int(value.timestamp()) if hasattr(value, "timestamp") else int(value)
        return str(seconds).encode("ascii")
    if isinstance(value, str):
        return key_bytes(value)
    return bytes(value)
