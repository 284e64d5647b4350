"""Exchange types by name, like RabbitMQ's `rabbit_registry` for the `exchange` class."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, TypeVar

from amqpwire.errors import AmqpError

if TYPE_CHECKING:
    from exchanges.base import ExchangeType

_TYPES: dict[str, type[ExchangeType]] = {}

_LAZY_MODULES = {
    "direct": "exchanges.types.direct",
    "fanout": "exchanges.types.fanout",
    "topic": "exchanges.types.topic",
    "headers": "exchanges.types.headers",
    "x-delayed-message": "exchanges.types.delayed",
    "x-consistent-hash": "exchanges.types.consistent_hash",
    "x-modulus-hash": "exchanges.types.modulus_hash",
    "x-random": "exchanges.types.random",
    "x-recent-history": "exchanges.types.recent_history",
    "x-jms-topic": "exchanges.types.jms_topic",
}
"""Each type's module, loaded on the type's first use, as RabbitMQ loads a plugin's exchange type only
when the plugin is enabled: a broker that never declares a hash type does not load the hash code
under it, and `import exchanges` loads no type at all."""


def _load(type_name: str) -> None:
    module = _LAZY_MODULES.get(type_name)
    if module is not None and type_name not in _TYPES:
        importlib.import_module(module)  # its @register fills _TYPES


T = TypeVar("T", bound="type[ExchangeType]")


def register(cls: T) -> T:
    """Class decorator: make an exchange type available under its `type_name`."""
    _TYPES[cls.type_name] = cls
    return cls


def find_type(type_name: str) -> type[ExchangeType] | None:
    _load(type_name)
    return _TYPES.get(type_name)


def get_type(type_name: str, *, unknown_code: int = 503) -> type[ExchangeType]:
    """The class for `type_name`, or the error RabbitMQ gives for an unknown type.

    RabbitMQ 3.10 answers `exchange.declare` with an unknown type with a 503 COMMAND_INVALID
    connection error "unknown exchange type '<name>'" (observed); 3.13.3+ uses 406 on the channel.
    """
    _load(type_name)
    cls = _TYPES.get(type_name)
    if cls is None:
        raise AmqpError(unknown_code, f"unknown exchange type '{type_name}'")
    return cls


def type_names() -> list[str]:
    for type_name in _LAZY_MODULES:
        _load(type_name)
    return sorted(_TYPES)
