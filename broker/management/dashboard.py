"""Serves the dashboard (`broker/management/static/`) at `/` on the management port.

Plain files, no build step: the page is static and public (it holds no data); its JavaScript calls
the authenticated `/api/...` endpoints with the credentials from its login form (guest/guest
prefilled, like RabbitMQ's management UI on localhost).
"""

from __future__ import annotations

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


@cache
def _asset(name: str) -> bytes | None:
    """File contents, read once; only plain names directly in static/ (no path traversal)."""
    if "/" in name or "\\" in name or name.startswith(".") or Path(name).suffix not in CONTENT_TYPES:
        return None
    path = STATIC_DIR / name
    return path.read_bytes() if path.is_file() else None


def serve(method: str, segments: list[str]) -> Response | None:
    """`/` -> index.html, `/static/NAME` -> that asset; None for anything else (a 404)."""
    if method not in ("GET", "HEAD"):
        return None
    if segments in ([], [""]):
        name = "index.html"
    elif len(segments) == 2 and segments[0] == "static":
        name = segments[1]
    else:
        return None
    body = _asset(name)
    if body is None:
        return None
    headers = {"content-type": CONTENT_TYPES[Path(name).suffix], "cache-control": "no-cache"}
    return Response(200, body, headers)
