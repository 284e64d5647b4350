"""The broker's view of the exchanges library's type registry, with RabbitMQ's refusal texts.

`exchanges.registry` registers the built-in types when the package loads and imports a plugin
type's module (x-consistent-hash, x-modulus-hash and the hash code under them, x-random,
x-recent-history, x-jms-topic) on its first declare, so a broker that never declares one never loads it.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from amqpwire.errors import AmqpError
from exchanges.base import ExchangeType
from exchanges.compat import Compat
from exchanges.registry import get_type as _registry_get_type
from exchanges.registry import type_names as _registry_type_names

#: Type names that are atoms of a running RabbitMQ 3.10.8 node without being exchange types, each
#: observed answering "invalid exchange type '<name>'" there (a sample: the full atom table is the
#: node's, not knowable here; every name not listed keeps the "unknown exchange type" text).
EXISTING_ATOMS: frozenset[str] = frozenset(
    [
        "ok",
        "error",
        "true",
        "false",
        "undefined",
        "queue",
        "exchange",
        "classic",
        "quorum",
        "stream",
        "binary",
        "none",
        "all",
        "any",
        "default",
        "infinity",
        "normal",
        "local",
        "global",
        "Direct",
        "lazy",
        "rabbit",
        "amqp",
        "reject",
        "drop-head",
        "badarg",
        "binding",
        "vhost",
        "user",
        "list",
        "atom",
        "integer",
        "float",
        "reject-publish",
        "reject-publish-dlx",
        "publish",
        "consume",
        "deliver",
        "ack",
        "durable",
        "transient",
        "persistent",
        "exclusive",
        "auto_delete",
        "internal",
        "match",
        "trace",
        "timeout",
        "closed",
        "running",
        "stopped",
        "node",
        "name",
        "type",
        "arguments",
        "message",
        "min-masters",
        "random",
        "client-local",
        "permanent",
        "temporary",
        "utf8",
        "latin1",
        "string",
        "text",
        "json",
        "hash",
    ]
) | {""}


PLUGIN_TYPES: dict[str, str] = {
    "x-consistent-hash": "rabbitmq_consistent_hash_exchange",
    "x-modulus-hash": "rabbitmq_sharding",
    "x-delayed-message": "rabbitmq_delayed_message_exchange",
    "x-random": "rabbitmq_random_exchange",
    "x-recent-history": "rabbitmq_recent_history_exchange",
    "x-jms-topic": "rabbitmq_jms_topic_exchange",
}
"""The exchange types a plugin brings, by the plugin that registers them."""


def get_type(name: str, compat: Compat, enabled: Container[str] | None = None) -> type[ExchangeType]:
    """The exchange type class, or RabbitMQ's refusal (rabbit_exchange:check_type).

    A name that is not even an existing Erlang atom is "unknown exchange type"; one that is an atom
    but no registered type (the empty name, 'queue', 'ok', ...) is "invalid exchange type" (same
    code). `enabled`: the enabled plugins (None = all): a plugin's type with its plugin off is
    unknown, as on a node without the plugin (the type's name is an atom there only once some
    code mentions it, and none does).
    """
    plugin = PLUGIN_TYPES.get(name)
    if plugin is not None and enabled is not None and plugin not in enabled:
        raise AmqpError(compat.unknown_type_code, f"unknown exchange type '{name}'")
    try:
        cls: Any = _registry_get_type(name, unknown_code=compat.unknown_type_code)
    except AmqpError as exc:
        if name in EXISTING_ATOMS:
            raise exc.reworded(f"invalid exchange type '{name}'") from None
        raise
    return cls


def type_names(enabled: Container[str] | None = None) -> list[str]:
    """Every type name (this loads the plugin types); with `enabled`, those of disabled plugins
    are left out (the management API's exchange_types lists only what the node knows)."""
    names = _registry_type_names()
    if enabled is None:
        return names
    return [n for n in names if PLUGIN_TYPES.get(n) is None or PLUGIN_TYPES[n] in enabled]
