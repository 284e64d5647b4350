"""The checks and the error mapping the write handlers of several resources share.

A handler reads as: refuse what it may not do (`vhost_refusal` or `vhost_body`, then
`render.key_missing`), then run the write through `write_response`, which turns the broker's AMQP
error into the API's answer.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from broker.management.context import Context
from broker.management.http import Request, Response
from broker.management.render import access_refused, json_body, not_found, operation_failed
from broker.management.writes import AmqpOpError


def vhost_refusal(ctx: Context, req: Request, vhost: str) -> Response | None:
    """404 for a vhost that does not exist, then 403 for a user without access to it; None: go on."""
    if not ctx.state.has_vhost(vhost):
        return not_found()
    if not ctx.may_use_vhost(req, vhost):
        return access_refused()
    return None


def may_act_on(ctx: Context, req: Request, owner: str) -> bool:
    """rabbit_mgmt_util:is_authorized_user for a connection or channel of `owner`: the caller's own,
    anyone's to look at for a monitor, anyone's to close (DELETE) for an administrator only."""
    who = ctx.who(req)
    return owner == req.user or (who.is_admin if req.method == "DELETE" else who.is_monitor)


def vhost_body(ctx: Context, req: Request, vhost: str) -> dict[str, Any] | Response:
    """The JSON body of a write into `vhost`, or what refuses it: `vhost_refusal`, then a body
    that is not a JSON object."""
    refusal = vhost_refusal(ctx, req, vhost)
    return refusal if refusal is not None else json_body(req)


async def write_response(write: Awaitable[object], status: int = 204) -> Response:
    """Run a write; a channel or connection error it raises becomes the API's operation_failed."""
    try:
        await write
    except AmqpOpError as exc:
        return operation_failed(exc.code, exc.text)
    return Response(status)
