"""The node's metadata resources RabbitMQ 3.10.8 serves: /api/extensions, /api/auth,
/api/feature-flags, /api/global-parameters, /api/topic-permissions, /api/vhost-limits and
/api/user-limits, with its shapes.

hashbroker has no OAuth 2 (UAA) login, no topic permissions and no vhost or user limits, so those
answer as a RabbitMQ with none configured does; the feature flags are those of the RabbitMQ version
emulated, in the states a fresh 3.10.8 node has them. /api/extensions lists what RabbitMQ's UI
would load for the plugins on (`EXTENSIONS`).
"""

from __future__ import annotations

import base64
import os
from typing import Any

from broker.management.context import Context
from broker.management.http import Request, Response
from broker.management.render import not_found

FEATURE_FLAGS: list[tuple[str, str, str, str, str]] = [
    # name, desc, doc_url, state, provided_by (all "stable")
    (
        "classic_mirrored_queue_version",
        "Support setting version for classic mirrored queues",
        "",
        "enabled",
        "rabbit",
    ),
    (
        "drop_unroutable_metric",
        "Count unroutable publishes to be dropped in stats",
        "",
        "disabled",
        "rabbitmq_management_agent",
    ),
    (
        "empty_basic_get_metric",
        "Count AMQP `basic.get` on empty queues in stats",
        "",
        "disabled",
        "rabbitmq_management_agent",
    ),
    (
        "implicit_default_bindings",
        "Default bindings are now implicit, instead of being stored in the database",
        "",
        "enabled",
        "rabbit",
    ),
    ("maintenance_mode_status", "Maintenance mode status", "", "enabled", "rabbit"),
    (
        "quorum_queue",
        "Support queues of type `quorum`",
        "https://www.rabbitmq.com/quorum-queues.html",
        "enabled",
        "rabbit",
    ),
    (
        "stream_queue",
        "Support queues of type `stream`",
        "https://www.rabbitmq.com/stream.html",
        "enabled",
        "rabbit",
    ),
    ("user_limits", "Configure connection and channel limits for a user", "", "enabled", "rabbit"),
    ("virtual_host_metadata", "Virtual host metadata (description, tags, etc)", "", "enabled", "rabbit"),
]

CLUSTER_ID = "rabbitmq-cluster-id-" + base64.urlsafe_b64encode(os.urandom(16)).decode("ascii").rstrip("=")
"""rabbit_nodes' internal_cluster_id: made once per node start (RabbitMQ keeps its own in the schema)."""


EXTENSIONS: tuple[tuple[str, tuple[dict[str, str] | list[object], ...]], ...] = (
    ("rabbitmq_management", ({"javascript": "dispatcher.js"},)),
    ("rabbitmq_stream_management", ([], [], [], {"javascript": "stream.js"}, [], [], [])),
)
"""Per plugin, in the order 3.10.8 answers them, the `web_ui()` of each of its modules that is a
rabbit_mgmt_extension (one item per module, in its .app file's order: [] for a module that adds
no script). The management plugin's is rabbit_mgmt_dispatcher; rabbitmq_stream_management has
seven, of which rabbit_stream_connections_mgmt brings stream.js."""


async def get_extensions(ctx: Context, req: Request, segs: list[str]) -> Response:
    """One item per extension module of the plugins on (observed on RabbitMQ 3.10.8)."""
    plugins = ctx.state.enabled_plugins()
    return Response.json(
        [item for plugin, items in EXTENSIONS if plugins is None or plugin in plugins for item in items]
    )


async def get_auth(ctx: Context, req: Request, segs: list[str]) -> Response:
    """Public: the login page asks whether to offer OAuth 2 before anyone has logged in."""
    return Response.json({"enable_uaa": False, "uaa_client_id": "", "uaa_location": ""})


async def get_feature_flags(ctx: Context, req: Request, segs: list[str]) -> Response:
    flags = [
        {"name": n, "desc": d, "doc_url": u, "state": s, "stability": "stable", "provided_by": p}
        for n, d, u, s, p in FEATURE_FLAGS
    ]
    return Response.json(flags)


def _global_parameters() -> list[dict[str, Any]]:
    return [{"name": "internal_cluster_id", "value": CLUSTER_ID}]


async def get_global_parameters(ctx: Context, req: Request, segs: list[str]) -> Response:
    if len(segs) == 2:
        found = [p for p in _global_parameters() if p["name"] == segs[1]]
        return Response.json({"value": found[0]["value"], "name": segs[1]}) if found else not_found()
    return Response.json(_global_parameters())


async def get_topic_permissions(ctx: Context, req: Request, segs: list[str]) -> Response:
    """/api/topic-permissions, /api/users/{u}/topic-permissions, /api/vhosts/{v}/topic-permissions."""
    if segs[0] == "users" and ctx.state.user(segs[1]) is None:
        return not_found()
    if segs[0] == "vhosts" and not ctx.state.has_vhost(segs[1]):
        return not_found()
    return Response.json([])


async def get_vhost_limits(ctx: Context, req: Request, segs: list[str]) -> Response:
    if len(segs) == 2 and not ctx.state.has_vhost(segs[1]):
        return not_found()
    return Response.json([])


async def get_user_limits(ctx: Context, req: Request, segs: list[str]) -> Response:
    if len(segs) == 2 and ctx.state.user(segs[1]) is None:
        return not_found()
    return Response.json([])
