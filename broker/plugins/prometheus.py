"""rabbitmq_prometheus: the broker's metrics in Prometheus' text format on their own port.

The three endpoints of RabbitMQ 3.10.8's plugin: `/metrics` (every object's values summed into
one series per family), `/metrics/per-object` (one series per queue, channel and connection) and
`/metrics/detailed?family=...&vhost=...` (the chosen families, with the `rabbitmq_detailed_`
prefix, restricted to the chosen vhosts). Family names, types and HELP lines are the plugin's
(`broker.plugins.prometheus_families`); every other path is 404.

The values come from the management read model (`broker.management.state.BrokerState`: the
queue, exchange and session views) and, for what RabbitMQ reads from the Erlang VM, from the
process's own equivalent (resident memory, open descriptors and their limit, context switches,
uptime). A family with no honest value in hashbroker is left out, with the reason, in `OMITTED`:
a dashboard then shows "no data" rather than a made-up zero.

The exposition is written here rather than by prometheus-client: its writer appends `_total` to
every counter's name, and 3.10.8 has counters without it (the families are kept by name). Nothing
of this module is imported unless the plugin is enabled.
"""

from __future__ import annotations

import asyncio
import os
import resource
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from broker.entities.events import auth_attempt_kind
from broker.management.http import HttpServer, Request, Response
from broker.management.state import BrokerState
from broker.plugins.prometheus_families import AGGREGATED, AGGREGATED_ONLY, DETAILED, PER_OBJECT_ONLY

if TYPE_CHECKING:
    from broker.entities.info import QueueView
    from broker.management.ports import ManagementBroker

DEFAULT_PORT = 15692
CONTENT_TYPE = "text/plain; version=0.0.4"
PLUGIN_VERSION = "3.10.8"
PROTOCOL = "amqp091"
QUEUE_TYPES = {
    "classic": "rabbit_classic_queue",
    "quorum": "rabbit_quorum_queue",
    "stream": "rabbit_stream_queue",
}

CHURN: dict[str, str] = {
    "rabbitmq_connections_opened_total": "connection.created",
    "rabbitmq_connections_closed_total": "connection.closed",
    "rabbitmq_channels_opened_total": "channel.created",
    "rabbitmq_channels_closed_total": "channel.closed",
    "rabbitmq_queues_declared_total": "queue.declared",
    "rabbitmq_queues_created_total": "queue.created",
    "rabbitmq_queues_deleted_total": "queue.deleted",
}
"""The churn families and the event kind each counts (rabbit_core_metrics counts at the points
RabbitMQ notifies those events; queue.declared is counted with no event)."""

Labels = tuple[tuple[str, str], ...]
Samples = list[tuple[Labels, float]]


def _prefixed(prefix: str, reason: str) -> dict[str, str]:
    """Every recorded family whose name starts with `prefix`, left out for `reason`."""
    return {name: reason for name, _t, _h in AGGREGATED if name.startswith(prefix)}


