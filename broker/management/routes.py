"""The management API's URL table: path pattern, who may call it (broker.management.authz), handlers.

Patterns are the path segments after `/api/`; "*" matches one (percent-decoded) segment. Order
matters only where two patterns could match the same path (none do today). A path a plugin adds
(`PLUGIN_PATHS`) is unknown while that plugin is off, answered as RabbitMQ without the plugin
answers any path it does not know (`unknown_path`).
"""

from __future__ import annotations

from collections.abc import Container

from broker.management.authz import Level, Rule
from broker.management.context import Handler
from broker.management.http import Response
from broker.management.render import not_found
from broker.management.views import (
    bindings,
    connections,
    definitions,
    exchanges,
    hash_trace,
    health,
    meta,
    overview,
    policies,
    queues,
    streams,
    users,
    vhosts,
)

PUBLIC = Rule(Level.PUBLIC)
MANAGEMENT = Rule(Level.MANAGEMENT)
MONITOR = Rule(Level.MONITOR)
ADMIN = Rule(Level.ADMIN)
VHOST = Rule(Level.VHOST, 1)
POLICIES = Rule(Level.POLICIES)
VHOST_POLICIES = Rule(Level.POLICIES, 1)

Route = tuple[tuple[str, ...], Rule, dict[str, Handler]]


def _by_vhost(name: str, get: Handler, put: Handler, delete: Handler, one: Rule = VHOST) -> list[Route]:
    """A resource listed across the vhosts the caller sees, per vhost, and one object by vhost and
    name that is also written there (`one`: who may read and write the object)."""
    return [
        ((name,), MANAGEMENT, {"GET": get}),
        ((name, "*"), VHOST, {"GET": get}),
        ((name, "*", "*"), one, {"GET": get, "PUT": put, "DELETE": delete}),
    ]


