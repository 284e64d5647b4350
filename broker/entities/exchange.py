"""A declared exchange: its AMQP attributes plus the routing state from the exchanges library."""

from __future__ import annotations

from typing import TYPE_CHECKING

from amqpwire.fields import FieldTable
from broker.entities.info import ExchangeView
from broker.protocol.methods import shortstr
from exchanges.base import Binding, Destination, ExchangeType

if TYPE_CHECKING:
    from broker.entities.policy import Policy


class Exchange:
    """`impl` is None only for the default exchange, which routes by queue name (see VHost.route)."""

    __slots__ = (
        "alternate",
        "arguments",
        "auto_delete",
        "binding_set",
        "durable",
        "fanout_extra",
        "impl",
        "internal",
        "name",
        "name_wire",
        "policy",
        "publish_in",
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
        self.name_wire = shortstr(name)
        self.type_name = type_name
        self.impl = impl
        self.durable = durable
        self.auto_delete = auto_delete
        self.internal = internal
        self.arguments = arguments
        self.binding_set: set[Binding] = set()
        self.policy: Policy | None = None  # the effective policy, set by BrokerPolicies
        # message_stats (broker.entities.message_stats): publishes to it, and the queues they
        # reached beyond one each (publish_out = publish_in + fanout_extra: a publish that reaches
        # exactly one queue, the common case, costs one count)
        self.publish_in = 0
        self.fanout_extra = 0
        ae = arguments.get("alternate-exchange")
        self.alternate = (
            ae.value.decode("utf-8", errors="surrogateescape") if ae and ae.type == "longstr" else None
        )

    @property
    def publish_out(self) -> int:
        """How many queues its publishes reached (RabbitMQ's `publish_out`)."""
        return self.publish_in + self.fanout_extra

    @property
    def policy_name(self) -> str | None:
        """Name of the effective policy, None when none applies."""
        return self.policy.name if self.policy is not None else None

    # -- bindings where this exchange is the source: `binding_set` and the type's routing state
    # change together, each step costing the same however many bindings the exchange has

    def add_binding(self, binding: Binding) -> bool:
        """Validate and record a binding; False (nothing changes) when it already exists.
        Raises the type's AmqpError for a binding it refuses."""
        if binding in self.binding_set:
            return False
        assert self.impl is not None, "the default exchange takes no bindings"
        self.impl.validate_binding(binding)
        self.impl.add_binding(binding)
        self.binding_set.add(binding)
        return True

    def remove_binding(self, binding: Binding) -> bool:
        """Forget one binding; False when it did not exist."""
        if binding not in self.binding_set:
            return False
        self.binding_set.discard(binding)
        if self.impl is not None:
            self.impl.remove_bindings([binding])
        return True

    def remove_destination(self, destination: Destination) -> list[Binding]:
        """Forget every binding to `destination` (a queue or exchange being deleted) and return
        them: the cost is that destination's bindings, not the exchange's."""
        if self.impl is None:
            return []
        gone = self.impl.remove_destination(destination)
        self.binding_set.difference_update(gone)
        return gone

    def bindings_in_order(self) -> list[Binding]:
        """The bindings in the order they were made where the type keeps one (binding order is
        routing state for x-consistent-hash), then any others sorted by destination and key."""
        live = self.binding_set
        ordered = self.impl.bindings if self.impl is not None else []
        seq = [b for b in ordered if b in live]
        seen = set(seq)
        seq += sorted((b for b in live if b not in seen), key=lambda b: (b.destination, b.key))
        return seq

    @property
    def routing_state(self) -> dict[str, object]:
        """The exchange type's state_summary (e.g. the consistent-hash ring), {} for none."""
        return dict(self.impl.state_summary) if self.impl is not None else {}

    def info(self, vhost: str, *, detail: bool = True) -> ExchangeView:
        """A snapshot for management and tools, with the message_stats counters; `detail`: with
        the bindings and the routing state too, which cost O(bindings + ring size) to take (a
        listing of every exchange goes without)."""
        return ExchangeView(
            vhost=vhost,
            name=self.name,
            type=self.type_name,
            durable=self.durable,
            auto_delete=self.auto_delete,
            internal=self.internal,
            arguments=self.arguments,
            policy=self.policy_name,
            publish_in=self.publish_in,
            publish_out=self.publish_out,
            bindings=tuple(self.bindings_in_order()) if detail else (),
            routing_state=self.routing_state if detail else {},
        )
