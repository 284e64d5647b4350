"""Read-only adapter between the management API and the broker's internals.

Everything the HTTP layer knows about the broker goes through this module, as plain snapshot
dataclasses built from the entities' read model (`broker.entities.info`). Nothing here mutates
broker state: mutations go through `broker.management.writes`, so they get exactly the checks and
error texts of the AMQP code path.

All functions must be called on the broker's event loop thread (the management server runs
there), which is what makes reading the broker's unlocked dicts safe.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from broker.entities.message_stats import exchange_stats
from broker.management import sessions
from broker.management.rates import DEPTHS, TOTALS, RateSamples, SampleKey, exchange_key, vhost_key
from broker.management.sessions import ChannelInfo, ConnectionInfo
from broker.management.values import json_value, properties_key, table_to_json

if TYPE_CHECKING:
    from broker.channel import Channel
    from broker.connection import Connection
    from broker.entities.exchange import Exchange
    from broker.entities.queues.catalog import Consumer, Queue
    from broker.server import Broker
    from exchanges.base import Binding


# Exchanges every vhost has from birth; RabbitMQ reports them as declared by "rmq-internal".
_PREDECLARED_PREFIX = "amq."


@dataclass(frozen=True)
class ExchangeInfo:
    vhost: str
    name: str
    type: str
    durable: bool
    auto_delete: bool
    internal: bool
    arguments: dict[str, Any]
    declared_by: str
    policy: str | None  # the effective policy's name
    stats: dict[str, int]  # message_stats counters (broker.entities.message_stats.exchange_stats)


@dataclass(frozen=True)
class ConsumerInfo:
    tag: str
    queue: str
    vhost: str
    ack_required: bool
    exclusive: bool
    prefetch_count: int
    arguments: dict[str, Any]
    channel_number: int
    connection_name: str
    peer_host: str
    peer_port: int
    user: str
    active: bool
    activity_status: str  # up (any consumer), single_active or waiting (single active consumer)


@dataclass(frozen=True)
class QueueInfo:
    vhost: str
    name: str
    durable: bool
    auto_delete: bool
    exclusive: bool
    arguments: dict[str, Any]
    messages_ready: int
    messages_unacknowledged: int
    message_bytes_ready: int
    message_bytes_unacknowledged: int
    consumers: list[ConsumerInfo]
    single_active_consumer_tag: str | None
    policy: str | None  # the effective policy's name
    exclusive_consumer_tag: str | None
    owner: ConnectionInfo | None
    # message_stats counters that are known exactly; absent keys are not reported at all.
    stats: dict[str, int] = field(default_factory=dict)
    # change per second over the latest sampling interval, per stats key and depth; absent = 0.0
    rates: dict[str, float] = field(default_factory=dict)
    type: str = "classic"  # the queue type's name (QueueView.type)
    # the queue type's own read-model fields (QueueView.details: leader, members, messages_dlx, ...)
    details: dict[str, Any] = field(default_factory=dict)
    policy_definition: dict[str, Any] = field(default_factory=dict)  # the effective policy's


@dataclass(frozen=True)
class BindingInfo:
    vhost: str
    source: str
    destination: str
    destination_type: str
    routing_key: str
    arguments: dict[str, Any]
    properties_key: str


@dataclass(frozen=True)
class NodeInfo:
    name: str
    os_pid: str
    uptime_ms: int
    processors: int
    amqp_host: str
    amqp_port: int
    exchange_types: list[str]
    mem_used: int


class BrokerState:
    """A read-only view over one running `broker.server.Broker`."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.rates = RateSamples()
        self.started = time.monotonic()
        self.node_name = broker.cluster.local

    def queue_node(self, name: str) -> str:
        """A queue's node: a shard queue's node from its name, else this node."""
        return self.broker.policies.queue_node(name)

    def online(self, nodes: Iterable[str]) -> list[str]:
        """The nodes among `nodes` that run in the emulated cluster: a replicated queue's members
        on a node that is not running (a stored placement after a restart with other `--nodes`,
        or `ctl remove_node`) are not online."""
        cluster = self.broker.cluster
        return [n for n in nodes if n in cluster]

    # -- identity & auth ------------------------------------------------------------------------

    @property
    def compat_version(self) -> str:
        return str(self.broker.settings.rabbitmq_compat_version)

    @property
    def amqp_host(self) -> str:
        return str(self.broker.host)

    @property
    def amqp_port(self) -> int:
        return int(self.broker.port)

    def users(self) -> list[str]:
        return list(self.broker.auth.users)

    def user_tags(self, user: str) -> list[str]:
        u = self.broker.auth.users.get(user)
        return list(u.tags) if u is not None else []

    def check_credentials(self, user: str, password: str) -> bool:
        return bool(self.broker.check_credentials(user, password))

    def is_loopback_user(self, user: str) -> bool:
        return user in self.broker.settings.loopback_users

    # -- vhosts ---------------------------------------------------------------------------------

    def vhost_names(self) -> list[str]:
        return sorted(self.broker.vhosts)

    def has_vhost(self, name: str) -> bool:
        return name in self.broker.vhosts

    # -- exchanges ------------------------------------------------------------------------------

    def exchanges(self, vhost: str | None = None) -> list[ExchangeInfo]:
        out = []
        for vname in self._vhosts(vhost):
            vh = self.broker.vhosts[vname]
            for x in vh.exchanges.values():
                out.append(self._exchange_info(vname, x))
        out.sort(key=lambda e: (e.vhost, e.name))
        return out

    def exchange(self, vhost: str, name: str) -> ExchangeInfo | None:
        vh = self.broker.vhosts.get(vhost)
        x = vh.exchanges.get(name) if vh is not None else None
        return self._exchange_info(vhost, x) if x is not None else None

    def _exchange_info(self, vhost: str, x: Exchange) -> ExchangeInfo:
        internal_origin = x.name == "" or x.name.startswith(_PREDECLARED_PREFIX)
        return ExchangeInfo(
            vhost=vhost,
            name=x.name,
            type=x.type_name,
            durable=bool(x.durable),
            auto_delete=bool(x.auto_delete),
            internal=bool(x.internal),
            arguments=table_to_json(x.arguments),
            # single-user broker: anything not predeclared was declared by that user
            declared_by="rmq-internal" if internal_origin else self.broker.settings.default_user,
            policy=x.policy.name if x.policy is not None else None,
            stats=exchange_stats(x.publish_in, x.publish_out),
        )

    def vhost_stats(self, vhost: str) -> dict[str, int] | None:
        """The vhost's message_stats counters, None before any activity."""
        vh = self.broker.vhosts[vhost]
        publishes = sum(x.publish_in for x in vh.exchanges.values())
        return vh.stats.totals((q.stats for q in vh.queues.values()), publishes)

    # -- queues ---------------------------------------------------------------------------------

    def queues(self, vhost: str | None = None) -> list[QueueInfo]:
        unacked_bytes = self._unacked_bytes()
        out = []
        for vname in self._vhosts(vhost):
            for q in self.broker.vhosts[vname].queues.values():
                out.append(self._queue_info(vname, q, unacked_bytes))
        out.sort(key=lambda q: (q.vhost, q.name))
        return out

    def queue(self, vhost: str, name: str) -> QueueInfo | None:
        vh = self.broker.vhosts.get(vhost)
        q = vh.queues.get(name) if vh is not None else None
        return self._queue_info(vhost, q, self._unacked_bytes()) if q is not None else None

    def _unacked_bytes(self) -> dict[int, int]:
        """Bytes of delivered-but-unacked messages per queue (by id), read from the channels."""
        out: dict[int, int] = {}
        for conn in list(self.broker.connections):
            for ch in list(conn.channels.values()):
                for u in list(ch.unacked.values()):
                    out[id(u.queue)] = out.get(id(u.queue), 0) + len(u.entry.msg.body)
        return out

    def _queue_info(self, vhost: str, q: Queue, unacked_bytes: dict[int, int]) -> QueueInfo:
        active = active_consumer(q)
        consumers = [self._consumer_info(vhost, q, c, active) for c in q.consumers]
        sac = active.tag if active is not None else None
        excl = next((c.tag for c in consumers if c.exclusive), None)
        owner = q.exclusive_owner
        view = q.info()
        return QueueInfo(
            vhost=vhost,
            name=q.name,
            durable=bool(q.durable),
            auto_delete=bool(q.auto_delete),
            exclusive=owner is not None,
            arguments=table_to_json(q.arguments),
            # raw counters, not `message_count`: that property expires messages (a mutation)
            messages_ready=int(q.count),
            messages_unacknowledged=int(q.unacked),
            message_bytes_ready=int(q.bytes),
            message_bytes_unacknowledged=unacked_bytes.get(id(q), 0),
            consumers=consumers,
            single_active_consumer_tag=sac,
            policy=q.policy.name if q.policy is not None else None,
            exclusive_consumer_tag=excl,
            # the owner of an exclusive queue is always an AMQP connection
            owner=self._connection_info(cast("Connection", owner)) if owner is not None else None,
            stats=q.stats,  # RabbitMQ's per-queue message_stats counters (a fresh dict)
            rates=self.queue_rates(vhost, q.name),
            type=view.type,
            details=dict(view.details),
            policy_definition=dict(q.policy.definition) if q.policy is not None else {},
        )

    # -- rates ----------------------------------------------------------------------------------

    def sample(self, now: float | None = None) -> None:
        """Record every queue's counters and depths; rates are the change between two samples."""
        values: dict[SampleKey, dict[str, int]] = {}
        totals = dict.fromkeys(DEPTHS, 0)
        for vname, vh in self.broker.vhosts.items():
            for q in vh.queues.values():
                depth = {
                    "messages": q.count + q.unacked,
                    "messages_ready": q.count,
                    "messages_unacknowledged": q.unacked,
                }
                values[(vname, q.name)] = {**q.stats, **depth}
                for k, v in depth.items():
                    totals[k] += v
            values[vhost_key(vname)] = self.vhost_stats(vname) or {}
            for x in vh.exchanges.values():
                values[exchange_key(vname, x.name)] = exchange_stats(x.publish_in, x.publish_out)
        values[TOTALS] = totals
        self.rates.take(time.monotonic() if now is None else now, values)

    def queue_rates(self, vhost: str, name: str) -> dict[str, float]:
        return self.rates.of((vhost, name))

    def totals_rates(self) -> dict[str, float]:
        return self.rates.of(TOTALS)

    def vhost_rates(self, vhost: str) -> dict[str, float]:
        return self.rates.of(vhost_key(vhost))

    def exchange_rates(self, vhost: str, name: str) -> dict[str, float]:
        return self.rates.of(exchange_key(vhost, name))

    def _consumer_info(self, vhost: str, q: Queue, c: Consumer, active: Consumer | None) -> ConsumerInfo:
        ch = cast("Channel", c.channel)  # every consumer's channel is an AMQP channel
        cinfo = self._connection_info(ch.conn)
        return ConsumerInfo(
            tag=c.tag,
            queue=q.name,
            vhost=vhost,
            ack_required=not c.no_ack,
            exclusive=bool(c.exclusive),
            prefetch_count=int(c.prefetch),
            arguments=table_to_json(c.args),
            channel_number=ch.number,
            connection_name=cinfo.name,
            peer_host=cinfo.peer_host,
            peer_port=cinfo.peer_port,
            user=cinfo.user,
            active=active is None or c is active,
            activity_status="up" if active is None else "single_active" if c is active else "waiting",
        )

    # -- bindings -------------------------------------------------------------------------------

    def bindings(self, vhost: str | None = None) -> list[BindingInfo]:
        """Explicit bindings plus the implicit default-exchange binding of every queue."""
        out = []
        for vname in self._vhosts(vhost):
            vh = self.broker.vhosts[vname]
            for qname in vh.queues:
                out.append(BindingInfo(vname, "", qname, "queue", qname, {}, properties_key(qname, None)))
            for x in vh.exchanges.values():
                out.extend(_binding_info(vname, x.name, b) for b in x.binding_set)
        out.sort(key=lambda b: (b.vhost, b.source, b.destination_type, b.destination, b.routing_key))
        return out

    def bindings_in_order(self, vhost: str | None = None) -> list[BindingInfo]:
        """Explicit bindings only, grouped by source (sorted by name), each group in binding order.

        The order in which bindings were made is routing state for x-consistent-hash (it decides
        which buckets each destination gets), so a definitions export must keep it: replaying the
        file then rebuilds the same ring. The exchange type keeps its bindings as an ordered list;
        `binding_set` (unordered) is only a fallback for an exchange without one.
        """
        out: list[BindingInfo] = []
        for vname in self._vhosts(vhost):
            vh = self.broker.vhosts[vname]
            for x in sorted(vh.exchanges.values(), key=lambda e: e.name):
                if x.name == "":
                    continue
                ordered = x.impl.bindings if x.impl is not None else []
                live = set(x.binding_set)
                seq = [b for b in ordered if b in live]
                seq += sorted(live - set(seq), key=lambda b: (b.destination, b.key))
                out.extend(_binding_info(vname, x.name, b) for b in seq)
        return out

    # -- hash exchanges -----------------------------------------------------------------------------

    def routing_state(self, vhost: str, name: str) -> dict[str, Any] | None:
        """The exchange type's `state_summary` (e.g. the consistent-hash bucket ring), as JSON data.

        None when the exchange does not exist; `{}` for types with no state to show.
        """
        vh = self.broker.vhosts.get(vhost)
        x = vh.exchanges.get(name) if vh is not None else None
        if x is None:
            return None
        summary = x.impl.state_summary if x.impl is not None else {}
        return {str(k): json_value(v) for k, v in dict(summary).items()}

    # -- connections ----------------------------------------------------------------------------

    def connections(self) -> list[ConnectionInfo]:
        return sessions.connections(self.broker)

    def channels(self) -> list[ChannelInfo]:
        return sessions.channels(self.broker)

    def channel_count(self) -> int:
        return sum(c.channels for c in self.connections())

    def _connection_info(self, conn: Connection) -> ConnectionInfo:
        return sessions.connection_info(conn, self.amqp_host, self.amqp_port)

    # -- node -----------------------------------------------------------------------------------

    def node(self) -> NodeInfo:
        return NodeInfo(
            name=self.node_name,
            os_pid=str(os.getpid()),
            uptime_ms=int((time.monotonic() - self.started) * 1000),
            processors=os.cpu_count() or 1,
            amqp_host=self.amqp_host,
            amqp_port=self.amqp_port,
            exchange_types=self.exchange_types(),
            mem_used=_rss_bytes(),
        )

    @staticmethod
    def exchange_types() -> list[str]:
        from broker.entities.exchange_types import type_names

        return sorted(type_names())

    def _vhosts(self, vhost: str | None) -> list[str]:
        if vhost is None:
            return self.vhost_names()
        return [vhost] if vhost in self.broker.vhosts else []


def active_consumer(q: Queue) -> Consumer | None:
    """The queue's single active consumer as the queue chose it (None: every consumer is active).

    The queue's own choice, never re-derived here: under "consistent-hash" selection it is the
    ring's owner, not the first consumer.
    """
    return q.active_consumer


def _binding_info(vhost: str, source: str, b: Binding) -> BindingInfo:
    return BindingInfo(
        vhost,
        source,
        b.destination.name,
        b.destination.kind,
        b.key,
        table_to_json(b.arguments),
        properties_key(b.key, b.arguments),
    )


def _rss_bytes() -> int:
    """Resident memory of this process (Linux /proc; 0 where unavailable)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0