ROUTES: list[Route] = [
    (("overview",), MANAGEMENT, {"GET": overview.get_overview}),
    (("whoami",), MANAGEMENT, {"GET": overview.get_whoami}),
    (("nodes",), MONITOR, {"GET": overview.get_nodes}),
    (("nodes", "*"), MONITOR, {"GET": overview.get_nodes}),
    (("vhosts",), MANAGEMENT, {"GET": vhosts.get_vhosts}),
    (
        ("vhosts", "*"),
        ADMIN,
        {"GET": vhosts.get_vhosts, "PUT": vhosts.put_vhost, "DELETE": vhosts.delete_vhost},
    ),
    (("vhosts", "*", "permissions"), ADMIN, {"GET": users.get_vhost_permissions}),
    (("vhosts", "*", "connections"), VHOST, {"GET": connections.get_connections}),
    (("vhosts", "*", "channels"), VHOST, {"GET": connections.get_channels}),
    (("users",), ADMIN, {"GET": users.get_users}),
    (("users", "*"), ADMIN, {"GET": users.get_users, "PUT": users.put_user, "DELETE": users.delete_user}),
    (("users", "*", "permissions"), ADMIN, {"GET": users.get_user_permissions}),
    (("permissions",), ADMIN, {"GET": users.get_permissions}),
    (
        ("permissions", "*", "*"),
        ADMIN,
        {"GET": users.get_permission, "PUT": users.put_permission, "DELETE": users.delete_permission},
    ),
    (("connections",), MANAGEMENT, {"GET": connections.get_connections}),
    (
        ("connections", "*"),
        MANAGEMENT,
        {"GET": connections.get_connection, "DELETE": connections.delete_connection},
    ),
    (("connections", "*", "channels"), MANAGEMENT, {"GET": connections.get_connection_channels}),
    (("channels",), MANAGEMENT, {"GET": connections.get_channels}),
    (("channels", "*"), MANAGEMENT, {"GET": connections.get_channel}),
    (("consumers",), MANAGEMENT, {"GET": connections.get_consumers}),
    (("consumers", "*"), MANAGEMENT, {"GET": connections.get_consumers}),  # filtered, never refused
    (("stream", "connections"), MANAGEMENT, {"GET": streams.get_connections}),
    (("stream", "connections", "*"), Rule(Level.VHOST, 2), {"GET": streams.get_connections}),
    (
        ("stream", "connections", "*", "*"),
        MANAGEMENT,
        {"GET": streams.get_connection, "DELETE": streams.delete_connection},
    ),
    (
        ("stream", "connections", "*", "*", "publishers"),
        MANAGEMENT,
        {"GET": streams.get_connection_publishers},
    ),
    (("stream", "connections", "*", "*", "consumers"), MANAGEMENT, {"GET": streams.get_connection_consumers}),
    (("stream", "publishers"), MANAGEMENT, {"GET": streams.get_publishers}),
    (("stream", "publishers", "*"), MANAGEMENT, {"GET": streams.get_publishers}),
    (("stream", "publishers", "*", "*"), MANAGEMENT, {"GET": streams.get_publishers}),
    (("stream", "consumers"), MANAGEMENT, {"GET": streams.get_consumers}),
    (("stream", "consumers", "*"), MANAGEMENT, {"GET": streams.get_consumers}),
    *_by_vhost("exchanges", exchanges.get_exchanges, exchanges.put_exchange, exchanges.delete_exchange),
    (("exchanges", "*", "*", "publish"), VHOST, {"POST": exchanges.publish}),
    (("exchanges", "*", "*", "bindings", "source"), VHOST, {"GET": bindings.get_exchange_bindings}),
    (("exchanges", "*", "*", "bindings", "destination"), VHOST, {"GET": bindings.get_exchange_bindings}),
    *_by_vhost("queues", queues.get_queues, queues.put_queue, queues.delete_queue),
    (("queues", "*", "*", "contents"), VHOST, {"DELETE": queues.purge_queue}),
    (("queues", "*", "*", "get"), VHOST, {"POST": queues.get_messages}),
    (("queues", "*", "*", "bindings"), VHOST, {"GET": bindings.get_queue_bindings}),
    (("bindings",), MANAGEMENT, {"GET": bindings.get_bindings}),
    (("bindings", "*"), VHOST, {"GET": bindings.get_bindings}),
    (
        ("bindings", "*", "e", "*", "*", "*"),
        VHOST,
        {"GET": bindings.get_binding_pair, "POST": bindings.post_binding},
    ),
    (
        ("bindings", "*", "e", "*", "*", "*", "*"),
        VHOST,
        {"GET": bindings.get_binding_pair, "DELETE": bindings.delete_binding},
    ),
    (("definitions",), ADMIN, {"GET": definitions.get_definitions, "POST": definitions.post_definitions}),
    (("definitions", "*"), ADMIN, {"GET": definitions.get_definitions, "POST": definitions.post_definitions}),
    *_by_vhost(
        "policies", policies.get_policies, policies.put_policy, policies.delete_policy, one=VHOST_POLICIES
    ),
    (("parameters",), POLICIES, {"GET": policies.get_parameters}),
    (("parameters", "*"), POLICIES, {"GET": policies.get_parameters}),
    (("parameters", "*", "*"), Rule(Level.POLICIES, 2), {"GET": policies.get_parameters}),
    (("hashbroker", "exchanges", "*", "*", "ring"), Rule(Level.VHOST, 2), {"GET": exchanges.get_ring}),
    (
        ("hashbroker", "exchanges", "*", "*", "hash-trace"),
        Rule(Level.VHOST, 2),
        {"GET": hash_trace.get_hash_trace},
    ),
    (("health", "checks", "alarms"), MANAGEMENT, {"GET": health.get_alarms}),
    (("health", "checks", "local-alarms"), MANAGEMENT, {"GET": health.get_local_alarms}),
    (("health", "checks", "port-listener", "*"), MANAGEMENT, {"GET": health.get_port_listener}),
    (("health", "checks", "protocol-listener", "*"), MANAGEMENT, {"GET": health.get_protocol_listener}),
    (("health", "checks", "virtual-hosts"), MANAGEMENT, {"GET": health.get_virtual_hosts}),
    (("health", "checks", "node-is-quorum-critical"), MANAGEMENT, {"GET": health.get_single_node}),
    (("health", "checks", "node-is-mirror-sync-critical"), MANAGEMENT, {"GET": health.get_single_node}),
    (
        ("health", "checks", "certificate-expiration", "*", "*"),
        MANAGEMENT,
        {"GET": health.get_certificate_expiration},
    ),
    (("aliveness-test", "*"), VHOST, {"GET": health.get_aliveness}),
    (("healthchecks", "node"), MANAGEMENT, {"GET": health.get_node_health}),
    (("healthchecks", "node", "*"), MANAGEMENT, {"GET": health.get_node_health}),
    (("extensions",), MANAGEMENT, {"GET": meta.get_extensions}),
    (("auth",), PUBLIC, {"GET": meta.get_auth}),
    (("feature-flags",), ADMIN, {"GET": meta.get_feature_flags}),
    (("global-parameters",), ADMIN, {"GET": meta.get_global_parameters}),
    (("global-parameters", "*"), ADMIN, {"GET": meta.get_global_parameters}),
    (("topic-permissions",), ADMIN, {"GET": meta.get_topic_permissions}),
    (("users", "*", "topic-permissions"), ADMIN, {"GET": meta.get_topic_permissions}),
    (("vhosts", "*", "topic-permissions"), ADMIN, {"GET": meta.get_topic_permissions}),
    (("vhost-limits",), MANAGEMENT, {"GET": meta.get_vhost_limits}),
    (("vhost-limits", "*"), VHOST, {"GET": meta.get_vhost_limits}),
    (("user-limits",), MANAGEMENT, {"GET": meta.get_user_limits}),
    (("user-limits", "*"), MANAGEMENT, {"GET": meta.get_user_limits}),
    (("hashbroker", "nodes"), MONITOR, {"GET": overview.get_cluster_nodes}),
    (
        ("hashbroker", "nodes", "*"),
        ADMIN,
        {"POST": overview.post_cluster_node, "DELETE": overview.delete_cluster_node},
    ),
]


