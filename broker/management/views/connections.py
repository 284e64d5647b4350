"""/api/connections, /api/channels and /api/consumers: who is connected and consuming."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.management.http import Request, Response
from broker.management.render import (
    not_found,
)
from broker.management.sessions import ChannelInfo, ConnectionInfo, Traffic
from broker.management.state import ConsumerInfo

if TYPE_CHECKING:
    from broker.management.api import Api


def fmt_connection(api: Api, c: ConnectionInfo) -> dict[str, Any]:
    return {
        "auth_mechanism": c.auth_mechanism,
        "channel_max": c.channel_max,
        "channels": c.channels,
        "frame_max": c.frame_max,
        "host": c.host,
        "name": c.name,
        "node": api.state.node_name,
        "peer_host": c.peer_host,
        "peer_port": c.peer_port,
        "port": c.port,
        "protocol": "AMQP 0-9-1",
        "ssl": False,
        "state": c.state,
        "timeout": c.timeout,
        "type": "network",
        "user": c.user,
        "user_who_performed_action": c.user,
        "vhost": c.vhost,
        **fmt_traffic(c.traffic),
    }


def fmt_traffic(t: Traffic | None) -> dict[str, Any]:
    """The client's properties and socket counters, with RabbitMQ's names and units."""
    if t is None:
        return {}
    d: dict[str, Any] = {
        "client_properties": t.client_properties,
        "connected_at": t.connected_at,
        "recv_cnt": t.recv_cnt,
        "recv_oct": t.recv_oct,
        "recv_oct_details": {"rate": 0.0},
        "send_cnt": t.send_cnt,
        "send_oct": t.send_oct,
        "send_oct_details": {"rate": 0.0},
        "send_pend": 0,
    }
    if t.user_provided_name is not None:
        d["user_provided_name"] = t.user_provided_name
    return d


def fmt_consumer(api: Api, c: ConsumerInfo) -> dict[str, Any]:
    return {
        "arguments": c.arguments,
        "ack_required": c.ack_required,
        "active": c.active,
        "activity_status": c.activity_status,
        "channel_details": {
            "connection_name": c.connection_name,
            "name": f"{c.connection_name} ({c.channel_number})",
            "node": api.state.node_name,
            "number": c.channel_number,
            "peer_host": c.peer_host,
            "peer_port": c.peer_port,
            "user": c.user,
        },
        "consumer_tag": c.tag,
        "exclusive": c.exclusive,
        "prefetch_count": c.prefetch_count,
        "queue": {"name": c.queue, "vhost": c.vhost},
    }


def fmt_channel(api: Api, ch: ChannelInfo) -> dict[str, Any]:
    c = ch.connection
    return {
        "acks_uncommitted": 0,
        "confirm": ch.confirm,
        "connection_details": {"name": c.name, "peer_host": c.peer_host, "peer_port": c.peer_port},
        "consumer_count": ch.consumer_count,
        "global_prefetch_count": ch.global_prefetch_count,
        "messages_unacknowledged": ch.messages_unacknowledged,
        "messages_uncommitted": 0,
        "messages_unconfirmed": 0,
        "name": f"{c.name} ({ch.number})",
        "node": api.state.node_name,
        "number": ch.number,
        "prefetch_count": ch.prefetch_count,
        "state": "running",
        "transactional": ch.transactional,
        "user": c.user,
        "user_who_performed_action": c.user,
        "vhost": c.vhost,
    }


def _own(api: Api, req: Request, user: str) -> bool:
    """rabbit_mgmt_util:filter_user: only monitors see other users' connections and channels."""
    return user == req.user or api.who(req).is_monitor


async def get_connections(api: Api, req: Request, segs: list[str]) -> Response:
    return Response.json([fmt_connection(api, c) for c in api.state.connections() if _own(api, req, c.user)])


async def get_channels(api: Api, req: Request, segs: list[str]) -> Response:
    return Response.json(
        [fmt_channel(api, ch) for ch in api.state.channels() if _own(api, req, ch.connection.user)]
    )


async def get_consumers(api: Api, req: Request, segs: list[str]) -> Response:
    vhost = segs[1] if len(segs) == 2 else None
    if vhost is not None and not api.state.has_vhost(vhost):
        return not_found()
    seen = api.visible_vhosts(req)
    return Response.json(
        [fmt_consumer(api, c) for q in api.state.queues(vhost) if q.vhost in seen for c in q.consumers]
    )
