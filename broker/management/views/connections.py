"""/api/connections, /api/channels and /api/consumers: who is connected and consuming.

The connections are the AMQP 0-9-1 ones and, as RabbitMQ 3.10.8 lists them there too (whether or
not rabbitmq_stream_management is on), the stream-protocol ones, each in its own protocol's form:
a stream connection appears as /api/stream/connections shows it (protocol "stream", no "type"),
has no channels, and DELETE drops it as /api/stream/connections/{vhost}/{name} does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from broker.entities.info import ChannelView, ConnectionView, ConsumerView, QueueView
from broker.management.connection_close import force_close
from broker.management.context import Context
from broker.management.http import Request, Response
from broker.management.render import formatted, not_authorised, not_found
from broker.management.sessions import Sessions
from broker.management.stream_sessions import StreamConnectionView
from broker.management.values import table_to_json
from broker.management.views.guards import may_act_on
from broker.management.views.streams import close_stream, fmt_stream_connection
from broker.runtime.tls import TLS_FIELDS

T = TypeVar("T")


def fmt_connection(ctx: Context, c: ConnectionView) -> dict[str, Any]:
    d: dict[str, Any] = {
        "auth_mechanism": c.auth_mechanism,
        "channel_max": c.channel_max,
        "channels": c.channels,
        "frame_max": c.frame_max,
        "host": c.host,
        "name": c.name,
        "node": ctx.state.node_name,
        "peer_host": c.peer_host,
        "peer_port": c.peer_port,
        "port": c.port,
        "protocol": "AMQP 0-9-1",
        "ssl": c.tls is not None,
        **{key: (c.tls or {}).get(key) for key in TLS_FIELDS},
        "state": c.state,
        "timeout": c.timeout,
        "type": "network",
        "user": c.user,
        "user_who_performed_action": c.user,
        "vhost": c.vhost,
        # the client's properties and socket counters, with RabbitMQ's names and units
        "client_properties": table_to_json(c.client_properties),
        "connected_at": c.connected_at,
        "recv_cnt": c.recv_cnt,
        "recv_oct": c.recv_oct,
        "recv_oct_details": {"rate": 0.0},
        "send_cnt": c.send_cnt,
        "send_oct": c.send_oct,
        "send_oct_details": {"rate": 0.0},
        "send_pend": 0,
    }
    if c.user_provided_name is not None:
        d["user_provided_name"] = c.user_provided_name
    return d


def fmt_consumer(ctx: Context, q: QueueView, c: ConsumerView, sessions: Sessions) -> dict[str, Any]:
    """A consumer of `q`, with the details of its channel (`sessions` has the channel's view)."""
    ch = sessions.channel_of(c.channel)
    conn = ch.connection
    # "up" when every consumer of the queue is active, else whether this one is the single active
    single = q.single_active_consumer_tag is not None
    status = ("single_active" if c.active else "waiting") if single else "up"
    return {
        "arguments": table_to_json(c.arguments),
        "ack_required": c.ack_required,
        "active": c.active,
        "activity_status": status,
        "channel_details": {
            "connection_name": conn.name,
            "name": f"{conn.name} ({ch.number})",
            "node": ctx.state.node_name,
            "number": ch.number,
            "peer_host": conn.peer_host,
            "peer_port": conn.peer_port,
            "user": conn.user,
        },
        "consumer_tag": c.tag,
        "exclusive": c.exclusive,
        "prefetch_count": c.prefetch_count,
        "queue": {"name": q.name, "vhost": q.vhost},
    }


def fmt_channel(ctx: Context, ch: ChannelView) -> dict[str, Any]:
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
        "node": ctx.state.node_name,
        "number": ch.number,
        "prefetch_count": ch.prefetch_count,
        "state": "running",
        "transactional": ch.transactional,
        "user": c.user,
        "user_who_performed_action": c.user,
        "vhost": c.vhost,
    }


async def get_connections(ctx: Context, req: Request, segs: list[str]) -> Response:
    """/api/connections, or /api/vhosts/{vhost}/connections for one vhost's: AMQP and stream
    connections together, by name."""
    amqp = await _session_listing(ctx, req, segs, Sessions.connections, _itself, fmt_connection)
    if isinstance(amqp, Response):
        return amqp
    vhost = segs[1] if segs[0] == "vhosts" else None
    streams = [
        fmt_stream_connection(ctx, c)
        for c in ctx.state.stream_connections()
        if may_act_on(ctx, req, c.user) and (vhost is None or c.vhost == vhost)
    ]
    if streams:
        amqp = sorted([*amqp, *streams], key=lambda c: str(c["name"]))
    return Response.json(amqp)


