"""/api/definitions: export and import (the document format lives in broker.management.definitions)."""

from __future__ import annotations

from typing import Any

from broker.management import definitions as definitions_doc
from broker.management.context import Context
from broker.management.http import Request, Response, decode_json
from broker.management.render import (
    bad_request,
    flag,
    not_found,
)
from broker.management.views.users import perms_rows, user_rows
from broker.management.writes import DefinitionError


async def get_definitions(ctx: Context, req: Request, segs: list[str]) -> Response:
    vhost = segs[1] if len(segs) == 2 else None
    if vhost is not None and not ctx.state.has_vhost(vhost):
        return not_found()
    doc = definitions_doc.export(ctx.state, user_rows(ctx), perms_rows(ctx), vhost)
    headers = {}
    if flag(req, "download") or "download" in req.query:
        name = req.query.get("download", ["definitions.json"])[-1] or "definitions.json"
        headers["content-disposition"] = f'attachment; filename="{name}"'
    return Response.json(doc, 200, headers)


async def post_definitions(ctx: Context, req: Request, segs: list[str]) -> Response:
    """Import; 204 like RabbitMQ. Refused as a whole (400, nothing changed) if unsupported."""
    vhost = segs[1] if len(segs) == 2 else None
    if vhost is not None and not ctx.state.has_vhost(vhost):
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
            doc = decode_json(doc["file"].encode("utf-8"))
        except ValueError:
            return bad_request("not_json")
    plan = definitions_doc.plan_import(ctx.state, doc, vhost)
    if plan.reason is not None:
        return bad_request(plan.reason)  # RabbitMQ's own refusal of the first such item
    if plan.problems:
        return bad_request("hashbroker cannot import these definitions:\n" + "\n".join(plan.problems))
    try:
        await ctx.writes.import_definitions(req, plan)
    except DefinitionError as exc:
        return bad_request(f"{exc.item}: {exc.explanation}")
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
            return decode_json(payload) if isinstance(payload, bytes) else None
    return None
