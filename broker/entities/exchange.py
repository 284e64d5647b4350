"""A declared exchange: its AMQP attributes plus the routing state from the exchanges library."""

from __future__ import annotations

from typing import Any

from amqpwire.fields import FieldTable
from exchanges.base import Binding, ExchangeType


class Exchange:
    """`impl` is None only for the default exchange, which routes by queue name (see VHost.route)."""

    __slots__ = (
        "alternate",
        "arguments",
        "auto_delete",
        "binding_set",
        "durable",
        "impl",
        "internal",
        "name",
        "name_wire",
        "policy",
        "type_name",
    )

    def __init__(
        self,
        name: str,
        type_name: str,
        impl: ExchangeType | None,
        *,
        durable: bool,
        auto_delete: bool,
        internal: bool,
        arguments: FieldTable,
    ) -> None:
        self.name = name
        raw = name.encode("utf-8", errors="surrogateescape")
        self.name_wire = bytes((len(raw),)) + raw
        self.type_name = type_name
        self.impl = impl
        self.durable = durable
        self.auto_delete = auto_delete
        self.internal = internal
        self.arguments = arguments
        self.binding_set: set[Binding] = set()
        self.policy: Any = None  # effective broker.policy.Policy (issue 4), set by BrokerPolicies
        ae = arguments.get("alternate-exchange")
        self.alternate = (
            ae.value.decode("utf-8", errors="surrogateescape") if ae and ae.type == "longstr" else None
        )
