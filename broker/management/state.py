"""The management API's read side: the broker's state as views, never the entities themselves.

Everything the resources show comes from here as the read model of `broker.entities.info`: the
entities' views (`Queue.info()`; `ExchangeView` without the bindings and routing state, which are
read on their own), the session views of the AMQP connections and channels
(`broker.management.sessions`), users, permissions and policies as their records, and the rates.
Nothing here changes the broker: every change goes through `broker.management.writes`.

All methods must be called on the broker's event loop (the management server runs there), which is
what makes reading the broker's unlocked state safe.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection, Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from amqpwire.fields import FieldTable
from broker.entities import hash_watch
from broker.entities.info import BindingView, ExchangeView, QueueView
from broker.entities.message_stats import exchange_stats
from broker.management.rates import DEPTHS, TOTALS, RateSamples, SampleKey, exchange_key, vhost_key
from broker.management.sessions import Sessions, is_listed, unacked_bytes
from broker.management.stream_sessions import StreamConnectionView, stream_connection_views

if TYPE_CHECKING:
    from broker.entities.cluster import Cluster
    from broker.entities.exchange import Exchange
    from broker.entities.policy import Policy
    from broker.entities.queues.catalog import Queue
    from broker.entities.users import Permission, Registry, User
    from broker.entities.vhost import VHost
    from broker.management.ports import AlarmReads, ConnectionReads, ManagementBroker


T = TypeVar("T")


@dataclass(frozen=True)
class NodeInfo:
    """This process as /api/nodes shows it."""

    name: str
    os_pid: str
    uptime_ms: int
    processors: int
    amqp_host: str
    amqp_port: int
    exchange_types: list[str]
    mem_used: int


class _FromBroker(Generic[T]):
    """A read-only attribute of `BrokerState` that is the broker's own object of that name (or
    `attr`): one the broker already exposes through a read port, so no view is taken."""

    def __init__(self, attr: str = "") -> None:
        self.attr = attr

    def __set_name__(self, owner: type, name: str) -> None:
        self.attr = self.attr or name

    def __get__(self, state: BrokerState, owner: type | None = None) -> T:
        return cast(T, getattr(state._broker, self.attr))  # noqa: SLF001  (BrokerState's own part)


class BrokerState:
    """The read model of one running broker (the management port), plus the message rates."""

    def __init__(self, broker: ManagementBroker) -> None:
        self._broker = broker
        self.rates = RateSamples()
        self.started = time.monotonic()
        self.node_name = broker.cluster.local
        #: each open connection at the last sample: (the connection, its vhost, recv_oct, send_oct)
        self._octets_seen: dict[int, tuple[object, str, int, int]] = {}
        #: per vhost, the bytes of its connections closed since: what they had at their last sample
        self._octets_gone: dict[str, tuple[int, int]] = {}

    # -- identity & auth ------------------------------------------------------------------------

    @property
    def compat_version(self) -> str:
        return str(self._broker.settings.rabbitmq_compat_version)

    @property
    def amqp_host(self) -> str:
        return str(self._broker.host)

    @property
    def amqp_port(self) -> int:
        return int(self._broker.port)

    @property
    def amqp_listeners(self) -> list[tuple[str, int]]:
        """(protocol, port) of the AMQP listeners: "amqp", and "amqp/ssl" while TLS listens."""
        tls = self._broker.tls_port
        return [("amqp", self.amqp_port)] + ([("amqp/ssl", int(tls))] if tls is not None else [])

    @property
    def default_user(self) -> str:
        return self._broker.settings.default_user

    registry: _FromBroker[Registry] = _FromBroker("auth")
    """Users and permissions, for the authorisation decisions (broker.management.authz)."""

    def users(self) -> list[str]:
        return list(self._broker.auth.users)

    def user(self, name: str) -> User | None:
        return self._broker.auth.users.get(name)

    def user_tags(self, user: str) -> list[str]:
        u = self.user(user)
        return list(u.tags) if u is not None else []

    def permissions(
        self, vhost: str | None = None, user: str | None = None
    ) -> Iterator[tuple[str, str, Permission]]:
        """(vhost, user, permission) in the registry's order, optionally of one vhost or user."""
        for (v, u), p in self._broker.auth.permissions.items():
            if (vhost is None or v == vhost) and (user is None or u == user):
                yield v, u, p

    def check_credentials(self, user: str, password: str) -> bool:
        return bool(self._broker.check_credentials(user, password))

    def is_loopback_user(self, user: str) -> bool:
        return user in self._broker.settings.loopback_users

    # -- vhosts ---------------------------------------------------------------------------------

    def vhost_names(self) -> list[str]:
        return sorted(self._broker.vhosts)

    @property
    def vhost_keys(self) -> Collection[str]:
        """The vhost names, unordered (for membership tests)."""
        return self._broker.vhosts.keys()

    def has_vhost(self, name: str) -> bool:
        return name in self._broker.vhosts

    def vhost_metadata(self, vhost: str) -> tuple[str, tuple[str, ...]]:
        """The vhost's description and tags."""
        v = self._broker.vhosts[vhost]
        return v.description, v.tags

    def tracing(self, vhost: str) -> bool:
        """Whether the firehose tracer is on in `vhost`."""
        return self._broker.vhosts[vhost].tracing

    def vhost_stats(self, vhost: str) -> dict[str, int] | None:
        """The vhost's message_stats counters, None before any activity."""
        return _vhost_stats(self._broker.vhosts[vhost])

    def vhost_octets(self) -> dict[str, dict[str, int]]:
        """recv_oct and send_oct per vhost that has had a connection, summed over all it had, AMQP
        and stream, as RabbitMQ's per-vhost connection figures keep what its connections reported:
        a closed one counts with what it had when last seen (at a sample, or a read of this)."""
        self._note_octets()
        sums = {vhost: list(gone) for vhost, gone in self._octets_gone.items()}
        for _c, vhost, recv, send in self._octets_seen.values():
            acc = sums.setdefault(vhost, [0, 0])
            acc[0] += recv
            acc[1] += send
        return {vhost: {"recv_oct": recv, "send_oct": send} for vhost, (recv, send) in sums.items()}

    def _connection_octets(self) -> Iterator[tuple[object, str, int, int]]:
        """(connection, vhost, recv_oct, send_oct) of each open AMQP and stream connection."""
        for c in list(self._broker.connections):
            if is_listed(c):
                yield c, c.vhost_name, c.recv_oct, c.send_oct
        for s in list(self._broker.stream_connections):
            if s.is_open:
                yield s, s.vhost, s.recv_oct, s.send_oct

    def _note_octets(self) -> None:
        """Move the bytes of the connections closed since they were last seen to their vhost's total;
        a deleted vhost's total goes with it."""
        live = {id(c): (c, v, r, s) for c, v, r, s in self._connection_octets()}
        for key, (_c, vhost, recv, send) in self._octets_seen.items():
            if key not in live:
                r0, s0 = self._octets_gone.get(vhost, (0, 0))
                self._octets_gone[vhost] = (r0 + recv, s0 + send)
        self._octets_seen = live
        for vhost in [v for v in self._octets_gone if v not in self._broker.vhosts]:
            del self._octets_gone[vhost]

    # -- exchanges ------------------------------------------------------------------------------

    def exchanges(self, vhost: str | None = None) -> list[ExchangeView]:
        out = [_exchange_view(vname, x) for vname, vh in self._vhosts(vhost) for x in vh.exchanges.values()]
        out.sort(key=lambda e: (e.vhost, e.name))
        return out

    def exchange(self, vhost: str, name: str) -> ExchangeView | None:
        x = self._exchange(vhost, name)
        return _exchange_view(vhost, x) if x is not None else None

    def _exchange(self, vhost: str, name: str) -> Exchange | None:
        vh = self._broker.vhosts.get(vhost)
        return vh.exchanges.get(name) if vh is not None else None

    # -- queues ---------------------------------------------------------------------------------

    def queues(self, vhost: str | None = None) -> list[QueueView]:
        held = unacked_bytes(self._broker.connections)
        out = [_queue_view(q, held) for _vname, vh in self._vhosts(vhost) for q in vh.queues.values()]
        out.sort(key=lambda q: (q.vhost, q.name))
        return out

    def queue(self, vhost: str, name: str) -> QueueView | None:
        vh = self._broker.vhosts.get(vhost)
        q = vh.queues.get(name) if vh is not None else None
        return _queue_view(q, unacked_bytes(self._broker.connections)) if q is not None else None

    def policy_definition(self, vhost: str, policy: str | None) -> dict[str, Any]:
        """The definition of a view's effective policy (`QueueView.policy`), {} for none."""
        found = self._broker.policies.get(vhost, policy) if policy is not None else None
        return dict(found.definition) if found is not None else {}

    def queue_node(self, name: str) -> str:
        """A queue's node: a shard queue's node from its name, else this node."""
        return self._broker.policies.queue_node(name)

    def online(self, nodes: Iterable[str]) -> list[str]:
        """The nodes among `nodes` that run in the emulated cluster: a replicated queue's members
        on a node that is not running (a stored placement after a restart with other `--nodes`,
        or `ctl remove_node`) are not online."""
        cluster = self._broker.cluster
        return [n for n in nodes if n in cluster]

    # -- bindings -------------------------------------------------------------------------------

    def bindings(self, vhost: str | None = None) -> list[BindingView]:
        """Explicit bindings plus the implicit default-exchange binding of every queue."""
        out: list[BindingView] = []
        for vname, vh in self._vhosts(vhost):
            out.extend(BindingView(vname, "", q, "queue", q, _NO_ARGUMENTS) for q in vh.queues)
            for x in vh.exchanges.values():
                out.extend(BindingView.of(vname, x.name, b) for b in x.bindings_in_order())
        out.sort(key=lambda b: (b.vhost, b.source, b.destination_type, b.destination, b.routing_key))
        return out

    def bindings_in_order(self, vhost: str | None = None) -> list[BindingView]:
        """Explicit bindings only, grouped by source (sorted by name), each group in binding order.

        The order in which bindings were made is routing state for x-consistent-hash (it decides
        which buckets each destination gets), so a definitions export must keep it: replaying the
        file then rebuilds the same ring. `Exchange.bindings_in_order` keeps that order.
        """
        out: list[BindingView] = []
        for vname, vh in self._vhosts(vhost):
            for x in sorted(vh.exchanges.values(), key=lambda e: e.name):
                if x.name:
                    out.extend(BindingView.of(vname, x.name, b) for b in x.bindings_in_order())
        return out

    # -- hash exchanges -------------------------------------------------------------------------

    def routing_state(self, vhost: str, name: str) -> dict[str, object] | None:
        """The exchange type's `state_summary` (e.g. the consistent-hash bucket ring), None when the
        exchange does not exist, {} for types with no state to show."""
        x = self._exchange(vhost, name)
        return x.routing_state if x is not None else None

    def hash_on(self, vhost: str, name: str) -> str:
        """What a hash exchange hashes ("routing_key", "header:h", "property:p"); the routing
        keys for a type that does not say."""
        x = self._exchange(vhost, name)
        return str(getattr(x.impl, "hash_on", "routing_keys")) if x is not None else "routing_keys"

    def hash_trace(self, vhost: str, name: str, since: int) -> list[dict[str, Any]]:
        """The hash watch's entries of exchange `name` newer than `since` (broker.entities.hash_watch)."""
        return hash_watch.entries(self._broker.vhosts[vhost], name, since)

    # -- policies -------------------------------------------------------------------------------

    def policies(self, vhost: str | None = None) -> list[Policy]:
        return self._broker.policies.list(vhost)

    def policy(self, vhost: str, name: str) -> Policy | None:
        return self._broker.policies.get(vhost, name)

    # -- connections ----------------------------------------------------------------------------

    def sessions(self) -> Sessions:
        """The session views of every connection now (and the way from a view's session reference
        to its view)."""
        return Sessions(self._broker.connections, self.amqp_host, self.amqp_port)

    def stream_connections(self) -> list[StreamConnectionView]:
        """The stream-protocol connections now, by name (rabbitmq_stream_management's)."""
        return stream_connection_views(self._broker.stream_connections)

    def connection(self, name: str) -> ConnectionReads | None:
        """The listed connection called `name` (as /api/connections names it), or None."""
        for conn in list(self._broker.connections):
            if conn.name == name and is_listed(conn):
                return conn
        return None

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

    alarms: _FromBroker[AlarmReads] = _FromBroker()
    cluster: _FromBroker[Cluster] = _FromBroker()

    def store_fault(self) -> str | None:
        """Why the store is not confirming writes (files deleted or replaced under the broker, a
        failed commit), or None."""
        from broker.store import health

        store = self._broker.store
        return health.fault_of(store) if store is not None else None

    def count_login(self, succeeded: bool) -> None:
        """One HTTP login attempt, as rabbit_mgmt_util's is_authorized counts it (protocol http)."""
        from broker.entities.events import count_auth_attempt

        count_auth_attempt(self._broker.events, "http", succeeded)

    def enabled_plugins(self) -> Container[str] | None:
        """The plugins on, with those they need (None: a broker that switches none, all on)."""
        plugins: Container[str] | None = getattr(self._broker, "plugins", None)
        return plugins

    def explicit_plugins(self) -> list[str]:
        """The explicitly enabled plugins, read again as RabbitMQ reads its enabled_plugins file
        for each report (an edit shows before the restart that applies it)."""
        from broker.runtime.settings import Settings, SettingsError, explicit_plugins

        settings = self._broker.settings
        if not isinstance(settings, Settings):
            return []
        try:
            return explicit_plugins(settings)
        except SettingsError:
            return []

    def exchange_types(self) -> list[str]:
        """The types the node knows: a disabled plugin's are left out, as RabbitMQ lists them."""
        from broker.entities.exchange_types import type_names

        return sorted(type_names(getattr(self._broker, "plugins", None)))

    # -- rates ----------------------------------------------------------------------------------

    def sample(self, now: float | None = None) -> None:
        """Record every queue's counters and depths; rates are the change between two samples.

        This runs every SAMPLE_INTERVAL whether or not anyone reads the API, so it reads the
        counters the entities keep as messages move instead of building a view of each queue and
        exchange (a tenth of the cost).
        """
        octets = self.vhost_octets()
        values: dict[SampleKey, dict[str, int]] = {}
        totals = dict.fromkeys(DEPTHS, 0)
        for vname, vh in self._broker.vhosts.items():
            for q in vh.queues.values():
                depth = {
                    "messages": q.count + q.unacked,
                    "messages_ready": q.count,
                    "messages_unacknowledged": q.unacked,
                }
                values[(vname, q.name)] = {**q.stats, **depth}
                for k, v in depth.items():
                    totals[k] += v
            values[vhost_key(vname)] = {**(_vhost_stats(vh) or {}), **octets.get(vname, {})}
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

    def _vhosts(self, vhost: str | None) -> list[tuple[str, VHost]]:
        vhosts: Mapping[str, VHost] = self._broker.vhosts
        if vhost is None:
            return [(name, vhosts[name]) for name in self.vhost_names()]
        found = vhosts.get(vhost)
        return [(vhost, found)] if found is not None else []


_NO_ARGUMENTS = FieldTable()


def _queue_view(q: Queue, held: dict[int, int]) -> QueueView:
    """`Queue.info()` with the unacked bytes the channels hold for it (`held`, by queue identity)."""
    return replace(q.info(), message_bytes_unacknowledged=held.get(id(q), 0))


def _exchange_view(vhost: str, x: Exchange) -> ExchangeView:
    """The exchange's view with its message_stats counters, without the bindings and routing state
    (O(bindings + ring size) per exchange)."""
    return x.info(vhost, detail=False)


def _vhost_stats(vh: VHost) -> dict[str, int] | None:
    publishes = sum(x.publish_in for x in vh.exchanges.values())
    return vh.stats.totals((q.stats for q in vh.queues.values()), publishes)


def _rss_bytes() -> int:
    """Resident memory of this process (Linux /proc; 0 where unavailable)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0
