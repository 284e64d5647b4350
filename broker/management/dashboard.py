"""Serves the management web UI (`broker/management/static/`) at `/` on the management port.

Plain files, no build step: HTML, CSS and JavaScript modules, all public (they hold no data); the
page's JavaScript calls the authenticated `/api/...` endpoints with the credentials from its login
form, so the UI can do what the user could do with rabbitmqadmin and nothing more.

Every response carries a Content-Security-Policy that allows scripts, styles and requests from this
origin only and no inline script or style attribute, so a name the broker hands back (queue names
can contain anything) could not run as code even if a page put it in as markup.
"""

from __future__ import annotations

import glob
import shutil
from functools import cache
from pathlib import Path

from broker.management.http import Response

STATIC_DIR = Path(__file__).resolve().parent / "static"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}


_ASSETS: dict[str, bytes] = {}


def _asset(name: str) -> bytes | None:
    """A file directly in static/, read once. Only names that exist are ever cached, so requests
    for made-up names (404s) cannot grow memory; the lookup by exact name rules out traversal."""
    if not _ASSETS:
        for path in STATIC_DIR.iterdir():
            if path.is_file() and path.suffix in CONTENT_TYPES:
                _ASSETS[path.name] = path.read_bytes()
    return _ASSETS.get(name)


RABBITMQADMIN_PLACES = (
    "/usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins/rabbitmq_management-*/priv/www/cli/rabbitmqadmin",
)


@cache
def rabbitmqadmin() -> bytes | None:
    """The rabbitmqadmin script RabbitMQ serves at /cli/rabbitmqadmin, when this machine has one
    (on the PATH or in an installed management plugin): hashbroker does not ship RabbitMQ's."""
    candidates = [shutil.which("rabbitmqadmin") or ""]
    for pattern in RABBITMQADMIN_PLACES:
        candidates += sorted(glob.glob(pattern), reverse=True)
    for candidate in candidates:
        path = Path(candidate)
        if candidate and path.is_file():
            try:
                return path.read_bytes()
            except OSError:
                continue
    return None


def serve(method: str, segments: list[str]) -> Response | None:
    """`/` -> index.html, `/static/NAME` -> that asset, `/cli/rabbitmqadmin` -> the script when
    there is one; None for anything else (a 404)."""
    if method not in ("GET", "HEAD"):
        return None
    if segments == ["cli", "rabbitmqadmin"]:
        script = rabbitmqadmin()
        if script is None:
            return None
        return Response(200, script, {"content-type": "application/octet-stream", **SECURITY_HEADERS})
    if segments in ([], [""]):
        name = "index.html"
    elif len(segments) == 2 and segments[0] == "static":
        name = segments[1]
    else:
        return None
    body = _asset(name)
    if body is None:
        return None
    headers = {
        "content-type": CONTENT_TYPES[Path(name).suffix],
        "cache-control": "no-cache",
        **SECURITY_HEADERS,
    }
    return Response(200, body, headers)
