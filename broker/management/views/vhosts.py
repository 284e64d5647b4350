"""/api/vhosts: list, create, delete, and switch the firehose tracer (`tracing`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.entities.users import parse_tags
from broker.management.http import Request, Response
from broker.management.render import (
    bad_request,
    json_body,
    not_found,
    with_rates,
)

if TYPE_CHECKING:
    from broker.management.api import Api


_BOOLEANS = {"true": True, "false": False}


def fmt_vhost(api: Api, name: str) -> dict[str, Any]:
    qs = api.state.queues(name)
    ready = sum(q.messages_ready for q in qs)
    unacked = sum(q.messages_unacknowledged for q in qs)
    description = "Default virtual host" if name == "/" else ""
    d: dict[str, Any] = {
        "cluster_state": {api.state.node_name: "running"},
        "default_queue_type": "undefined",
        "description": description,
        "messages": ready + unacked,
        "messages_ready": ready,
        "messages_unacknowledged": unacked,
        "metadata": {"description": description, "tags": []},
        "name": name,
        "tags": [],
        "tracing": api.state.broker.vhosts[name].tracing,
    }
    stats = api.state.vhost_stats(name)
    if stats is not None:  # as RabbitMQ: none before any activity
        d["message_stats"] = with_rates(dict(stats), *stats, rates=api.state.vhost_rates(name))
    return with_rates(d, "messages", "messages_ready", "messages_unacknowledged")


async def get_vhosts(api: Api, req: Request, segs: list[str]) -> Response:
    if len(segs) == 2:
        return Response.json(fmt_vhost(api, segs[1])) if api.state.has_vhost(segs[1]) else not_found()
    seen = api.visible_vhosts(req, monitors=True)
    return Response.json([fmt_vhost(api, v) for v in api.state.vhost_names() if v in seen])


async def put_vhost(api: Api, req: Request, segs: list[str]) -> Response:
    body = json_body(req) if req.body else {}
    if isinstance(body, Response):
        return body
    tracing = body.get("tracing")
    if isinstance(tracing, str):
        tracing = _BOOLEANS.get(tracing, tracing)
    if "tracing" in body and not isinstance(tracing, bool):  # rabbit_mgmt_util:parse_bool
        return bad_request(["not_boolean", body["tracing"]])
    tags = body.get("tags", ())
    created = api.state.broker.add_vhost(
        segs[1], str(body.get("description", "")), parse_tags(tags) if tags else ()
    )
    if created:  # rabbit_vhost:add grants the creating user full permissions
        auth = api.state.broker.auth
        if req.user in auth.users and (segs[1], req.user) not in auth.permissions:
            auth.set_permissions(segs[1], req.user, ".*", ".*", ".*")
    if "tracing" in body:  # rabbit_trace:start/stop; absent: as it was
        api.state.broker.vhosts[segs[1]].set_tracing(tracing is True)
    return Response(201 if created else 204)


async def delete_vhost(api: Api, req: Request, segs: list[str]) -> Response:
    return Response(204) if api.state.broker.delete_vhost(segs[1]) else not_found()
