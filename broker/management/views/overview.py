"""Node-wide resources: /api/overview, /api/nodes, /api/whoami, and hashbroker's emulated cluster nodes."""

from __future__ import annotations

import asyncio
import platform
from typing import Any

from broker import __version__
from broker.entities.cluster import ClusterError
from broker.management.context import Context
from broker.management.http import Request, Response
from broker.management.rates import DEPTHS
from broker.management.render import (
    bad_request,
    not_found,
    with_rates,
)
from broker.management.views.health import listeners
from broker.runtime.eventloop import loop_name
from broker.runtime.transport import fd_usage

EXCHANGE_TYPE_DESCRIPTIONS = {
    "direct": "AMQP direct exchange, as per the AMQP specification",
    "fanout": "AMQP fanout exchange, as per the AMQP specification",
    "headers": "AMQP headers exchange, as per the AMQP specification",
    "topic": "AMQP topic exchange, as per the AMQP specification",
    "x-consistent-hash": "Consistent Hashing Exchange",
    "x-modulus-hash": "Modulus Hashing Exchange",
    "x-delayed-message": "Delayed Message Exchange",
    "x-random": "Randomly picks a binding (queue) to route via (to).",
    "x-recent-history": "Recent History Exchange.",
    "x-jms-topic": "JMS selector exchange",
}


def exchange_types(ctx: Context) -> list[dict[str, Any]]:
    return [
        {"name": t, "description": EXCHANGE_TYPE_DESCRIPTIONS.get(t, ""), "enabled": True}
        for t in ctx.state.exchange_types()
    ]


def message_stats(ctx: Context, vhosts: list[str]) -> dict[str, Any]:
    """The vhosts' message_stats summed, as RabbitMQ's overview aggregates them ({} before any
    activity); rates summed likewise."""
    totals: dict[str, int] = {}
    rates: dict[str, float] = {}
    for name in vhosts:
        stats = ctx.state.vhost_stats(name)
        if stats is None:
            continue
        for key, value in stats.items():
            totals[key] = totals.get(key, 0) + value
        for key, rate in ctx.state.vhost_rates(name).items():
            rates[key] = round(rates.get(key, 0.0) + rate, 1)
    return with_rates(totals, *totals, rates=rates)


def contexts(ctx: Context) -> list[dict[str, Any]]:
    """The HTTP contexts the node serves (the management API and UI)."""
    return [
        {
            "node": ctx.state.node_name,
            "description": "RabbitMQ Management",
            "path": "/",
            "port": str(ctx.http_port),
        }
    ]


async def get_overview(ctx: Context, req: Request, segs: list[str]) -> Response:
    """The whole node for monitors; for other users, only their vhosts and their own connections,
    without the node's listeners (rabbit_mgmt_wm_overview)."""
    s = ctx.state
    full = ctx.who(req).is_monitor
    seen = ctx.visible_vhosts(req)
    qs = [q for q in s.queues() if full or q.vhost in seen]
    ready = sum(q.messages_ready for q in qs)
    unacked = sum(q.messages_unacknowledged for q in qs)
    if full:
        rates = s.totals_rates()
    else:
        each = [s.queue_rates(q.vhost, q.name) for q in qs]
        rates = {k: sum(r.get(k, 0.0) for r in each) for k in DEPTHS}
    sessions = s.sessions()
    totals = {
        "channels": sum(1 for ch in sessions.channels() if full or ch.connection.user == req.user),
        # stream-protocol connections are connections too (RabbitMQ's object_totals counts them)
        "connections": sum(1 for c in sessions.connections() if full or c.user == req.user)
        + sum(1 for c in s.stream_connections() if full or c.user == req.user),
        "exchanges": sum(1 for e in s.exchanges() if full or e.vhost in seen),
        "queues": len(qs),
    }
    if full:
        totals["consumers"] = sum(len(q.consumers) for q in qs)
    node = s.node_name
    body = {
        "management_version": s.compat_version,
        "rates_mode": "basic",
        "sample_retention_policies": {
            "global": [600, 3600, 28800, 86400],
            "basic": [600, 3600],
            "detailed": [600],
        },
        "exchange_types": exchange_types(ctx),
        "product_version": __version__,
        "product_name": "hashbroker",
        "hashbroker_event_loop": loop_name(asyncio.get_running_loop()),  # "uvloop" or "asyncio"
        "rabbitmq_version": s.compat_version,
        "cluster_name": node,
        "erlang_version": f"none (Python {platform.python_version()})",
        "erlang_full_version": (f"none ({platform.python_implementation()} {platform.python_version()})"),
        "disable_stats": False,
        "enable_queue_totals": False,
        "message_stats": message_stats(ctx, [v for v in s.vhost_names() if full or v in seen]),
        "churn_rates": {},
        "queue_totals": with_rates(
            {
                "messages": ready + unacked,
                "messages_ready": ready,
                "messages_unacknowledged": unacked,
            },
            "messages",
            "messages_ready",
            "messages_unacknowledged",
            rates=rates,
        ),
        "object_totals": dict(sorted(totals.items())),
        "statistics_db_event_queue": 0,
        "node": node,
        "listeners": [
            {
                "node": node,
                "protocol": protocol,
                "ip_address": s.amqp_host if protocol.startswith("amqp") else ctx.http_host,
                "port": port,
                "socket_opts": {},
            }
            for protocol, port in listeners(ctx)
        ],
        "contexts": contexts(ctx),
    }
    if not full:
        for key in ("node", "listeners", "contexts"):
            del body[key]
    return Response.json(body)


