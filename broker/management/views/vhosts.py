"""/api/vhosts: list, create, delete, and switch the firehose tracer (`tracing`)."""

from __future__ import annotations

from typing import Any

from broker.entities.users import parse_tags
from broker.management.context import Context
from broker.management.http import Request, Response
from broker.management.render import (
    bad_request,
    json_body,
    not_found,
    with_rates,
)

_BOOLEANS = {"true": True, "false": False}


def fmt_vhost(ctx: Context, name: str, octets: dict[str, dict[str, int]]) -> dict[str, Any]:
    """The vhost; `octets`: `BrokerState.vhost_octets()`, read once per request."""
    qs = ctx.state.queues(name)
    ready = sum(q.messages_ready for q in qs)
    unacked = sum(q.messages_unacknowledged for q in qs)
    description, tags = ctx.state.vhost_metadata(name)
    d: dict[str, Any] = {
        "cluster_state": {ctx.state.node_name: "running"},
        "default_queue_type": "undefined",
        "description": description,
        "messages": ready + unacked,
        "messages_ready": ready,
        "messages_unacknowledged": unacked,
        "metadata": {"description": description, "tags": list(tags)},
        "name": name,
        "tags": list(tags),
        "tracing": ctx.state.tracing(name),
    }
    stats = ctx.state.vhost_stats(name)
    if stats is not None:  # as RabbitMQ: none before any activity
        d["message_stats"] = with_rates(dict(stats), *stats, rates=ctx.state.vhost_rates(name))
    if name in octets:  # as RabbitMQ: none before the vhost's first connection
        d.update(with_rates(dict(octets[name]), *octets[name], rates=ctx.state.vhost_rates(name)))
    return with_rates(d, "messages", "messages_ready", "messages_unacknowledged")


async def get_vhosts(ctx: Context, req: Request, segs: list[str]) -> Response:
    if len(segs) == 2:
        if not ctx.state.has_vhost(segs[1]):
            return not_found()
        return Response.json(fmt_vhost(ctx, segs[1], ctx.state.vhost_octets()))
    seen = ctx.visible_vhosts(req, monitors=True)
    octets = ctx.state.vhost_octets()
    return Response.json([fmt_vhost(ctx, v, octets) for v in ctx.state.vhost_names() if v in seen])


async def put_vhost(ctx: Context, req: Request, segs: list[str]) -> Response:
    body = json_body(req) if req.body else {}
    if isinstance(body, Response):
        return body
    tracing = body.get("tracing")
    if isinstance(tracing, str):
        tracing = _BOOLEANS.get(tracing, tracing)
    if "tracing" in body and not isinstance(tracing, bool):  # rabbit_mgmt_util:parse_bool
        return bad_request(["not_boolean", body["tracing"]])
    tags = body.get("tags", ())
    created = ctx.writes.put_vhost(
        req.user,
        segs[1],
        str(body.get("description", "")),
        parse_tags(tags) if tags else (),
        tracing is True if "tracing" in body else None,  # absent: as it was
    )
    return Response(201 if created else 204)


async def delete_vhost(ctx: Context, req: Request, segs: list[str]) -> Response:
    return Response(204) if ctx.writes.delete_vhost(segs[1]) else not_found()