OMITTED: dict[str, str] = {
    **dict.fromkeys(
        (
            "erlang_mnesia_held_locks",
            "erlang_mnesia_lock_queue",
            "erlang_mnesia_transaction_participants",
            "erlang_mnesia_transaction_coordinators",
            "erlang_mnesia_failed_transactions",
            "erlang_mnesia_committed_transactions",
            "erlang_mnesia_logged_transactions",
            "erlang_mnesia_restarted_transactions",
            "erlang_mnesia_memory_usage_bytes",
            "erlang_mnesia_tablewise_memory_usage_bytes",
            "erlang_mnesia_tablewise_size",
            "rabbitmq_schema_db_ram_tx_total",
            "rabbitmq_schema_db_disk_tx_total",
        ),
        "Mnesia: hashbroker keeps its schema in SQLite, there is no Mnesia",
    ),
    **_prefixed(
        "erlang_vm_",
        "Erlang VM internals (allocators, schedulers, distribution, atoms, ports): no Python equivalent",
    ),
    "rabbitmq_erlang_processes_limit": "the BEAM process table limit: Python has none",
    "rabbitmq_erlang_scheduler_run_queue": "BEAM scheduler run queue: no equivalent on one asyncio loop",
    "rabbitmq_erlang_net_ticktime_seconds": "Erlang distribution tick: no distribution",
    "rabbitmq_erlang_gc_reclaimed_bytes_total": "Python's collector counts objects, not bytes",
    **dict.fromkeys(
        (
            "rabbitmq_raft_term_total",
            "rabbitmq_raft_log_snapshot_index",
            "rabbitmq_raft_log_last_applied_index",
            "rabbitmq_raft_log_commit_index",
            "rabbitmq_raft_log_last_written_index",
            "rabbitmq_raft_entry_commit_latency_seconds",
        ),
        "Ra (Raft): hashbroker's quorum queues are emulated on one node, with no Raft log",
    ),
    **dict.fromkeys(
        (
            "rabbitmq_io_read_ops_total",
            "rabbitmq_io_read_bytes_total",
            "rabbitmq_io_write_ops_total",
            "rabbitmq_io_write_bytes_total",
            "rabbitmq_io_sync_ops_total",
            "rabbitmq_io_seek_ops_total",
            "rabbitmq_io_reopen_ops_total",
            "rabbitmq_io_read_time_seconds_total",
            "rabbitmq_io_write_time_seconds_total",
            "rabbitmq_io_sync_time_seconds_total",
            "rabbitmq_io_seek_time_seconds_total",
            "rabbitmq_msg_store_read_total",
            "rabbitmq_msg_store_write_total",
            "rabbitmq_queue_index_read_ops_total",
            "rabbitmq_queue_index_write_ops_total",
            "rabbitmq_queue_disk_reads_total",
            "rabbitmq_queue_disk_writes_total",
        ),
        "file I/O counters: the store keeps no read/write counters (a view is missing)",
    ),
    **dict.fromkeys(
        (
            "rabbitmq_queue_process_reductions_total",
            "rabbitmq_channel_process_reductions_total",
            "rabbitmq_connection_process_reductions_total",
            "rabbitmq_queue_process_memory_bytes",
        ),
        "per-process Erlang reductions and heap: queues, channels and connections are not processes here",
    ),
    **dict.fromkeys(
        (
            "rabbitmq_channel_messages_published_total",
            "rabbitmq_channel_messages_confirmed_total",
            "rabbitmq_channel_messages_unroutable_returned_total",
            "rabbitmq_channel_messages_unroutable_dropped_total",
            "rabbitmq_channel_get_ack_total",
            "rabbitmq_channel_get_total",
            "rabbitmq_channel_messages_delivered_ack_total",
            "rabbitmq_channel_messages_delivered_total",
            "rabbitmq_channel_messages_redelivered_total",
            "rabbitmq_channel_messages_acked_total",
            "rabbitmq_channel_get_empty_total",
            "rabbitmq_queue_messages_published_total",
            "rabbitmq_channel_messages_unconfirmed",
            "rabbitmq_channel_messages_uncommitted",
            "rabbitmq_channel_acks_uncommitted",
            "rabbitmq_connection_pending_packets",
        ),
        "per-channel counters by exchange and queue: the channel view has none (a view is missing)",
    ),
    **dict.fromkeys(
        (
            "rabbitmq_queue_messages_persistent",
            "rabbitmq_queue_messages_persistent_bytes",
            "rabbitmq_queue_head_message_timestamp",
        ),
        "the queue view does not count persistent messages or show the head's timestamp (a view is missing)",
    ),
    **dict.fromkeys(
        (
            "rabbitmq_global_publishers",
            "rabbitmq_global_messages_dead_lettered_maxlen_total",
            "rabbitmq_global_messages_dead_lettered_rejected_total",
            "rabbitmq_global_messages_dead_lettered_confirmed_total",
            "rabbitmq_global_messages_dead_lettered_delivery_limit_total",
            "rabbitmq_global_messages_dead_lettered_expired_total",
        ),
        "global counters the broker does not keep (publishers, dead letters)",
    ),
    **_prefixed(
        "rabbitmq_global_stream_error_",
        "stream protocol error counters: the stream listener counts no errors (a view is missing)",
    ),
}
"""Families of 3.10.8 this endpoint leaves out, with the reason (the recorded set minus these is
what is served)."""


