"""/api/users and /api/permissions: accounts, their tags and their per-vhost permissions."""

from __future__ import annotations

from typing import Any

from broker.entities.users import SHA256, RegexError, User, hash_password, parse_tags
from broker.management.context import Context
from broker.management.http import Request, Response
from broker.management.render import (
    bad_request,
    json_body,
    key_missing,
    not_found,
)


def fmt_user(user: User) -> dict[str, Any]:
    return {
        "name": user.name,
        "password_hash": user.password_hash,
        "hashing_algorithm": user.hashing_algorithm,
        "tags": list(user.tags),
        "limits": {},
    }


def user_rows(ctx: Context) -> list[dict[str, Any]]:
    """Every user as /api/users lists them (the registry's order)."""
    return [fmt_user(u) for name in ctx.state.users() if (u := ctx.state.user(name)) is not None]


async def get_users(ctx: Context, req: Request, segs: list[str]) -> Response:
    if len(segs) == 2:
        user = ctx.state.user(segs[1])
        return Response.json(fmt_user(user)) if user is not None else not_found()
    return Response.json(user_rows(ctx))


async def put_user(ctx: Context, req: Request, segs: list[str]) -> Response:
    body = json_body(req)
    if isinstance(body, Response):
        return body
    name = segs[1]
    if "tags" not in body:
        return bad_request("tags_not_present")
    tags = parse_tags(body["tags"])
    # rabbit_mgmt_wm_user: a password, or a hash, or neither (the user then cannot log in, even if
    # it had a password before: a PUT replaces the whole user)
    password_hash = ""
    credential = "password" if "password" in body else "password_hash" if "password_hash" in body else "none"
    if "password" in body:
        password_hash = hash_password(str(body["password"]))
    elif "password_hash" in body:
        password_hash = str(body["password_hash"])
        algo = body.get("hashing_algorithm", SHA256)
        if algo != SHA256:
            return bad_request(f"hashbroker supports only {SHA256} password hashes")
    return Response(201 if ctx.writes.put_user(User(name, password_hash, tags), credential) else 204)


async def delete_user(ctx: Context, req: Request, segs: list[str]) -> Response:
    return Response(204) if ctx.writes.delete_user(segs[1]) else not_found()


def perms_rows(ctx: Context, vhost: str | None = None, user: str | None = None) -> list[dict[str, Any]]:
    return [
        {"user": u, "vhost": v, "configure": p.configure, "write": p.write, "read": p.read}
        for v, u, p in ctx.state.permissions(vhost, user)
    ]


async def get_permissions(ctx: Context, req: Request, segs: list[str]) -> Response:
    return Response.json(perms_rows(ctx))


async def get_user_permissions(ctx: Context, req: Request, segs: list[str]) -> Response:
    if ctx.state.user(segs[1]) is None:
        return not_found()
    return Response.json(perms_rows(ctx, user=segs[1]))


async def get_vhost_permissions(ctx: Context, req: Request, segs: list[str]) -> Response:
    if not ctx.state.has_vhost(segs[1]):
        return not_found()
    return Response.json(
        [{"vhost": p["vhost"], "user": p["user"], **p} for p in perms_rows(ctx, vhost=segs[1])]
    )


async def get_permission(ctx: Context, req: Request, segs: list[str]) -> Response:
    found = perms_rows(ctx, vhost=segs[1], user=segs[2])
    return Response.json(found[0]) if found else not_found()


async def put_permission(ctx: Context, req: Request, segs: list[str]) -> Response:
    vhost, user = segs[1], segs[2]
    if not ctx.state.has_vhost(vhost) or ctx.state.user(user) is None:
        return bad_request("vhost_or_user_not_found")
    body = json_body(req)
    if isinstance(body, Response):
        return body
    if (refusal := key_missing(body, "configure", "write", "read")) is not None:
        return refusal
    try:
        created = ctx.writes.set_permissions(
            vhost, user, str(body["configure"]), str(body["write"]), str(body["read"])
        )
    except RegexError as exc:
        return bad_request(str(exc))
    return Response(201 if created else 204)


async def delete_permission(ctx: Context, req: Request, segs: list[str]) -> Response:
    return Response(204) if ctx.writes.clear_permissions(segs[1], segs[2]) else not_found()
