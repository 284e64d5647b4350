"""/api/users and /api/permissions: accounts, their tags and their per-vhost permissions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.entities.users import SHA256, RegexError, User, hash_password, parse_tags
from broker.management.http import Request, Response
from broker.management.render import (
    bad_request,
    json_body,
    not_found,
)

if TYPE_CHECKING:
    from broker.management.api import Api


def fmt_user(api: Api, name: str) -> dict[str, Any]:
    u = api.state.broker.auth.users[name]
    return {
        "name": name,
        "password_hash": u.password_hash,
        "hashing_algorithm": u.hashing_algorithm,
        "tags": list(u.tags),
        "limits": {},
    }


async def get_users(api: Api, req: Request, segs: list[str]) -> Response:
    if len(segs) == 2:
        return Response.json(fmt_user(api, segs[1])) if segs[1] in api.state.users() else not_found()
    return Response.json([fmt_user(api, u) for u in api.state.users()])


async def put_user(api: Api, req: Request, segs: list[str]) -> Response:
    body = json_body(req)
    if isinstance(body, Response):
        return body
    auth = api.state.broker.auth
    name = segs[1]
    old = auth.users.get(name)
    if "tags" not in body:
        return bad_request("tags_not_present")
    tags = parse_tags(body["tags"])
    # rabbit_mgmt_wm_user: a password, or a hash, or neither (the user then cannot log in, even if
    # it had a password before: a PUT replaces the whole user)
    password_hash = ""
    if "password" in body:
        password_hash = hash_password(str(body["password"]))
    elif "password_hash" in body:
        password_hash = str(body["password_hash"])
        algo = body.get("hashing_algorithm", SHA256)
        if algo != SHA256:
            return bad_request(f"hashbroker supports only {SHA256} password hashes")
    auth.put_user(User(name, password_hash, tags))
    return Response(204 if old is not None else 201)


async def delete_user(api: Api, req: Request, segs: list[str]) -> Response:
    return Response(204) if api.state.broker.auth.delete_user(segs[1]) else not_found()


def perms_rows(api: Api, vhost: str | None = None, user: str | None = None) -> list[dict[str, Any]]:
    auth = api.state.broker.auth
    return [
        {"user": u, "vhost": v, "configure": p.configure, "write": p.write, "read": p.read}
        for (v, u), p in auth.permissions.items()
        if (vhost is None or v == vhost) and (user is None or u == user)
    ]


async def get_permissions(api: Api, req: Request, segs: list[str]) -> Response:
    return Response.json(perms_rows(api))


async def get_user_permissions(api: Api, req: Request, segs: list[str]) -> Response:
    if segs[1] not in api.state.broker.auth.users:
        return not_found()
    return Response.json(perms_rows(api, user=segs[1]))


async def get_vhost_permissions(api: Api, req: Request, segs: list[str]) -> Response:
    if not api.state.has_vhost(segs[1]):
        return not_found()
    return Response.json(
        [{"vhost": p["vhost"], "user": p["user"], **p} for p in perms_rows(api, vhost=segs[1])]
    )


async def get_permission(api: Api, req: Request, segs: list[str]) -> Response:
    found = perms_rows(api, vhost=segs[1], user=segs[2])
    return Response.json(found[0]) if found else not_found()


async def put_permission(api: Api, req: Request, segs: list[str]) -> Response:
    vhost, user = segs[1], segs[2]
    auth = api.state.broker.auth
    if not api.state.has_vhost(vhost) or user not in auth.users:
        return bad_request("vhost_or_user_not_found")
    body = json_body(req)
    if isinstance(body, Response):
        return body
    missing = [k for k in ("configure", "write", "read") if k not in body]
    if missing:
        return bad_request("[" + ",".join(f"{{key_missing,{k}}}" for k in missing) + "]")
    existed = (vhost, user) in auth.permissions
    try:
        auth.set_permissions(vhost, user, str(body["configure"]), str(body["write"]), str(body["read"]))
    except RegexError as exc:
        return bad_request(str(exc))
    return Response(204 if existed else 201)


async def delete_permission(api: Api, req: Request, segs: list[str]) -> Response:
    return Response(204) if api.state.broker.auth.clear_permissions(segs[1], segs[2]) else not_found()
