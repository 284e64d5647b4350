"""Access to the exchanges library's type registry.

`exchanges/__init__.py` is expected to import every type module; until it does (or if it imports
only some), we import the package's modules ourselves so `direct`, `fanout`... are registered.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from amqpwire.errors import AmqpError
from exchanges.base import ExchangeType
from exchanges.compat import Compat

_loaded = False


def _load() -> None:
    global _loaded
    if _loaded:
        return
    import exchanges

    for info in pkgutil.iter_modules(exchanges.__path__):
        if info.name.startswith("_") or info.name in {"predict", "cli", "__main__"}:
            continue
        try:
            importlib.import_module(f"exchanges.{info.name}")
        except Exception:  # a half-written module must not take the broker down
            continue
    _loaded = True


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


def get_type(name: str, compat: Compat) -> type[ExchangeType]:
    """The exchange type class, or RabbitMQ's refusal (rabbit_exchange:check_type).

    A name that is not even an existing Erlang atom is "unknown exchange type"; one that is an atom
    but no registered type (the empty name, 'queue', 'ok', ...) is "invalid exchange type" (same
    code). hashbroker used to say "unknown" for both.
    """
    _load()
    from exchanges.registry import get_type as _get

    try:
        cls: Any = _get(name, unknown_code=compat.unknown_type_code)
    except AmqpError as exc:
        if name in EXISTING_ATOMS:
            raise AmqpError(exc.reply_code, f"invalid exchange type '{name}'", hard=exc.hard) from None
        raise
    return cls


def type_names() -> list[str]:
    _load()
    from exchanges.registry import type_names as _names

    return _names()
