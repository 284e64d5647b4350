"""AMQP values as RabbitMQ's management renders them in JSON, and the binding ids it derives from them."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import quote_plus

from amqpwire.fields import Field, FieldTable, field_to_python
from exchanges.erlang.terms import Atom, phash2


def json_value(value: Any) -> Any:
    """Turn decoded AMQP field values into what RabbitMQ's management would render in JSON."""
    if isinstance(value, Field):
        value = field_to_python(value)
    if isinstance(value, FieldTable):
        return {k: json_value(v) for k, v in value}
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:  # rabbit_mgmt_format:utf8_safe
            return "Not UTF-8, base64 is: " + base64.b64encode(value).decode("ascii")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    try:  # decimal.Decimal, datetime
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def table_to_json(table: FieldTable | None) -> dict[str, Any]:
    """AMQP arguments table as a JSON object (first entry wins on duplicates, as RabbitMQ looks up)."""
    out: dict[str, Any] = {}
    if table is None:
        return out
    for k, v in table:
        if k not in out:
            out[k] = json_value(v)
    return out


def properties_key(key: str, arguments: FieldTable | None) -> str:
    """rabbit_mgmt_format:pack_binding_props: the id of a binding in /api/bindings/... URLs.

    `quote_plus(key)` with "~" escaped, then for bindings with arguments "~" and
    base64url(<<phash2(Args, 2^32):32>>) over the arguments as RabbitMQ stores them
    ([{Key, Type, Value}]), so the ids match RabbitMQ's bit for bit.
    """
    quoted = quote_plus(key, safe="").replace("~", "%7E")
    if not arguments:
        return quoted or "~"
    digest = phash2(_args_term(arguments), 1 << 32).to_bytes(4, "big")
    return f"{quoted}~{base64.urlsafe_b64encode(digest).decode().rstrip('=')}"


def _args_term(table: FieldTable) -> list[Any]:
    return [(k.encode("utf-8", errors="surrogateescape"), Atom(f.type), _value_term(f)) for k, f in table]


def _value_term(f: Field) -> Any:
    """A field value as the Erlang term RabbitMQ keeps (see exchanges.erlang.terms mapping)."""
    if f.type == "table":
        return _args_term(f.value)
    if f.type == "array":
        return [(Atom(v.type), _value_term(v)) for v in f.value]
    if f.type == "bool":
        return Atom("true" if f.value else "false")
    if f.type == "void":
        return Atom("undefined")
    if f.type == "decimal":
        return tuple(f.value)
    return f.value
