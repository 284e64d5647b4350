"""Policies, the emulated cluster and sharding, applied to a live broker.

The decisions live in the sans-I/O modules (`broker.entities.policy`, `broker.entities.sharding`,
`broker.entities.cluster`, `broker.entities.queues.consumers`); this module executes them against
vhosts, exchanges and queues. `Broker.policies` is a `BrokerPolicies`; `/api/policies` and
`hashbroker ctl set_policy` store and apply policies through it.

Hooks the entities call (each vhost's `hooks` attribute): `exchange_declared`, `exchange_deleted`,
`queue_added`; the channel calls `rewrite_queue` (sharding interceptor).
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from amqpwire.errors import AmqpError
from amqpwire.fields import FieldTable
from broker.entities import sharding
from broker.entities.cluster import Cluster
from broker.entities.policy import Policy, PolicyNotFound, PolicyStore, alternate_exchange
from exchanges.base import Binding, Destination

if TYPE_CHECKING:
    from broker.entities.exchange import Exchange
    from broker.entities.queues.catalog import Queue
    from broker.entities.vhost import VHost
    from broker.runtime.settings import Settings

log = logging.getLogger("hashbroker.policies")


class PolicyHost(Protocol):
    """What the policy engine needs of the broker that runs it: its settings and its vhosts."""

    @property
    def settings(self) -> Settings: ...

    @property
    def vhosts(self) -> Mapping[str, VHost]: ...


def field_value(field: Any) -> Any:
    """A Field's value as a policy definition would hold it (longstr decoded, numbers as int)."""
    if field is None:
        return None
    if field.type == "longstr":
        return field.value.decode("utf-8", "surrogateescape")
    return field.value