AUTH_PROTOCOLS = ("stream", "http", "amqp091")
"""The protocols whose logins are counted, in the order 3.10.8 listed them (its table's order)."""
UNLABELLED_PROTOCOLS = frozenset({"stream"})
"""Protocols the 3.10.8 collector does not know as such (its is_protocol/1 lists amqp091, amqp10,
mqtt and http): their series has no protocol label."""
SPARSE: frozenset[str] = frozenset(
    {
        "rabbitmq_auth_attempts_total",
        "rabbitmq_auth_attempts_succeeded_total",
        "rabbitmq_auth_attempts_failed_total",
    }
)
"""Families /metrics lists row by row, as the per-object ones (no sum, no zero when empty)."""


def _samples(values: Iterable[tuple[Mapping[str, str], float]]) -> Samples:
    return [(tuple(labels.items()), value) for labels, value in values]


class Scrape:
    """One reading of the broker: per-object samples of every served family, keyed by the family's
    name on /metrics (without the `rabbitmq_detailed_` prefix)."""

    def __init__(self, state: BrokerState, broker: ManagementBroker, started_wall: float) -> None:
        self.state = state
        self.broker = broker
        self.started_wall = started_wall

    def read(self, vhosts: Iterable[str] | None = None) -> dict[str, Samples]:
        """Every served family's per-object samples, of `vhosts` only when given (None = all)."""
        only = None if vhosts is None else set(vhosts)
        s = self.state
        queues = [q for q in s.queues() if only is None or q.vhost in only]
        sessions = s.sessions()
        connections = [c for c in sessions.connections() if only is None or c.vhost in only]
        channels = [ch for ch in sessions.channels() if only is None or ch.connection.vhost in only]
        out: dict[str, Samples] = {}

        def per_queue(name: str, value: Callable[..., float]) -> None:
            out[name] = [((("vhost", q.vhost), ("queue", q.name)), float(value(q))) for q in queues]

        per_queue("rabbitmq_queue_messages_ready", lambda q: q.messages_ready)
        per_queue("rabbitmq_queue_messages_unacked", lambda q: q.messages_unacknowledged)
        per_queue("rabbitmq_queue_messages", lambda q: q.messages_ready + q.messages_unacknowledged)
        per_queue("rabbitmq_queue_consumers", lambda q: len(q.consumers))
        per_queue("rabbitmq_queue_consumer_capacity", lambda q: 1.0 if q.consumers else 0.0)
        per_queue("rabbitmq_queue_consumer_utilisation", lambda q: 1.0 if q.consumers else 0.0)
        # every message is held in memory: the RAM figures are the totals, nothing is paged out
        per_queue("rabbitmq_queue_messages_ram", lambda q: q.messages_ready + q.messages_unacknowledged)
        per_queue("rabbitmq_queue_messages_ready_ram", lambda q: q.messages_ready)
        per_queue("rabbitmq_queue_messages_unacked_ram", lambda q: q.messages_unacknowledged)
        per_queue(
            "rabbitmq_queue_messages_ram_bytes",
            lambda q: q.message_bytes_ready + q.message_bytes_unacknowledged,
        )
        per_queue(
            "rabbitmq_queue_messages_bytes", lambda q: q.message_bytes_ready + q.message_bytes_unacknowledged
        )
        per_queue("rabbitmq_queue_messages_ready_bytes", lambda q: q.message_bytes_ready)
        per_queue("rabbitmq_queue_messages_unacked_bytes", lambda q: q.message_bytes_unacknowledged)
        per_queue("rabbitmq_queue_messages_paged_out", lambda q: 0)
        per_queue("rabbitmq_queue_messages_paged_out_bytes", lambda q: 0)

        # 3.10.8 labels the connection series "channel" too (the connection's process id)
        def per_connection(name: str, value: Callable[..., float]) -> None:
            out[name] = [((("channel", c.name),), float(value(c))) for c in connections]

        per_connection("rabbitmq_connection_incoming_bytes_total", lambda c: c.recv_oct)
        per_connection("rabbitmq_connection_outgoing_bytes_total", lambda c: c.send_oct)
        per_connection("rabbitmq_connection_incoming_packets_total", lambda c: c.recv_cnt)
        per_connection("rabbitmq_connection_outgoing_packets_total", lambda c: c.send_cnt)
        per_connection("rabbitmq_connection_channels", lambda c: c.channels)

        def per_channel(name: str, value: Callable[..., float]) -> None:
            out[name] = [
                ((("channel", f"{ch.connection.name} ({ch.number})"),), float(value(ch))) for ch in channels
            ]

        per_channel("rabbitmq_channel_consumers", lambda ch: ch.consumer_count)
        per_channel("rabbitmq_channel_messages_unacked", lambda ch: ch.messages_unacknowledged)
        per_channel("rabbitmq_consumer_prefetch", lambda ch: ch.prefetch_count)
        per_channel("rabbitmq_channel_prefetch", lambda ch: ch.global_prefetch_count)

        consumers = sum(len(q.consumers) for q in queues)
        out["rabbitmq_connections"] = [((), float(len(connections)))]
        out["rabbitmq_channels"] = [((), float(len(channels)))]
        out["rabbitmq_consumers"] = [((), float(consumers))]
        out["rabbitmq_queues"] = [((), float(len(queues)))]
        out.update(self._global(queues, consumers, only))
        out.update(self._churn(only))
        out.update(self._auth_attempts())
        out.update(self._node())
        out.update(self._cluster(only))
        return out

    def _global(self, queues: list[QueueView], consumers: int, only: set[str] | None) -> dict[str, Samples]:
        """The rabbitmq_global_* counters from the message_stats the queues and vhosts keep."""
        by_type: dict[str, dict[str, int]] = {t: defaultdict(int) for t in QUEUE_TYPES.values()}
        for q in queues:
            counters = by_type.setdefault(QUEUE_TYPES.get(q.type, q.type), defaultdict(int))
            for key, value in q.stats.items():
                counters[key] += value
        vhost_totals: dict[str, int] = defaultdict(int)
        for vname in self.state.vhost_names():
            if only is None or vname in only:
                for key, value in (self.state.vhost_stats(vname) or {}).items():
                    vhost_totals[key] += value
        proto = (("protocol", PROTOCOL),)

        def by_queue_type(*keys: str) -> Samples:
            return [
                ((*proto, ("queue_type", t)), float(sum(c.get(k, 0) for k in keys)))
                for t, c in by_type.items()
            ]

        return {
            "rabbitmq_global_messages_received_total": [(proto, float(vhost_totals["publish"]))],
            "rabbitmq_global_messages_confirmed_total": [(proto, float(vhost_totals["confirm"]))],
            "rabbitmq_global_messages_unroutable_returned_total": [
                (proto, float(vhost_totals["return_unroutable"]))
            ],
            "rabbitmq_global_messages_unroutable_dropped_total": [
                (proto, float(vhost_totals["drop_unroutable"]))
            ],
            "rabbitmq_global_consumers": [(proto, float(consumers))],
            "rabbitmq_global_messages_delivered_total": by_queue_type(
                "deliver", "deliver_no_ack", "get", "get_no_ack"
            ),
            "rabbitmq_global_messages_delivered_consume_manual_ack_total": by_queue_type("deliver"),
            "rabbitmq_global_messages_delivered_consume_auto_ack_total": by_queue_type("deliver_no_ack"),
            "rabbitmq_global_messages_delivered_get_manual_ack_total": by_queue_type("get"),
            "rabbitmq_global_messages_delivered_get_auto_ack_total": by_queue_type("get_no_ack"),
            "rabbitmq_global_messages_get_empty_total": by_queue_type("get_empty"),
            "rabbitmq_global_messages_redelivered_total": by_queue_type("redeliver"),
            "rabbitmq_global_messages_acknowledged_total": by_queue_type("ack"),
        }

    def _churn(self, only: set[str] | None) -> dict[str, Samples]:
        """The churn counters, read from the broker's event hub (the kinds it counted), and the
        global routed and confirm-mode publish counters the vhosts keep."""
        counts = self.broker.events.counts
        out: dict[str, Samples] = {family: [((), float(counts[kind]))] for family, kind in CHURN.items()}
        routed = received_confirm = 0
        for vhost in self.broker.vhosts.values():
            if only is None or vhost.name in only:
                routed += vhost.stats.routed + sum(x.publish_out for x in vhost.exchanges.values())
                received_confirm += vhost.stats.received_confirm
        proto = (("protocol", PROTOCOL),)
        out["rabbitmq_global_messages_routed_total"] = [(proto, float(routed))]
        out["rabbitmq_global_messages_received_confirm_total"] = [(proto, float(received_confirm))]
        return out

    def _auth_attempts(self) -> dict[str, Samples]:
        """rabbit_core_metrics' auth attempts by protocol (a protocol with none has no series);
        the by-source table stays empty, as 3.10.8's does while track_auth_attempt_source is off."""
        counts = self.broker.events.counts
        total: Samples = []
        succeeded: Samples = []
        failed: Samples = []
        for protocol in AUTH_PROTOCOLS:
            ok, bad = counts[auth_attempt_kind(protocol, True)], counts[auth_attempt_kind(protocol, False)]
            if ok + bad == 0:
                continue
            labels: Labels = () if protocol in UNLABELLED_PROTOCOLS else (("protocol", protocol),)
            total.append((labels, float(ok + bad)))
            succeeded.append((labels, float(ok)))
            failed.append((labels, float(bad)))
        return {
            "rabbitmq_auth_attempts_total": total,
            "rabbitmq_auth_attempts_succeeded_total": succeeded,
            "rabbitmq_auth_attempts_failed_total": failed,
            "rabbitmq_auth_attempts_detailed_total": [],
            "rabbitmq_auth_attempts_detailed_succeeded_total": [],
            "rabbitmq_auth_attempts_detailed_failed_total": [],
        }

    def _node(self) -> dict[str, Samples]:
        """The node families, from this process (what RabbitMQ reads from its Erlang VM)."""
        node = self.state.node()
        alarms = self.state.alarms
        soft_fds = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        usage = resource.getrusage(resource.RUSAGE_SELF)
        try:
            open_fds = len(os.listdir("/proc/self/fd"))
        except OSError:
            open_fds = 0
        import gc

        one = {
            "process_start_time_seconds": self.started_wall,
            "rabbitmq_alarms_file_descriptor_limit": 0.0,
            "rabbitmq_alarms_free_disk_space_watermark": float(alarms.disk_alarm),
            "rabbitmq_alarms_memory_used_watermark": float(alarms.mem_alarm),
            "rabbitmq_process_open_fds": float(open_fds),
            "rabbitmq_process_open_tcp_sockets": float(len(self.broker.connections)),
            "rabbitmq_process_resident_memory_bytes": float(node.mem_used),
            "rabbitmq_disk_space_available_bytes": float(alarms.disk_free),
            "rabbitmq_erlang_processes_used": float(len(asyncio.all_tasks())),
            "rabbitmq_erlang_gc_runs_total": float(sum(g["collections"] for g in gc.get_stats())),
            "rabbitmq_erlang_scheduler_context_switches_total": float(usage.ru_nvcsw + usage.ru_nivcsw),
            "rabbitmq_process_max_fds": float(soft_fds),
            "rabbitmq_process_max_tcp_sockets": float(soft_fds),
            "rabbitmq_resident_memory_limit_bytes": float(alarms.memory_limit),
            "rabbitmq_disk_space_available_limit_bytes": float(alarms.disk_limit),
            "rabbitmq_erlang_uptime_seconds": time.time() - self.started_wall,
        }
        build = (
            ("rabbitmq_version", self.state.compat_version),
            ("prometheus_plugin_version", PLUGIN_VERSION),
            ("prometheus_client_version", "hashbroker"),
            ("erlang_version", "none"),
        )
        identity = (
            ("rabbitmq_node", node.name),
            ("rabbitmq_cluster", node.name),
            ("rabbitmq_cluster_permanent_id", f"rabbitmq-cluster-id-{node.name}"),
        )
        return {
            **{name: [((), value)] for name, value in one.items()},
            "rabbitmq_build_info": [(build, 1.0)],
            "rabbitmq_identity_info": [(identity, 1.0)],
        }

    def _cluster(self, only: set[str] | None) -> dict[str, Samples]:
        """The /metrics/detailed-only families that list vhosts and exchanges."""
        vhosts = [v for v in self.state.vhost_names() if only is None or v in only]
        exchanges = [x for x in self.state.exchanges() if x.vhost in vhosts]
        bindings: dict[tuple[str, str], int] = defaultdict(int)
        for b in self.state.bindings():
            if b.source:
                bindings[(b.vhost, b.source)] += 1
        return {
            "rabbitmq_cluster_vhost_status": [((("vhost", v),), 1.0) for v in vhosts],
            "rabbitmq_cluster_exchange_name": [
                ((("vhost", x.vhost), ("exchange", x.name), ("type", x.type)), 1.0)
                for x in exchanges
                if x.name
            ],
            "rabbitmq_cluster_exchange_bindings": [
                (
                    (("vhost", x.vhost), ("exchange", x.name), ("type", x.type)),
                    float(bindings[(x.vhost, x.name)]),
                )
                for x in exchanges
                if x.name
            ],
        }


