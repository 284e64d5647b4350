"""/api/policies and /api/parameters.

Policies are validated by broker.entities.policy (the one validator, shared with `hashbroker ctl set_policy`)
and stored and applied by the broker's engine (`Broker.policies`); this module only shapes the
API's answers: every refusal reason on its own line after "Validation failed", HTML-escaped as
RabbitMQ sends it, and the 500 RabbitMQ answers where its validator crashes.
"""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any

from broker.entities.policy import Policy, PolicyCrash, validation_errors
from broker.management.http import Request, Response
from broker.management.render import bad_request, json_body, key_missing, not_found

if TYPE_CHECKING:
    from broker.management.api import Api


class RefusedPolicy(Exception):
    """A policy the API refuses: `response` is the answer."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status)
        self.response = response

    @property
    def reason(self) -> str:
        """The refusal as text (RabbitMQ's `reason`; its crashes have none)."""
        if not self.response.body:
            return f"refused with status {self.response.status}"
        return str(json.loads(self.response.body).get("reason", ""))


def policy_from_body(vhost: str, name: str, body: dict[str, Any]) -> Policy:
    """The policy a PUT body (or a definitions entry) describes; RefusedPolicy as RabbitMQ refuses it."""
    missing = key_missing(body, "pattern", "definition")
    if missing is not None:
        raise RefusedPolicy(missing)
    pattern, definition = body["pattern"], body["definition"]
    priority, apply_to = body.get("priority", 0), body.get("apply-to", "all")
    if not isinstance(definition, dict):
        raise RefusedPolicy(Response(500))  # rabbit_policy crashes on a non-object definition
    try:
        errors = validation_errors(pattern, definition, priority, apply_to)
    except PolicyCrash:
        raise RefusedPolicy(Response(500)) from None
    if errors:
        reason = html.escape("\n".join(errors), quote=False)
        raise RefusedPolicy(bad_request(f"Validation failed\n\n{reason}\n"))
    return Policy(name, pattern, definition, priority, apply_to, vhost)


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
        policy = policy_from_body(vhost, name, body)
    except RefusedPolicy as refused:
        return refused.response
    return Response(201 if api.policies.put(policy) else 204)


async def delete_policy(api: Api, req: Request, segs: list[str]) -> Response:
    # RabbitMQ answers 204 for a policy that does not exist too
    if not api.state.has_vhost(segs[1]):
        return not_found()
    api.policies.delete(segs[1], segs[2])
    return Response(204)


async def get_parameters(api: Api, req: Request, segs: list[str]) -> Response:
    """Runtime parameters (federation upstreams, shovels): hashbroker has no component that uses them."""
    return Response.json([])
