"""A deliberately small HTTP/1.1 server on asyncio streams.

The management API needs only request/response JSON with keep-alive, so a ~150 line server keeps
hashbroker free of web-framework dependencies (and of their import time). No chunked request
bodies, no pipelining beyond sequential keep-alive, bounded header and body sizes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

log = logging.getLogger("hashbroker.management.http")

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 16 * 1024 * 1024  # enough for a publish of a large message from the UI
IDLE_TIMEOUT = 60.0


@dataclass
class Request:
    method: str
    raw_path: str  # still percent-encoded: "/" inside names arrives as %2F and must stay a separator
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-cased names
    body: bytes
    peer_host: str
    user: str = ""  # set once basic auth succeeded
    password: str = ""  # kept to open AMQP connections as the same user (user_id checks)

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8")) if self.body.strip() else {}


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        h = {"content-type": "application/json", "cache-control": "no-cache"}
        h.update(headers or {})
        return cls(status, data, h)


Handler = Callable[[Request], Awaitable[Response]]


class HttpError(Exception):
    """Malformed request; answered with `status` and the connection is closed."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class HttpServer:
    """Serves `handler` on host:port; `port` is the bound port (useful with port 0)."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.port = 0
        self._server: asyncio.Server | None = None
        self._clients: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> None:
        self._server = await asyncio.start_server(self._client, host, port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._clients):
            task.cancel()
        await asyncio.gather(*self._clients, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)
        peer = writer.get_extra_info("peername")
        peer_host = str(peer[0]) if isinstance(peer, tuple) else ""
        try:
            while True:
                try:
                    req = await asyncio.wait_for(_read_request(reader, peer_host), IDLE_TIMEOUT)
                except HttpError as exc:
                    await _write(writer, Response(exc.status, b""), "HTTP/1.1", keep_alive=False, head=False)
                    return
                if req is None:
                    return
                try:
                    resp = await self.handler(req)
                except Exception:
                    log.exception("management request %s %s failed", req.method, req.raw_path)
                    resp = Response.json({"error": "internal_error", "reason": "internal error"}, 500)
                keep = req.headers.get("connection", "").lower() != "close"
                await _write(writer, resp, "HTTP/1.1", keep_alive=keep, head=req.method == "HEAD")
                if not keep:
                    return
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._clients.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


async def _read_request(reader: asyncio.StreamReader, peer_host: str) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None  # clean close between requests
        raise HttpError(400) from None
    except asyncio.LimitOverrunError:
        raise HttpError(431) from None
    if len(head) > MAX_HEADER_BYTES:
        raise HttpError(431)
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ")
    except ValueError:
        raise HttpError(400) from None
    if not version.startswith("HTTP/1."):
        raise HttpError(505)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise HttpError(400)
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise HttpError(411)  # management clients always send Content-Length
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise HttpError(400) from None
    if length < 0 or length > MAX_BODY_BYTES:
        raise HttpError(413)
    body = await reader.readexactly(length) if length else b""
    parts = urlsplit(target)
    return Request(method.upper(), parts.path, parse_qs(parts.query), headers, body, peer_host)


async def _write(
    writer: asyncio.StreamWriter, resp: Response, version: str, *, keep_alive: bool, head: bool
) -> None:
    reason = HTTPStatus(resp.status).phrase if resp.status in HTTPStatus._value2member_map_ else ""
    lines = [f"{version} {resp.status} {reason}", "server: hashbroker"]
    headers = dict(resp.headers)
    if resp.status != 204:
        headers["content-length"] = str(len(resp.body))
    if not keep_alive:
        headers["connection"] = "close"
    lines.extend(f"{k}: {v}" for k, v in headers.items())
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    if resp.body and not head and resp.status != 204:
        writer.write(resp.body)
    await writer.drain()