class Telemetry:
    """The telemetry_scrape_* summaries: how large and how slow this endpoint's own answers were,
    by registry ("default", "per-object", "detailed")."""

    def __init__(self) -> None:
        self.counts: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])  # n, bytes, seconds

    def record(self, registry: str, size: int, seconds: float) -> None:
        entry = self.counts[registry]
        entry[0] += 1
        entry[1] += size
        entry[2] += seconds

    def samples(self) -> dict[str, list[tuple[str, Labels, float]]]:
        out: dict[str, list[tuple[str, Labels, float]]] = defaultdict(list)
        for registry, (n, size, seconds) in sorted(self.counts.items()):
            base = (("registry", registry), ("content_type", CONTENT_TYPE))
            for fam, labels, total in (
                ("telemetry_scrape_encoded_size_bytes", (*base, ("encoding", "identity")), size),
                ("telemetry_scrape_size_bytes", base, size),
                ("telemetry_scrape_duration_seconds", base, seconds),
            ):
                out[fam].append((f"{fam}_count", labels, n))
                out[fam].append((f"{fam}_sum", labels, total))
        return out


def process_start_time() -> float:
    """When this process started, in seconds since the epoch (Linux /proc: the start tick since
    boot), or now where that cannot be read: the node's uptime is the process's."""
    try:
        with open("/proc/self/stat") as fh:
            start_ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as fh:
            since_boot = float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return time.time()
    return time.time() - (since_boot - start_ticks / os.sysconf("SC_CLK_TCK"))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _line(name: str, labels: Labels, value: float) -> str:
    if labels:
        inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
        return f"{name}{{{inner}}} {_number(value)}\n"
    return f"{name} {_number(value)}\n"


