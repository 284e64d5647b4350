"""/api/bindings and the per-exchange/per-queue binding lists; bindings are addressed by properties key."""

from __future__ import annotations

from typing import Any

from broker.entities.info import BindingView
from broker.management.context import Context
from broker.management.definitions import binding_json
from broker.management.http import Request, Response
from broker.management.render import (
    access_refused,
    exchange_name,
    formatted,
    json_body,
    not_found,
    operation_failed,
    quote_segment,
)
from broker.management.values import properties_key, table_to_json
from broker.management.views.guards import write_response
from broker.management.writes import AmqpOpError


def fmt_binding(b: BindingView) -> dict[str, Any]:
    return {**binding_json(b), "properties_key": properties_key(b.routing_key, b.arguments)}


async def get_bindings(ctx: Context, req: Request, segs: list[str]) -> Response:
    if len(segs) == 2 and not ctx.state.has_vhost(segs[1]):
        return not_found()
    vhost = segs[1] if len(segs) == 2 else None
    seen = ctx.visible_vhosts(req)
    return Response.json(
        await formatted([b for b in ctx.state.bindings(vhost) if b.vhost in seen], fmt_binding)
    )


async def get_queue_bindings(ctx: Context, req: Request, segs: list[str]) -> Response:
    vhost, name = segs[1], segs[2]
    if ctx.state.queue(vhost, name) is None:
        return not_found()
    return Response.json(
        [
            fmt_binding(b)
            for b in ctx.state.bindings(vhost)
            if b.destination_type == "queue" and b.destination == name
        ]
    )


async def get_exchange_bindings(ctx: Context, req: Request, segs: list[str]) -> Response:
    vhost, name, side = segs[1], exchange_name(segs[2]), segs[4]
    if ctx.state.exchange(vhost, name) is None or name == "":
        return not_found()
    bs = ctx.state.bindings(vhost)
    if side == "source":
        picked = [b for b in bs if b.source == name]
    else:
        picked = [b for b in bs if b.destination_type == "exchange" and b.destination == name]
    return Response.json([fmt_binding(b) for b in picked])


async def get_binding_pair(ctx: Context, req: Request, segs: list[str]) -> Response:
    """GET /api/bindings/{vhost}/e/{source}/{q|e}/{destination}[/{props}]."""
    vhost, source, kind, dest = segs[1], exchange_name(segs[3]), segs[4], segs[5]
    dtype = "queue" if kind == "q" else "exchange"
    if ctx.state.exchange(vhost, source) is None:
        return not_found()
    found = [
        fmt_binding(b)
        for b in ctx.state.bindings(vhost)
        if b.source == source and b.destination == dest and b.destination_type == dtype
    ]
    if len(segs) == 7:
        one = [b for b in found if b["properties_key"] == segs[6]]
        return Response.json(one[0]) if one else not_found()
    return Response.json(found)


async def post_binding(ctx: Context, req: Request, segs: list[str]) -> Response:
    vhost, source, kind, dest = segs[1], exchange_name(segs[3]), segs[4], segs[5]
    if kind not in ("q", "e"):
        return not_found()
    if not ctx.state.has_vhost(vhost):
        return Response.json({"error": "not_found", "reason": "vhost_not_found"}, 404)
    if not ctx.may_use_vhost(req, vhost):
        return access_refused()
    body = json_body(req)
    if isinstance(body, Response):
        return body
    key = str(body.get("routing_key", ""))
    args = body.get("arguments") or {}
    try:
        await ctx.writes.bind(
            req,
            vhost,
            source,
            dest,
            "queue" if kind == "q" else "exchange",
            key,
            args,
        )
    except AmqpOpError as exc:
        if exc.code == 404:
            return not_found()
        return operation_failed(exc.code, exc.text)
    made = [
        b
        for b in ctx.state.bindings(vhost)
        if b.source == source
        and b.destination == dest
        and b.routing_key == key
        and table_to_json(b.arguments) == args
    ]
    props = properties_key(made[0].routing_key, made[0].arguments) if made else ""
    parts = [
        "/api/bindings",
        quote_segment(vhost),
        "e",
        quote_segment(segs[3]),
        kind,
        quote_segment(dest),
    ]
    location = "/".join([*parts, props]) if props else "/".join(parts)
    return Response(201, b"", {"location": location})


async def delete_binding(ctx: Context, req: Request, segs: list[str]) -> Response:
    vhost, source, kind, dest, props = segs[1], exchange_name(segs[3]), segs[4], segs[5], segs[6]
    if ctx.state.has_vhost(vhost) and not ctx.may_use_vhost(req, vhost):
        return access_refused()
    dtype = "queue" if kind == "q" else "exchange"
    match = [
        b
        for b in ctx.state.bindings(vhost)
        if b.source == source
        and b.destination == dest
        and b.destination_type == dtype
        and properties_key(b.routing_key, b.arguments) == props
    ]
    if not match:
        return not_found()
    b = match[0]
    args = table_to_json(b.arguments)
    return await write_response(
        ctx.writes.bind(req, vhost, source, dest, dtype, b.routing_key, args, remove=True)
    )