async def get_channels(ctx: Context, req: Request, segs: list[str]) -> Response:
    """/api/channels, or /api/vhosts/{vhost}/channels for one vhost's."""
    rows = await _session_listing(ctx, req, segs, Sessions.channels, _connection_of, fmt_channel)
    return rows if isinstance(rows, Response) else Response.json(rows)


async def _session_listing(
    ctx: Context,
    req: Request,
    segs: list[str],
    rows: Callable[[Sessions], Iterable[T]],
    connection: Callable[[T], ConnectionView],
    fmt: Callable[[Context, T], dict[str, Any]],
) -> list[dict[str, Any]] | Response:
    """Connections or channels the caller may see (`may_act_on`), of one vhost when the path
    names one (404 for a vhost that does not exist)."""
    vhost = segs[1] if segs[0] == "vhosts" else None
    if vhost is not None and not ctx.state.has_vhost(vhost):
        return not_found()
    shown = [
        row
        for row in rows(ctx.state.sessions())
        if may_act_on(ctx, req, (c := connection(row)).user) and (vhost is None or c.vhost == vhost)
    ]
    return await formatted(shown, lambda row: fmt(ctx, row))


def _itself(c: ConnectionView) -> ConnectionView:
    return c


def _connection_of(ch: ChannelView) -> ConnectionView:
    return ch.connection


async def get_consumers(ctx: Context, req: Request, segs: list[str]) -> Response:
    vhost = segs[1] if len(segs) == 2 else None
    if vhost is not None and not ctx.state.has_vhost(vhost):
        return not_found()
    seen = ctx.visible_vhosts(req)
    sessions = ctx.state.sessions()
    return Response.json(
        [
            fmt_consumer(ctx, q, c, sessions)
            for q in ctx.state.queues(vhost)
            if q.vhost in seen
            for c in q.consumers
        ]
    )


def _visible_connection(
    ctx: Context, req: Request, name: str
) -> ConnectionView | StreamConnectionView | Response:
    """The connection `name` (AMQP or stream) as the caller may use it (`may_act_on`): 404 when
    it is absent, 401 when it is someone else's."""
    found: list[ConnectionView | StreamConnectionView] = [
        c for c in ctx.state.sessions().connections() if c.name == name
    ]
    found += [c for c in ctx.state.stream_connections() if c.name == name]
    if not found:
        return not_found()
    c = found[0]
    return c if may_act_on(ctx, req, c.user) else not_authorised("User not authorised to access object")


async def get_connection(ctx: Context, req: Request, segs: list[str]) -> Response:
    c = _visible_connection(ctx, req, segs[1])
    if isinstance(c, StreamConnectionView):
        return Response.json(fmt_stream_connection(ctx, c, tls_absent=""))
    return c if isinstance(c, Response) else Response.json(fmt_connection(ctx, c))


async def delete_connection(ctx: Context, req: Request, segs: list[str]) -> Response:
    """Close an AMQP connection with 320 CONNECTION_FORCED and the X-Reason header's text
    (RabbitMQ's default otherwise); drop a stream connection."""
    c = _visible_connection(ctx, req, segs[1])
    if isinstance(c, Response):
        return c
    if isinstance(c, StreamConnectionView):
        close_stream(ctx, req, c)
        return Response(204)
    conn = ctx.state.connection(segs[1])
    if conn is not None:
        force_close(conn, req.headers.get("x-reason"))
    return Response(204)


async def get_connection_channels(ctx: Context, req: Request, segs: list[str]) -> Response:
    c = _visible_connection(ctx, req, segs[1])
    if isinstance(c, Response):
        return c
    return Response.json(
        [fmt_channel(ctx, ch) for ch in ctx.state.sessions().channels() if ch.connection.name == c.name]
    )


async def get_channel(ctx: Context, req: Request, segs: list[str]) -> Response:
    for ch in ctx.state.sessions().channels():
        if f"{ch.connection.name} ({ch.number})" == segs[1]:
            if not may_act_on(ctx, req, ch.connection.user):
                return not_authorised("User not authorised to access object")
            return Response.json(fmt_channel(ctx, ch))
    return not_found()