class BrokerPolicies:
    """The broker's policy engine."""

    applied = True

    def __init__(self, broker: PolicyHost) -> None:
        self.broker = broker
        self.store = PolicyStore()
        self.cluster = Cluster(broker.settings.nodes)
        # (vhost, exchange) -> sharding config currently applied
        self.sharded: dict[tuple[str, str], sharding.ShardingConfig] = {}

    # -- vhost wiring ------------------------------------------------------------------------------

    def attach(self, vhost: VHost) -> None:
        vhost.hooks = self
        vhost.node = self.cluster.local
        vhost.active_consumer_selection = self.broker.settings.active_consumer_selection
        vhost.dead_letter_retry_seconds = self.broker.settings.dead_letter_worker_publisher_confirm_timeout
        self._place(vhost.queues.values())
        self.reapply(vhost)

    def _vhosts(self) -> list[VHost]:
        return list(self.broker.vhosts.values())

    # -- the management API's view (list/get/put/delete) -------------------------------------------

    def list(self, vhost: str | None = None) -> builtins.list[Policy]:
        return self.store.policies(vhost)

    def get(self, vhost: str, name: str) -> Policy | None:
        return self.store.get(name, vhost)

    def put(self, policy: Policy) -> bool:
        """Store and apply a validated `policy`; True when it is new (the API answers 201)."""
        old, _new = self.set(
            policy.name, policy.pattern, policy.definition, policy.priority, policy.apply_to, policy.vhost
        )
        return old is None

    def delete(self, vhost: str, name: str) -> bool:
        try:
            self.clear(name, vhost)
        except PolicyNotFound:
            return False
        return True

    # -- the engine --------------------------------------------------------------------------------

    def set(
        self,
        name: str,
        pattern: str,
        definition: Any,
        priority: int = 0,
        apply_to: str = "all",
        vhost: str = "/",
    ) -> tuple[Policy | None, Policy]:
        result = self.store.set(name, pattern, definition, priority, apply_to, vhost)
        vh = self.broker.vhosts.get(vhost)
        if vh is not None:
            self.reapply(vh)
        return result

    def clear(self, name: str, vhost: str = "/") -> Policy:
        old = self.store.clear(name, vhost)
        vh = self.broker.vhosts.get(vhost)
        if vh is not None:
            self.reapply(vh)
        return old

    def reapply(self, vhost: VHost) -> None:
        """Recompute the effective policy of every exchange and queue of `vhost` (after set/clear)."""
        for x in list(vhost.exchanges.values()):
            if x.name:
                self._apply_exchange(vhost, x)
        for q in list(vhost.queues.values()):
            self._apply_queue(vhost, q)

    def _apply_exchange(self, vhost: VHost, x: Exchange, created: bool = False) -> None:
        policy = self.store.effective("exchange", x.name, vhost.name)
        if policy is x.policy and not created:
            return
        x.policy = policy
        ae_arg = x.arguments.get("alternate-exchange")
        args = {"alternate-exchange": field_value(ae_arg)} if ae_arg is not None else {}
        x.alternate = alternate_exchange(policy, args)
        key = (vhost.name, x.name)
        old = self.sharded.get(key)
        new = sharding.ShardingConfig.from_definition(policy.definition if policy else None)
        if new is None:
            self.sharded.pop(key, None)
        else:
            self.sharded[key] = new
        if old is None and new is None:
            return
        self._execute(vhost, x, sharding.policy_changed(x.name, x.durable, old, new, self.cluster.nodes))

    def _apply_queue(self, vhost: VHost, q: Queue) -> None:
        policy = self.store.effective("queue", q.name, vhost.name, q.is_policy_applicable)
        if policy is q.policy:
            return
        q.apply_policy(policy)

    def _execute(self, vhost: VHost, x: Exchange, actions: sharding.ShardActions) -> None:
        from broker.entities.queues.catalog import Queue

        for qname, key in actions.unbind:
            vhost.remove_binding(x, Binding(Destination.queue(qname), key, FieldTable()))
        for qname, durable in actions.declare:
            if qname not in vhost.queues:
                vhost.add_queue(
                    Queue(
                        vhost,
                        qname,
                        durable=durable,
                        exclusive_owner=None,
                        auto_delete=False,
                        arguments=FieldTable(),
                    )
                )
        for qname, key in actions.bind:
            if qname not in vhost.queues:
                continue
            try:
                vhost.add_binding(x, Binding(Destination.queue(qname), key, FieldTable()))
            except AmqpError as exc:  # e.g. x-consistent-hash with a non-integer routing-key
                log.warning("sharding: cannot bind %r to %r: %s", qname, x.name, exc.reply_text)

    # -- hooks called by the vhost -------------------------------------------------------------------

    def exchange_declared(self, vhost: VHost, x: Exchange) -> None:
        self._apply_exchange(vhost, x, created=True)

    def exchange_deleted(self, vhost: VHost, x: Exchange) -> None:
        # Observed: deleting a sharded exchange drops its bindings, the shard queues stay.
        self.sharded.pop((vhost.name, x.name), None)

    def queue_added(self, vhost: VHost, q: Queue) -> None:
        self._place([q])
        if len(self.store.policies(vhost.name)):
            self._apply_queue(vhost, q)

    def _place(self, queues: Iterable[Queue]) -> None:
        """Membership of the replicated queues among `queues` that have none yet (declared now,
        or read back from a store that did not keep it), from how many replicas and leaders each
        node holds. A queue that has members keeps them: placement is decided once and kept in
        the queue's record (broker.runtime.durability), as RabbitMQ keeps the node list it stored."""
        todo = [q for q in queues if q.replicated and not q.members]
        if not todo:
            return
        replicas: dict[str, int] = {}
        leaders: dict[str, int] = {}

        def count(q: Queue) -> None:
            for node in q.members:
                replicas[node] = replicas.get(node, 0) + 1
            if q.leader is not None:
                leaders[q.leader] = leaders.get(q.leader, 0) + 1

        for vhost in self._vhosts():
            for other in vhost.queues.values():
                count(other)
        for q in todo:
            q.place(self.cluster.nodes, self.cluster.local, replicas, leaders)
            count(q)

    # -- cluster --------------------------------------------------------------------------------------

    def add_node(self, node: str) -> bool:
        """A node joins: every sharded exchange gets that node's shards (messages are not moved)."""
        if not self.cluster.add(node):
            return False
        for vhost in self._vhosts():
            for (vname, xname), config in list(self.sharded.items()):
                x = vhost.exchanges.get(xname)
                if vname == vhost.name and x is not None:
                    self._execute(vhost, x, sharding.node_added(xname, x.durable, config, node))
        return True

    def remove_node(self, node: str) -> None:
        """A node leaves: its shard queues stay (down, not deleted), as on RabbitMQ."""
        self.cluster.remove(node)

    def queue_node(self, queue_name: str) -> str:
        """The node a queue lives on: a shard's node from its name, else the local node."""
        parsed = sharding.parse_shard_queue_name(queue_name)
        return parsed[1] if parsed is not None else self.cluster.local

    # -- sharding interceptor --------------------------------------------------------------------------

    def rewrite_queue(self, vhost: VHost, method: str, name: str) -> str:
        """rabbit_sharding_interceptor: the real queue for `method` on `name` (541 if refused)."""
        config = self.sharded.get((vhost.name, name))
        if config is None:
            return name
        local = self.cluster.local
        counts = {
            q: len(vhost.queues[q].consumers)
            for q in sharding.shard_names(name, [local], config.shards_per_node)
            if q in vhost.queues
        }
        try:
            return sharding.rewrite_queue_method(method, name, config, local, counts)
        except sharding.ShardingError as exc:
            log.info("sharding interceptor refused %s on %r: %s", method, name, exc.detail)
            raise AmqpError(exc.reply_code, "", hard=True) from None

    def local_shards(self, vhost: VHost, name: str) -> builtins.list[Queue]:
        config = self.sharded.get((vhost.name, name))
        if config is None:
            return []
        names = sharding.shard_names(name, [self.cluster.local], config.shards_per_node)
        return [vhost.queues[q] for q in names if q in vhost.queues]

    # -- x-delayed-message -------------------------------------------------------------------------------

    def delayed_count(self, vhost: str = "/") -> int:
        """How many messages the vhost's delayed exchanges hold (the plugin's delay table)."""
        vh = self.broker.vhosts.get(vhost)
        return len(vh.delayed) if vh is not None else 0

    def close(self) -> None:
        """The broker stops: no delayed message is released any more (the kept ones stay kept)."""
        for vhost in self._vhosts():
            vhost.delayed.close()
