"""RabbitMQ-exact routing, as a library with no I/O.

`predict` answers "which queues would RabbitMQ 3.10.8 deliver these messages to?" for any exchange
type, without a broker; the broker and the Spark bridge route through the same classes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from amqpwire.errors import AmqpError
from amqpwire.fields import Field, FieldTable
from exchanges.base import Binding, Destination, ExchangeType, Message, SimpleMessage
from exchanges.compat import DEFAULT_COMPAT, Compat
from exchanges.registry import get_type, type_names

__all__ = [
    "AmqpError",
    "Binding",
    "Compat",
    "Destination",
    "ExchangeType",
    "Field",
    "FieldTable",
    "Message",
    "SimpleMessage",
    "create_exchange",
    "get_type",
    "hash_implementation",
    "predict",
    "type_names",
]


def hash_implementation() -> str:
    """ "mypyc" when the compiled hash module routes, "python" when hashcore.py runs interpreted."""
    from exchanges.hashing.native import hash_implementation as implementation

    return implementation()


BindingSpec = tuple[str, str] | tuple[str, str, Mapping[str, Any] | FieldTable]


def create_exchange(
    exchange_type: str,
    arguments: Mapping[str, Any] | FieldTable | None = None,
    compat: Compat = DEFAULT_COMPAT,
) -> ExchangeType:
    """Validate declare arguments and build the routing state, as `exchange.declare` does."""
    table = FieldTable.from_python(arguments)
    cls = get_type(exchange_type, unknown_code=compat.unknown_type_code)
    cls.validate(table)
    instance: ExchangeType = cls(table, compat)
    return instance


def _per_message(value: Any, count: int) -> list[Any]:
    """One value for every message, or a sequence already aligned with the messages."""
    if value is None or isinstance(value, Mapping | FieldTable):
        return [value] * count
    values = list(value)
    if len(values) != count:
        raise ValueError(f"expected {count} headers/properties entries, got {len(values)}")
    return values


def predict(
    exchange_type: str,
    bindings: Iterable[BindingSpec],
    routing_keys: Iterable[str],
    arguments: Mapping[str, Any] | FieldTable | None = None,
    headers: Mapping[str, Any] | FieldTable | Sequence[Mapping[str, Any] | None] | None = None,
    properties: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None,
    compat: Compat = DEFAULT_COMPAT,
) -> list[list[str]]:
    """Destination names RabbitMQ would route each message to (the order carries no meaning).

    `bindings` is an ordered list of `(queue, binding_key)` or `(queue, binding_key, arguments)`;
    binding order matters for x-consistent-hash. `headers` and `properties` are either one mapping
    for every message or one per message. Plain Python header values are typed as pika sends them
    (str -> longstr, int -> signedint, ...); pass `Field("byte", 5)` to state another wire type.
    Raises `AmqpError` with RabbitMQ's reply code and text for arguments or bindings it would refuse.
    """
    exchange = create_exchange(exchange_type, arguments, compat)
    seen: set[Binding] = set()
    for spec in bindings:
        destination, key = spec[0], spec[1]
        binding_args = FieldTable.from_python(spec[2] if len(spec) > 2 else None)
        binding = Binding(Destination.queue(destination), key, binding_args)
        exchange.validate_binding(binding)
        if binding not in seen:
            seen.add(binding)
            exchange.add_binding(binding)
    keys = list(routing_keys)
    header_list = _per_message(headers, len(keys))
    property_list = _per_message(properties, len(keys))
    out: list[list[str]] = []
    reusable = SimpleMessage([""])
    for key, header_value, props in zip(keys, header_list, property_list, strict=True):
        reusable.keys = (key,)
        reusable.header_table = None if header_value is None else FieldTable.from_python(header_value)
        reusable.properties = props or {}
        out.append([d.name for d in exchange.route(reusable)])
    return out