def _aggregate(samples: Samples) -> Samples:
    """The /metrics form of a per-object family: one series, the sum, without object labels."""
    return [((), sum(v for _l, v in samples))]


OBJECT_LABELS = frozenset({"vhost", "queue", "channel", "exchange"})


def render(
    families: Iterable[tuple[str, str, str]],
    values: Mapping[str, Samples],
    telemetry: Mapping[str, list[tuple[str, Labels, float]]],
    *,
    per_object: bool,
    prefix_from: str = "",
    prefix_to: str = "",
) -> str:
    """The text exposition of `families` (name, type, HELP), in their order; a family with no
    value is left out. `prefix_from`/`prefix_to` rename a family for /metrics/detailed."""
    parts: list[str] = []
    for name, typ, help_text in families:
        key = name.replace(prefix_to, prefix_from, 1) if prefix_to and name.startswith(prefix_to) else name
        if key in OMITTED:
            continue
        body: Iterator[str]
        if name.startswith("telemetry_"):
            # 3.10.8 lists the encoded sizes on /metrics only: elsewhere the family is empty
            rows = telemetry.get(name, []) if per_object is False or "encoded" not in name else []
            body = (_line(sample, labels, v) for sample, labels, v in rows)
        else:
            samples = values.get(key)
            if samples is None:
                continue
            if not per_object and samples and any(k in OBJECT_LABELS for k, _v in samples[0][0]):
                samples = _aggregate(samples)
            elif not per_object and not samples and key not in SPARSE:
                samples = [((), 0.0)]
            body = (_line(name, labels, v) for labels, v in samples)
        parts.append(f"# TYPE {name} {typ}\n# HELP {name} {help_text}\n")
        parts.extend(body)
    return "".join(parts)


