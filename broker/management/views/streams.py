"""/api/stream/*: the stream-protocol connections, publishers and consumers, as RabbitMQ 3.10.8's
rabbitmq_stream_management shows them.

Who sees what follows the plugin: every path needs a management user; the lists show the caller's
own connections (and their publishers and consumers) unless the caller is a monitor, as
/api/connections does (rabbit_mgmt_util:filter_conn_ch_list, the publishers' filter_user); the
per-vhost connection list needs access to the vhost, the per-vhost publisher and consumer lists
do not (they only filter). One connection is 404 when absent, in another vhost or not a stream
connection, and someone else's is refused unless the caller is a monitor, or to close it
(DELETE), an administrator (is_authorized_user). Closing drops the socket without a close frame,
as RabbitMQ 3.10.8 does; the X-Reason header changes nothing the client sees.

The single connection's TLS fields are "" where the lists give null (observed: the single view
goes through another formatter in 3.10.8). A connection is shown as RabbitMQ shows it once its
first statistics were emitted (a few seconds after it opened): with the socket counters, "state"
and the reader process's figures.
"""

from __future__ import annotations

from typing import Any

from broker.management.connection_close import DEFAULT_REASON
from broker.management.context import Context
from broker.management.http import Request, Response
from broker.management.render import not_authorised, not_found
from broker.management.stream_sessions import StreamConnectionView, StreamConsumerView, StreamPublisherView
from broker.management.views.guards import may_act_on

_GC = {
    "fullsweep_after": 65535,
    "max_heap_size": 0,
    "min_bin_vheap_size": 46422,
    "min_heap_size": 233,
    "minor_gcs": 0,
}
_TLS_FIELDS = (
    "peer_cert_issuer",
    "peer_cert_subject",
    "peer_cert_validity",
    "ssl_cipher",
    "ssl_hash",
    "ssl_key_exchange",
    "ssl_protocol",
)


def fmt_stream_connection(ctx: Context, c: StreamConnectionView, *, tls_absent: Any = None) -> dict[str, Any]:
    d: dict[str, Any] = dict(c.figures)
    d.update(
        name=c.name,
        user=c.user,
        vhost=c.vhost,
        peer_host=c.peer_host,
        peer_port=c.peer_port,
        timeout=c.timeout,
        channel_max=0,
        channels=0,
        client_properties=dict(c.client_properties),
        node=ctx.state.node_name,
        protocol="stream",
        recv_oct_details={"rate": 0.0},
        reductions=0,
        reductions_details={"rate": 0.0},
        send_oct_details={"rate": 0.0},
        send_pend=0,
        ssl=False,
        state="running",
        # an Erlang process's figures in RabbitMQ; the defaults of a fresh reader process here
        garbage_collection=dict(_GC),
        user_who_performed_action=c.user,
    )
    if "connection_name" in c.client_properties:  # absent, as in RabbitMQ, when the client gave none
        d["user_provided_name"] = c.client_properties["connection_name"]
    d.update(dict.fromkeys(_TLS_FIELDS, tls_absent))
    return dict(sorted(d.items()))


def _details(ctx: Context, c: StreamConnectionView) -> dict[str, Any]:
    return {
        "name": c.name,
        "node": ctx.state.node_name,
        "peer_host": c.peer_host,
        "peer_port": c.peer_port,
        "user": c.user,
    }


def fmt_publisher(ctx: Context, c: StreamConnectionView, p: StreamPublisherView) -> dict[str, Any]:
    return {
        "confirmed": p.confirmed,
        "connection_details": _details(ctx, c),
        "errored": p.errored,
        "published": p.published,
        "publisher_id": p.publisher_id,
        "queue": {"name": p.stream, "vhost": c.vhost},
        "reference": p.reference,
    }


def fmt_consumer(ctx: Context, c: StreamConnectionView, s: StreamConsumerView) -> dict[str, Any]:
    return {
        "connection_details": _details(ctx, c),
        "consumed": s.consumed,
        "credits": s.credits,
        "offset": s.offset,
        "offset_lag": s.offset_lag,
        "properties": dict(s.properties),
        "queue": {"name": s.stream, "vhost": c.vhost},
        "subscription_id": s.subscription_id,
    }