async def get_nodes(ctx: Context, req: Request, segs: list[str]) -> Response:
    n = ctx.state.node()
    fd_used, fd_total = fd_usage()
    alarms = ctx.state.alarms
    node = {
        "name": n.name,
        "type": "disc",
        "running": True,
        "os_pid": n.os_pid,
        "uptime": n.uptime_ms,
        "processors": n.processors,
        "rates_mode": "basic",
        "partitions": [],
        "mem_used": n.mem_used,
        "mem_limit": alarms.memory_limit,
        "mem_calculation_strategy": "rss",
        "mem_alarm": alarms.mem_alarm,
        "disk_free": alarms.disk_free,
        "disk_free_limit": alarms.disk_limit,
        "disk_free_alarm": alarms.disk_alarm,
        # hashbroker's own: why the store is not confirming writes (files deleted or replaced under
        # the broker, a failed commit), or null; RabbitMQ has no such field
        "store_fault": ctx.state.store_fault(),
        "fd_used": fd_used,
        "fd_total": fd_total,
        "being_drained": False,
        "exchange_types": exchange_types(ctx),
        "auth_mechanisms": [
            {"name": "PLAIN", "description": "SASL PLAIN authentication mechanism", "enabled": True},
            {"name": "AMQPLAIN", "description": "QPid AMQPLAIN mechanism", "enabled": True},
        ],
        "applications": [{"name": "hashbroker", "description": "hashbroker", "version": __version__}],
        "enabled_plugins": ctx.state.explicit_plugins(),  # the enabled_plugins file's, as listed there
        "contexts": [{k: v for k, v in c.items() if k != "node"} for c in contexts(ctx)],
        "cluster_links": [],  # no Erlang distribution: the emulated members share this process
    }
    nodes = [{**node, "name": name} for name in ctx.state.cluster.nodes]  # the emulated cluster
    if len(segs) == 2:
        found = [x for x in nodes if x["name"] == segs[1]]
        return Response.json(found[0]) if found else not_found()
    return Response.json(nodes)


async def get_whoami(ctx: Context, req: Request, segs: list[str]) -> Response:
    user = req.user
    return Response.json({"name": user, "tags": ctx.state.user_tags(user)})


async def get_cluster_nodes(ctx: Context, req: Request, segs: list[str]) -> Response:
    """GET /api/hashbroker/nodes: the emulated cluster."""
    cluster = ctx.state.cluster
    return Response.json({"local": cluster.local, "nodes": cluster.nodes})


async def post_cluster_node(ctx: Context, req: Request, segs: list[str]) -> Response:
    """POST /api/hashbroker/nodes/{name}: a node joins; sharded exchanges get its shards."""
    try:
        added = ctx.writes.add_node(segs[2])
    except ClusterError as exc:
        return bad_request(str(exc))
    return Response(201 if added else 204)


async def delete_cluster_node(ctx: Context, req: Request, segs: list[str]) -> Response:
    """DELETE /api/hashbroker/nodes/{name}: a node leaves (its shard queues stay)."""
    try:
        ctx.writes.remove_node(segs[2])
    except ClusterError as exc:
        return not_found() if "not a cluster node" in str(exc) else bad_request(str(exc))
    return Response(204)
