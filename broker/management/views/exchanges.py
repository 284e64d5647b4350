"""/api/exchanges: list, declare, delete, publish, and hashbroker's ring view of a hash exchange."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from broker.entities.info import ExchangeView
from broker.entities.message_stats import exchange_stats
from broker.management.context import Context
from broker.management.http import Request, Response
from broker.management.render import (
    access_refused,
    bad_request,
    body_bool,
    exchange_name,
    flag,
    formatted,
    has_null,
    json_body,
    key_missing,
    not_found,
    with_rates,
)
from broker.management.values import json_value, table_to_json
from broker.management.views.guards import vhost_body, vhost_refusal, write_response
from broker.management.writes import AmqpOpError, ExchangeSpec, PropertyTypeError


def fmt_exchange(ctx: Context, e: ExchangeView, detail: bool = False) -> dict[str, Any]:
    d: dict[str, Any] = {
        "arguments": table_to_json(e.arguments),
        "auto_delete": e.auto_delete,
        "durable": e.durable,
        "internal": e.internal,
        "name": e.name,
        **({"policy": e.policy} if e.policy is not None else {}),
        "type": e.type,
        "user_who_performed_action": declared_by(ctx, e),
        "vhost": e.vhost,
    }
    stats = exchange_stats(e.publish_in, e.publish_out)
    if stats:  # as RabbitMQ: only once the exchange took a publish
        rates = ctx.state.exchange_rates(e.vhost, e.name)
        d["message_stats"] = with_rates(stats, *stats, rates=rates)
    if detail:
        d["incoming"] = []
        d["outgoing"] = []
    return d


#: Exchanges every vhost has from birth; RabbitMQ reports them as declared by "rmq-internal".
_PREDECLARED_PREFIX = "amq."


def declared_by(ctx: Context, e: ExchangeView) -> str:
    """Who declared `e` as RabbitMQ reports it: the predeclared ones "rmq-internal", any other the
    default user (hashbroker does not record the declaring user)."""
    internal_origin = e.name == "" or e.name.startswith(_PREDECLARED_PREFIX)
    return "rmq-internal" if internal_origin else ctx.state.default_user


async def get_exchanges(ctx: Context, req: Request, segs: list[str]) -> Response:
    if len(segs) >= 2 and not ctx.state.has_vhost(segs[1]):
        return not_found()
    if len(segs) == 3:
        e = ctx.state.exchange(segs[1], exchange_name(segs[2]))
        return Response.json(fmt_exchange(ctx, e, detail=True)) if e is not None else not_found()
    vhost = segs[1] if len(segs) == 2 else None
    seen = ctx.visible_vhosts(req)
    exchanges = [e for e in ctx.state.exchanges(vhost) if e.vhost in seen]
    return Response.json(await formatted(exchanges, lambda e: fmt_exchange(ctx, e)))


async def put_exchange(ctx: Context, req: Request, segs: list[str]) -> Response:
    vhost, name = segs[1], exchange_name(segs[2])
    if (refusal := vhost_refusal(ctx, req, vhost)) is not None:
        return refusal
    if name == "" or name.startswith("amq."):
        return access_refused()
    body = json_body(req)
    if isinstance(body, Response):
        return body
    existed = ctx.state.exchange(vhost, name) is not None
    spec = ExchangeSpec(
        name,
        body.get("type") or "direct",
        body_bool(body, "durable"),
        body_bool(body, "auto_delete"),
        body_bool(body, "internal"),
        body.get("arguments") or {},
    )
    declare = ctx.writes.declare_exchange(req, vhost, spec)
    return await write_response(declare, 204 if existed else 201)


async def delete_exchange(ctx: Context, req: Request, segs: list[str]) -> Response:
    vhost, name = segs[1], exchange_name(segs[2])
    if ctx.state.has_vhost(vhost) and not ctx.may_use_vhost(req, vhost):
        return access_refused()
    if name == "" or name.startswith("amq."):
        return access_refused()
    if ctx.state.exchange(vhost, name) is None:
        return not_found()
    return await write_response(ctx.writes.delete_exchange(req, vhost, name, flag(req, "if-unused")))


async def publish(ctx: Context, req: Request, segs: list[str]) -> Response:
    vhost, name = segs[1], exchange_name(segs[2])
    body = vhost_body(ctx, req, vhost)
    if isinstance(body, Response):
        return body
    if (refusal := key_missing(body, "routing_key", "properties", "payload", "payload_encoding")) is not None:
        return refusal
    enc = body["payload_encoding"]
    if enc == "string":
        payload = str(body["payload"]).encode("utf-8")
    elif enc == "base64":
        try:
            payload = base64.b64decode(str(body["payload"]), validate=True)
        except binascii.Error:
            return bad_request("not_base64")
    else:
        return bad_request(["unsupported_encoding", enc])
    props = body["properties"] if isinstance(body["properties"], dict) else {}
    if has_null(props):
        return bad_request("null_not_allowed")
    try:
        routed = await ctx.writes.publish(req, vhost, name, str(body["routing_key"]), props, payload)
    except PropertyTypeError as exc:
        return bad_request([exc.tag, exc.name])
    except AmqpOpError as exc:
        return bad_request(f"{exc.code} {exc.text}")
    return Response.json({"routed": bool(routed)})


async def get_ring(ctx: Context, req: Request, segs: list[str]) -> Response:
    """GET /api/hashbroker/exchanges/{vhost}/{name}/ring: the routing state for the dashboard.

    For x-consistent-hash: the ring's runs (`segments`: [first, count, kind, name]), plus
    per-destination bucket counts, the share of messages the weights predict, and each
    queue's current message count.
    """
    vhost, name = segs[2], exchange_name(segs[3])
    e = ctx.state.exchange(vhost, name)
    state = ctx.state.routing_state(vhost, name)
    if e is None or state is None:
        return not_found()
    summary = {str(k): json_value(v) for k, v in state.items()}
    raw = summary.get("segments")
    segments: list[Any] = raw if isinstance(raw, list) else []
    total = sum(count for _first, count, _kind, _dest in segments)
    queues = {q.name: q for q in ctx.state.queues(vhost)}
    destinations = []
    for first, count, kind, dest in segments:
        q = queues.get(dest) if kind == "queue" else None
        destinations.append(
            {
                "kind": kind,
                "name": dest,
                "buckets": count,
                "first_bucket": first,
                "share": count / total if total else 0.0,
                "messages": (q.messages_ready + q.messages_unacknowledged) if q is not None else None,
            }
        )
    destinations.sort(key=lambda d: d["first_bucket"])
    return Response.json(
        {
            "vhost": vhost,
            "name": name,
            "type": e.type,
            "arguments": table_to_json(e.arguments),
            "state": summary,
            "ring_size": total,
            "destinations": destinations,
        }
    )