def _visible(ctx: Context, req: Request, vhost: str | None = None) -> list[StreamConnectionView]:
    """The caller's connections, or everyone's for a monitor; of one vhost when given."""
    return [
        c
        for c in ctx.state.stream_connections()
        if (vhost is None or c.vhost == vhost) and may_act_on(ctx, req, c.user)
    ]


async def get_connections(ctx: Context, req: Request, segs: list[str]) -> Response:
    """/api/stream/connections and /api/stream/connections/{vhost}."""
    vhost = segs[2] if len(segs) == 3 else None
    if vhost is not None and not ctx.state.has_vhost(vhost):
        return not_found()
    return Response.json([fmt_stream_connection(ctx, c) for c in _visible(ctx, req, vhost)])


def _connection(ctx: Context, req: Request, segs: list[str]) -> StreamConnectionView | Response:
    vhost, name = segs[2], segs[3]
    for c in ctx.state.stream_connections():
        if c.name == name and c.vhost == vhost:
            if not may_act_on(ctx, req, c.user):
                return not_authorised("User not authorised to access object")
            return c
    return not_found()


async def get_connection(ctx: Context, req: Request, segs: list[str]) -> Response:
    """/api/stream/connections/{vhost}/{name}."""
    c = _connection(ctx, req, segs)
    return c if isinstance(c, Response) else Response.json(fmt_stream_connection(ctx, c, tls_absent=""))


async def delete_connection(ctx: Context, req: Request, segs: list[str]) -> Response:
    """DELETE /api/stream/connections/{vhost}/{name}: 204, and the client's socket closes."""
    c = _connection(ctx, req, segs)
    if isinstance(c, Response):
        return c
    close_stream(ctx, req, c)
    return Response(204)


def close_stream(ctx: Context, req: Request, c: StreamConnectionView) -> None:
    """Close `c` for `req` (its X-Reason, else RabbitMQ's default, stays the connection's own
    close reason: nothing is sent)."""
    ctx.writes.close_stream_connection(c.name, req.headers.get("x-reason") or DEFAULT_REASON)


async def get_connection_publishers(ctx: Context, req: Request, segs: list[str]) -> Response:
    """/api/stream/connections/{vhost}/{name}/publishers."""
    c = _connection(ctx, req, segs)
    if isinstance(c, Response):
        return c
    return Response.json([fmt_publisher(ctx, c, p) for p in c.publishers])


async def get_connection_consumers(ctx: Context, req: Request, segs: list[str]) -> Response:
    """/api/stream/connections/{vhost}/{name}/consumers."""
    c = _connection(ctx, req, segs)
    if isinstance(c, Response):
        return c
    return Response.json([fmt_consumer(ctx, c, s) for s in c.consumers])


async def get_publishers(ctx: Context, req: Request, segs: list[str]) -> Response:
    """/api/stream/publishers, /api/stream/publishers/{vhost} and .../{vhost}/{stream}."""
    vhost = segs[2] if len(segs) >= 3 else None
    stream = segs[3] if len(segs) == 4 else None
    if vhost is not None and not ctx.state.has_vhost(vhost):
        return not_found()
    if stream is not None and vhost is not None and ctx.state.queue(vhost, stream) is None:
        return not_found()
    return Response.json(
        [
            fmt_publisher(ctx, c, p)
            for c in _visible(ctx, req, vhost)
            for p in c.publishers
            if stream is None or p.stream == stream
        ]
    )


async def get_consumers(ctx: Context, req: Request, segs: list[str]) -> Response:
    """/api/stream/consumers and /api/stream/consumers/{vhost} (no per-stream path in 3.10.8)."""
    vhost = segs[2] if len(segs) == 3 else None
    if vhost is not None and not ctx.state.has_vhost(vhost):
        return not_found()
    return Response.json([fmt_consumer(ctx, c, s) for c in _visible(ctx, req, vhost) for s in c.consumers])
