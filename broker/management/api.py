"""RabbitMQ-shaped management HTTP API (the subset monitoring tools and test suites use).

Field names, status codes and error bodies were taken from a live RabbitMQ 3.10.8 management
plugin, so clients written against RabbitMQ (rabbitmqadmin, Prometheus exporters, test helpers
that poll /api/queues) work unchanged. A request is routed (broker.management.routes: 404/405 come
before authentication, as in cowboy), authenticated, authorised (broker.management.authz) and then
handled by its resource's view module (broker.management.views), which is given the shared
`broker.management.context.Context`.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from urllib.parse import unquote

from broker.management import authz, dashboard, paging
from broker.management.context import Context
from broker.management.http import Request, Response
from broker.management.ports import PolicyAdmin
from broker.management.render import CHALLENGE, columns, login_failed, not_authorised, not_found
from broker.management.routes import allow_header, match, unknown_path


class Api:
    """Routes requests to handlers; everything runs on the broker's event loop."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @property
    def policies(self) -> PolicyAdmin:
        """The policy engine the API stores and reads policies in: the broker's own."""
        return self.ctx.writes.policies

    async def handle(self, req: Request) -> Response:
        segments = split_path(req.raw_path)
        if not segments or segments[0] != "api":
            # the dashboard page and its assets are public; the page's JS authenticates to /api
            page = dashboard.serve(req.method, segments)
            return page if page is not None else not_found()
        refused = self.check(req) if not req.user else None  # the server checks the head already
        if refused is not None:
            return refused
        handler, _rule, _allowed = match(req.method, segments[1:], self.ctx.state.enabled_plugins())
        assert handler is not None  # check() answered 404/405 otherwise
        resource = paging.paged_resource(segments[1:])
        paged = req.method in ("GET", "HEAD") and resource is not None
        try:
            pages = paging.pagination(req) if paged else None
        except paging.PagingError as exc:
            return exc.response()
        with self.ctx.writes.acting(req.user):
            resp = await handler(self.ctx, req, segments[1:])
        if req.method in ("GET", "HEAD") and (paged or "sort" in req.query or "sort_reverse" in req.query):
            try:
                resp = _sorted_and_paged(req, resp, resource or "", pages)
            except paging.PagingError as exc:
                return exc.response()
        return columns(req, resp)

    def check(self, req: Request) -> Response | None:
        """Route, authenticate and authorise `req` (sets req.user): the refusal, or None to proceed.

        Called as soon as the request head has arrived, so a refused request's body is never read.
        """
        segments = split_path(req.raw_path)
        if not segments or segments[0] != "api":
            # the public pages take no body: anything but a read is answered before one is read
            return None if req.method in ("GET", "HEAD") else not_found()
        handler, rule, allowed = match(req.method, segments[1:], self.ctx.state.enabled_plugins())
        if handler is None or rule is None:
            if allowed:
                # cowboy answers OPTIONS itself, before any authentication: 200 and the methods
                status = 200 if req.method == "OPTIONS" else 405
                return Response(status, b"", {"allow": allow_header(allowed)})
            return unknown_path(req.method)
        if rule.level is authz.Level.PUBLIC:
            return None
        auth = self.authenticate(req)
        state = self.ctx.state
        if isinstance(auth, Response):
            if req.headers.get("authorization", "").lower().startswith("basic "):
                state.count_login(False)  # credentials given and refused (none given: not counted)
            return auth
        req.user, req.password = auth
        reason = authz.refusal(state.registry, self.ctx.who(req), rule, segments[1:], state.vhost_keys)
        # RabbitMQ counts the attempt once the user, its tags and the resource's rule are checked
        state.count_login(reason is None)
        if reason is not None:
            return not_authorised(reason)
        if req.method in ("PUT", "POST") and not acceptable_content_type(req, segments[1]):
            return Response(415)
        return None

    def authenticate(self, req: Request) -> tuple[str, str] | Response:
        """HTTP basic auth against the broker's users, with RabbitMQ's loopback-user rule."""
        header = req.headers.get("authorization", "")
        if not header.lower().startswith("basic "):
            return Response(401, b"", dict(CHALLENGE))
        try:
            user, _, password = base64.b64decode(header[6:].strip()).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return login_failed()
        if not self.ctx.state.check_credentials(user, password):
            return login_failed()
        if self.ctx.state.is_loopback_user(user) and not _is_loopback(req.peer_host):
            return login_failed("User can only log in via localhost")
        return user, password


_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_MEDIA_TYPE = re.compile(rf"\s*({_TOKEN})/({_TOKEN})\s*(;.*)?", re.DOTALL)
_DEFINITIONS_TYPES = {("application", "json"), ("multipart", "form-data")}


def _sorted_and_paged(
    req: Request, resp: Response, resource: str, page: paging.Pagination | None
) -> Response:
    """A list answer sorted as RabbitMQ sorts it, and paged when `page` asks for it."""
    if resp.status != 200 or not isinstance(resp.payload, list):
        return resp
    items = paging.sort_items(resp.payload, req)
    if page is not None:
        return Response.json(paging.page_items(items, page, resource), headers=_extra_headers(resp))
    return Response.json(items, headers=_extra_headers(resp))


def _extra_headers(resp: Response) -> dict[str, str]:
    return {k: v for k, v in resp.headers.items() if k not in ("content-type", "cache-control")}


def acceptable_content_type(req: Request, resource: str) -> bool:
    """cowboy_rest's content_types_accepted as the management plugin declares it (observed live).

    Definitions imports take only JSON or a multipart form upload (text/plain or form-encoded: 415);
    the other resources decode the body as JSON whatever its declared type, refusing only a
    Content-Type that is not a media type at all.
    """
    value = req.headers.get("content-type")
    if value is None:
        return resource != "definitions"
    m = _MEDIA_TYPE.fullmatch(value)
    if m is None:
        return False
    return resource != "definitions" or (m[1].lower(), m[2].lower()) in _DEFINITIONS_TYPES


def split_path(raw_path: str) -> list[str]:
    """Percent-decoded path segments ("/" inside a name arrives as %2F and stays in its segment)."""
    segments = [unquote(s) for s in raw_path.split("/")[1:]]
    if segments and segments[-1] == "" and len(segments) > 1:
        segments.pop()
    return segments


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return host in ("localhost", "")