PLUGIN_PATHS: dict[str, str] = {"stream": "rabbitmq_stream_management"}
"""The first path segment (after /api/) of the resources a plugin other than the management
plugin registers, and that plugin."""

METHOD_ORDER = ("HEAD", "GET", "PUT", "POST", "DELETE", "OPTIONS")
"""The order RabbitMQ 3.10.8's resources list their methods in an allow header (observed)."""


def allow_header(methods: Container[str]) -> str:
    """The allow header of a path whose methods are `methods`."""
    return ", ".join(m for m in METHOD_ORDER if m in methods)


UNKNOWN_ALLOW = "HEAD, GET, OPTIONS"
"""The methods RabbitMQ's catch-all resource for an unknown /api/ path allows (observed on 3.10.8:
GET and HEAD are 404, OPTIONS 200, anything else 405 with this allow header)."""


def unknown_path(method: str) -> Response:
    """RabbitMQ 3.10.8's answer to `method` on a path under /api/ it does not know, before any
    authentication (recorded in tests/data/plugins/unknown_path.json)."""
    if method in ("GET", "HEAD"):
        return not_found()
    return Response(200 if method == "OPTIONS" else 405, b"", {"allow": UNKNOWN_ALLOW})


def match(
    method: str, segs: list[str], plugins: Container[str] | None = None
) -> tuple[Handler | None, Rule | None, set[str]]:
    """The handler and rule for `method` on `segs`, and the methods the path allows (for 405);
    nothing for a path of a plugin not in `plugins` (None: all plugins on)."""
    allowed: set[str] = set()
    owner = PLUGIN_PATHS.get(segs[0]) if segs else None
    if owner is not None and plugins is not None and owner not in plugins:
        return None, None, allowed
    for pattern, rule, methods in ROUTES:
        if len(pattern) != len(segs):
            continue
        if not all(p == "*" or p == s for p, s in zip(pattern, segs, strict=True)):
            continue
        names = set(methods) | {"OPTIONS"}
        if "GET" in names:
            names.add("HEAD")
        allowed |= names
        handler = methods.get("GET" if method == "HEAD" else method)
        if handler is not None:
            return handler, rule, allowed
    return None, None, allowed
