"""/api/definitions: export and import (the document format lives in broker.management.definitions)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from broker.entities.users import User, parse_tags
from broker.management import definitions as definitions_doc
from broker.management.http import Request, Response
from broker.management.render import (
    bad_request,
    flag,
    not_found,
)
from broker.management.views.users import fmt_user, perms_rows
from broker.management.writes import DefinitionError

if TYPE_CHECKING:
    from broker.management.api import Api


async def get_definitions(api: Api, req: Request, segs: list[str]) -> Response:
    vhost = segs[1] if len(segs) == 2 else None
    if vhost is not None and not api.state.has_vhost(vhost):
        return not_found()
    users = [fmt_user(api, u) for u in api.state.users()]
    doc = definitions_doc.export(api.state, api.policies.list(), users, vhost)
    if vhost is None:
        doc["permissions"] = perms_rows(api)
    headers = {}
    if flag(req, "download") or "download" in req.query:
        name = req.query.get("download", ["definitions.json"])[-1] or "definitions.json"
        headers["content-disposition"] = f'attachment; filename="{name}"'
    return Response.json(doc, 200, headers)


async def post_definitions(api: Api, req: Request, segs: list[str]) -> Response:
    """Import; 204 like RabbitMQ. Refused as a whole (400, nothing changed) if unsupported."""
    vhost = segs[1] if len(segs) == 2 else None
    if vhost is not None and not api.state.has_vhost(vhost):
        return not_found()
    ctype = req.headers.get("content-type", "")
    try:
        doc = uploaded_file(ctype, req.body) if ctype.lower().startswith("multipart/") else req.json()
    except (ValueError, UnicodeDecodeError):
        return bad_request("not_json")
    if doc is None:
        return Response(400)
    if isinstance(doc, dict) and isinstance(doc.get("file"), str):  # the web UI's form upload
        try:
            doc = json.loads(doc["file"])
        except ValueError:
            return bad_request("not_json")
    plan = definitions_doc.plan_import(api.state, doc, vhost)
    if plan.problems:
        return bad_request("hashbroker cannot import these definitions:\n" + "\n".join(plan.problems))
    broker, auth = api.state.broker, api.state.broker.auth
    for u in plan.users:  # rabbit_definitions: users, vhosts, permissions, then the rest
        tags = parse_tags(u.get("tags", ""))
        auth.put_user(User(str(u["name"]), str(u.get("password_hash", "")), tags))
    for v in plan.new_vhosts:
        if broker.add_vhost(v) and req.user in auth.users and (v, req.user) not in auth.permissions:
            auth.set_permissions(v, req.user, ".*", ".*", ".*")
    for p in plan.permissions:
        auth.set_permissions(str(p["vhost"]), str(p["user"]), p["configure"], p["write"], p["read"])
    for vh in plan.vhosts():
        try:
            await api.writes.apply_definitions(
                req,
                vh,
                plan.queues.get(vh, []),
                plan.exchanges.get(vh, []),
                plan.bindings.get(vh, []),
            )
        except DefinitionError as exc:
            return bad_request(f"{exc.item}: {exc.explanation}")
    for policy in plan.policies:  # after the entities, so a refused import adds no policy
        api.policies.put(policy)
    return Response(204)


def uploaded_file(content_type: str, body: bytes) -> Any:
    """The JSON document in the `file` field of a multipart/form-data upload (the web UI's form), or
    None when the form has no such field (RabbitMQ answers a bare 400)."""
    from email.parser import BytesParser
    from email.policy import HTTP

    message = BytesParser(policy=HTTP).parsebytes(
        b"content-type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body
    )
    if not message.is_multipart():
        return None
    for part in message.iter_parts():
        if part.get_param("name", header="content-disposition") == "file":
            payload = part.get_payload(decode=True)
            return json.loads(payload.decode("utf-8")) if isinstance(payload, bytes) else None
    return None
