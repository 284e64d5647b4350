"""/api/policies and /api/parameters.

Policies are validated by broker.entities.policy (the one validator, shared with `hashbroker ctl
set_policy`), read from a request body as definitions files hold them too
(broker.management.definitions.policy_from_body) and stored and applied by the broker's engine
through broker.management.writes; this module only shapes the API's answers.
"""

from __future__ import annotations

from broker.management.context import Context
from broker.management.definitions import RefusedPolicy, policy_from_body
from broker.management.http import Request, Response
from broker.management.render import json_body, not_found


async def get_policies(ctx: Context, req: Request, segs: list[str]) -> Response:
    if len(segs) >= 2 and not ctx.state.has_vhost(segs[1]):
        return not_found()
    if len(segs) == 3:
        p = ctx.state.policy(segs[1], segs[2])
        return Response.json(p.to_json()) if p is not None else not_found()
    vhost = segs[1] if len(segs) == 2 else None
    seen = ctx.visible_vhosts(req)
    return Response.json([p.to_json() for p in ctx.state.policies(vhost) if p.vhost in seen])


async def put_policy(ctx: Context, req: Request, segs: list[str]) -> Response:
    vhost, name = segs[1], segs[2]
    if not ctx.state.has_vhost(vhost):
        return not_found()
    body = json_body(req)
    if isinstance(body, Response):
        return body
    try:
        policy = policy_from_body(vhost, name, body)
    except RefusedPolicy as refused:
        return refused.response
    return Response(201 if ctx.writes.put_policy(policy) else 204)


async def delete_policy(ctx: Context, req: Request, segs: list[str]) -> Response:
    # RabbitMQ answers 204 for a policy that does not exist too
    if not ctx.state.has_vhost(segs[1]):
        return not_found()
    ctx.writes.delete_policy(segs[1], segs[2])
    return Response(204)


async def get_parameters(ctx: Context, req: Request, segs: list[str]) -> Response:
    """Runtime parameters (federation upstreams, shovels): hashbroker has no component that uses them."""
    return Response.json([])
