"""/api/policies and /api/parameters."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.management.http import Request, Response
from broker.management.policies import PolicyError, parse_policy
from broker.management.render import (
    bad_request,
    json_body,
    not_found,
)

if TYPE_CHECKING:
    from broker.management.api import Api


async def get_policies(api: Api, req: Request, segs: list[str]) -> Response:
    if len(segs) >= 2 and not api.state.has_vhost(segs[1]):
        return not_found()
    if len(segs) == 3:
        p = api.policies.get(segs[1], segs[2])
        return Response.json(p.to_json()) if p is not None else not_found()
    vhost = segs[1] if len(segs) == 2 else None
    seen = api.visible_vhosts(req)
    return Response.json([p.to_json() for p in api.policies.list(vhost) if p.vhost in seen])


async def put_policy(api: Api, req: Request, segs: list[str]) -> Response:
    vhost, name = segs[1], segs[2]
    if not api.state.has_vhost(vhost):
        return not_found()
    body = json_body(req)
    if isinstance(body, Response):
        return body
    try:
        policy = parse_policy(vhost, name, body)
        created = api.policies.put(policy)  # the broker's engine validates again (issue 4)
    except PolicyError as exc:
        return bad_request(str(exc))
    return Response(201 if created else 204)


async def delete_policy(api: Api, req: Request, segs: list[str]) -> Response:
    # RabbitMQ answers 204 for a policy that does not exist too
    if not api.state.has_vhost(segs[1]):
        return not_found()
    api.policies.delete(segs[1], segs[2])
    return Response(204)


async def get_parameters(api: Api, req: Request, segs: list[str]) -> Response:
    """Runtime parameters (federation upstreams, shovels): hashbroker has no component that uses them."""
    return Response.json([])