class PrometheusServer:
    """The plugin's listener: serves the three endpoints from the broker's read model."""

    def __init__(self, broker: ManagementBroker) -> None:
        self.broker = broker
        state = BrokerState(broker)
        self.scrape = Scrape(state, broker, process_start_time())
        self.telemetry = Telemetry()
        self.http = HttpServer(self.handle)

    @property
    def port(self) -> int:
        return self.http.port

    async def start(self, host: str, port: int) -> None:
        await self.http.start(host, port)

    async def close(self) -> None:
        await self.http.close()

    async def handle(self, req: Request) -> Response:
        if req.method not in ("GET", "HEAD"):
            return Response(405, b"", {"allow": "GET, HEAD"})
        began = time.perf_counter()
        path = req.raw_path.rstrip("/") or "/"
        if path == "/metrics":
            registry = "default"
            text = self._metrics(per_object=False)
        elif path == "/metrics/per-object":
            registry = "per-object"
            text = self._metrics(per_object=True)
        elif path == "/metrics/detailed":
            registry = "detailed"
            text = self._detailed(req.query.get("family", []), req.query.get("vhost"))
        else:
            return Response(404, b"", {})
        body = text.encode("utf-8")
        self.telemetry.record(registry, len(body), time.perf_counter() - began)
        return Response(200, body, {"content-type": CONTENT_TYPE})

    def _metrics(self, *, per_object: bool) -> str:
        skip = PER_OBJECT_ONLY if not per_object else AGGREGATED_ONLY
        families = [f for f in AGGREGATED if f[0] not in skip]
        return render(families, self.scrape.read(), self.telemetry.samples(), per_object=per_object)

    def _detailed(self, wanted: list[str], vhosts: list[str] | None) -> str:
        """The chosen families, renamed rabbitmq_detailed_*, plus build and identity info and the
        telemetry, as 3.10.8 answers (an unknown family adds nothing)."""
        values = self.scrape.read(vhosts)
        families: list[tuple[str, str, str]] = []
        for family in dict.fromkeys(wanted):
            families.extend(DETAILED.get(family, ()))
        common = [f for f in AGGREGATED if f[0] in ("rabbitmq_build_info", "rabbitmq_identity_info")]
        telemetry = [f for f in AGGREGATED if f[0].startswith("telemetry_")]
        return render(
            [*families, *common, *telemetry],
            values,
            self.telemetry.samples(),
            per_object=True,
            prefix_from="rabbitmq_",
            prefix_to="rabbitmq_detailed_",
        )


async def start_prometheus(broker: ManagementBroker, host: str, port: int) -> PrometheusServer:
    """Start the endpoint for a started `broker` (on the broker's loop; port 0 = any free port)."""
    server = PrometheusServer(broker)
    await server.start(host, port)
    return server
