"""The management API's HTTP/1.1 server: h11 parses, asyncio streams carry the bytes.

h11 (sans-I/O, pure Python) does the framing, so the rules that matter for safety are its
well-tested ones: a conflicting or non-numeric Content-Length is a 400, as is any malformed head;
keep-alive and pipelining follow RFC 7230. What this module adds is the order RabbitMQ's cowboy
keeps: the request head is routed and authenticated (`check`) before any body byte is read, so an
unauthenticated upload costs nothing (answered, then the connection is closed); a body is read
only up to MAX_BODY_BYTES; and slow or idle clients are cut off (`Timeouts`).

h11 is imported when a server starts, not with this module, so the AMQP-only start-up path
does not pay for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    import ssl

    import h11

log = logging.getLogger("hashbroker.management.http")

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 16 * 1024 * 1024  # enough for a publish of a large message from the UI


MAX_HEADER_VALUE = 4096
"""cowboy's max_header_value_length: a longer header value is answered 431 (RabbitMQ's own edge
moves a little with how the head arrives: measured at 4,295 bytes for a head sent at once)."""
MAX_HEADERS = 100
"""cowboy's max_headers: the 101st header is a 431."""
MAX_REQUEST_LINE = 8000
"""cowboy's max_request_line_length: a longer request line is a 414."""


@dataclass(frozen=True)
class Timeouts:
    """How long a client may take. `first`: from connecting to a first request (cowboy's
    request_timeout, 5 s as measured on RabbitMQ); `idle`: between requests on a kept-alive
    connection (60 s, as measured); `head`: from a request's first byte to its last header; a body
    must arrive at `min_body_rate` bytes per second or more after a grace of `body` seconds (a slow
    upload is fine, a trickle is not)."""

    first: float = 5.0
    idle: float = 60.0
    head: float = 10.0
    body: float = 10.0
    min_body_rate: int = 64 * 1024


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
        """The body decoded as JSON ({} when empty); ValueError when it is not JSON RabbitMQ's
        decoder would take (NaN/Infinity, numbers out of a double's range) or is nested too deeply
        for this decoder (RabbitMQ answers those 400 "not_json" too)."""
        return decode_json(self.body) if self.body.strip() else {}


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number out of range: {text[:20]}")
    return value


def _no_constant(text: str) -> Any:
    raise ValueError(f"not JSON: {text}")


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _replace_lone_surrogates(value: Any) -> Any:
    """A `\\ud800` escape with no pair is U+FFFD, as RabbitMQ's decoder makes it (a lone surrogate
    would otherwise become a name no answer can encode)."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_replace_lone_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_replace_lone_surrogates(k): _replace_lone_surrogates(v) for k, v in value.items()}
    return value


def decode_json(data: bytes) -> Any:
    """Strict JSON: ValueError (never RecursionError) for anything that is not plain JSON."""
    try:
        value = json.loads(data.decode("utf-8"), parse_float=_finite, parse_constant=_no_constant)
        return _replace_lone_surrogates(value) if _SURROGATE_ESCAPE.search(data) else value
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


ENCODE_BATCH = 1000
"""List items JSON-encoded between two yields to the event loop (a long list is encoded in
batches, so a 100k-binding answer does not hold up the broker's other work)."""


@dataclass
class Response:
    """An answer. A JSON one keeps its `payload` (sorting, paging and `?columns=` work on it); a
    long list's body is encoded later, in batches (`encode_body`), by the server."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    payload: Any = None
    deferred: bool = False

    @classmethod
    def json(cls, payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        h = {"content-type": "application/json", "cache-control": "no-cache"}
        h.update(headers or {})
        if isinstance(payload, list) and len(payload) > ENCODE_BATCH:
            return cls(status, b"", h, payload, deferred=True)
        return cls(status, _dumps(payload), h, payload)


def _dumps(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


async def encode_body(resp: Response) -> None:
    """Encode a deferred list body, yielding to the loop between batches of ENCODE_BATCH items."""
    if not resp.deferred:
        return
    items = resp.payload
    parts = [b"["]
    for start in range(0, len(items), ENCODE_BATCH):
        chunk = _dumps(items[start : start + ENCODE_BATCH])
        parts.append(chunk[1:-1] if start == 0 else b"," + chunk[1:-1])
        await asyncio.sleep(0)
    parts.append(b"]")
    resp.body = b"".join(parts)
    resp.deferred = False


Handler = Callable[[Request], Awaitable[Response]]
Check = Callable[[Request], "Response | None"]


class HttpError(Exception):
    """The client broke the protocol or a limit: answer `status` with an empty body and close."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def request_from_head(event: h11.Request, peer_host: str) -> Request:
    """Our Request for an h11 request head (the body is filled in once read)."""
    target = event.target.decode("ascii", "replace")
    parts = urlsplit(target)
    headers: dict[str, str] = {}
    for name, value in event.headers:
        headers[name.decode("latin-1")] = value.decode("latin-1")
    return Request(
        event.method.decode("ascii").upper(), parts.path, parse_qs(parts.query), headers, b"", peer_host
    )


def check_head(event: h11.Request) -> None:
    """cowboy's limits on a request head: HttpError 414 or 431 past them."""
    if len(event.method) + len(event.target) + len(" HTTP/1.1") + 1 > MAX_REQUEST_LINE:
        raise HttpError(414)
    if len(event.headers) > MAX_HEADERS or any(len(value) > MAX_HEADER_VALUE for _n, value in event.headers):
        raise HttpError(431)


def declared_length(req: Request) -> int | None:
    """The Content-Length h11 validated (None for a chunked body)."""
    value = req.headers.get("content-length")
    return int(value) if value is not None else None


def error_bytes(status: int) -> bytes:
    """A bare error answer after which the connection closes (cowboy's 400: no body)."""
    reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else ""
    return f"HTTP/1.1 {status} {reason}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n".encode("latin-1")


class HttpServer:
    """Serves `handler` on host:port; `port` is the bound port (useful with port 0).

    `check(request)` runs on the request head before the body is read: a Response it returns is sent
    instead of calling `handler`.
    """

    def __init__(
        self,
        handler: Handler,
        check: Check | None = None,
        *,
        timeouts: Timeouts | None = None,
        max_body: int = MAX_BODY_BYTES,
    ) -> None:
        self.handler = handler
        self.check = check
        self.timeouts = timeouts or Timeouts()
        self.max_body = max_body
        self.port = 0
        self.tls_port = 0
        self._servers: list[asyncio.Server] = []
        self._clients: set[asyncio.Task[None]] = set()

    async def start(
        self, host: str, port: int, *, tls: ssl.SSLContext | None = None, tls_handshake_timeout: float = 5.0
    ) -> None:
        """Listen on `port`; with `tls`, speak HTTPS there (RabbitMQ's management.ssl listener),
        a TLS handshake bounded by `tls_handshake_timeout`. Both kinds may run side by side."""
        import h11  # noqa: F401  (paid here, once, rather than on every broker start)

        if tls is None:
            server = await asyncio.start_server(self._client, host, port, reuse_address=True)
        else:
            server = await asyncio.start_server(
                self._client,
                host,
                port,
                reuse_address=True,
                ssl=tls,
                ssl_handshake_timeout=tls_handshake_timeout,
            )
        self._servers.append(server)
        bound = server.sockets[0].getsockname()[1]
        if tls is None:
            self.port = bound
        else:
            self.tls_port = bound

    async def close(self) -> None:
        if not self._servers:
            return
        for server in self._servers:
            server.close()
        for task in list(self._clients):
            task.cancel()
        await asyncio.gather(*self._clients, return_exceptions=True)
        for server in self._servers:
            await server.wait_closed()
        self._servers = []

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)
        peer = writer.get_extra_info("peername")
        peer_host = str(peer[0]) if isinstance(peer, tuple) else ""
        try:
            await _Exchange(self, reader, writer, peer_host).serve()
        except HttpError as exc:
            with contextlib.suppress(ConnectionError):
                writer.write(error_bytes(exc.status))
                await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            self._clients.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


@dataclass
class _Exchange:
    """One client connection: h11 state plus the socket, request after request."""

    server: HttpServer
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    peer: str
    h11: Any = field(init=False)
    conn: h11.Connection = field(init=False)
    loop: asyncio.AbstractEventLoop = field(init=False, default_factory=asyncio.get_running_loop)

    def __post_init__(self) -> None:
        import h11

        self.h11 = h11
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)

    async def serve(self) -> None:
        h11 = self.h11
        t = self.server.timeouts
        idle = min(t.first, t.idle)  # nothing sent yet: the shorter wait
        while True:
            event = await self._next(idle=idle, deadline=None)
            idle = t.idle
            if isinstance(event, h11.ConnectionClosed):
                return
            assert isinstance(event, h11.Request)
            check_head(event)
            req = request_from_head(event, self.peer)
            if "transfer-encoding" not in req.headers and not declared_length(req):
                req.body = await self._body()  # h11's EndOfMessage of a bodiless request
            try:
                refused = self.server.check(req) if self.server.check is not None else None
            except Exception:
                log.exception("management request %s %s failed", req.method, req.raw_path)
                refused = Response.json({"error": "internal_error", "reason": "internal error"}, 500)
            if refused is not None:
                await self._send(req, refused)
                if not self._request_read():
                    return  # the body stays unread: nothing more can be framed on this connection
            else:
                length = declared_length(req)
                if length is not None and length > self.server.max_body:
                    raise HttpError(413)
                if not self._request_read():
                    if self.conn.they_are_waiting_for_100_continue:
                        self._write(self.conn.send(h11.InformationalResponse(status_code=100, headers=[])))
                    req.body = await self._body()
                try:
                    resp = await self.server.handler(req)
                except Exception:
                    log.exception("management request %s %s failed", req.method, req.raw_path)
                    resp = Response.json({"error": "internal_error", "reason": "internal error"}, 500)
                await self._send(req, resp)
            if self.conn.our_state is h11.MUST_CLOSE or self.conn.their_state is not h11.DONE:
                return
            self.conn.start_next_cycle()

    def _request_read(self) -> bool:
        """Whether the current request has been read to its end (so a next one could follow)."""
        return self.conn.their_state in (self.h11.DONE, self.h11.MUST_CLOSE)

    async def _body(self) -> bytes:
        h11 = self.h11
        t = self.server.timeouts
        started = self.loop.time()
        parts: list[bytes] = []
        size = 0
        while True:
            # the body must keep ahead of min_body_rate, after a grace of Timeouts.body
            deadline = started + t.body + size / t.min_body_rate
            event = await self._next(idle=None, deadline=deadline)
            if isinstance(event, h11.Data):
                size += len(event.data)
                if size > self.server.max_body:
                    raise HttpError(413)
                parts.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return b"".join(parts)
            else:
                raise HttpError(400)

    async def _next(self, *, idle: float | None, deadline: float | None) -> Any:
        """The next h11 event. Waiting for a new request: up to `idle` for its first byte, then
        Timeouts.head for the rest of its head; inside a body: until `deadline`."""
        h11 = self.h11
        while True:
            try:
                event = self.conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise HttpError(exc.error_status_hint) from None
            if event is not h11.NEED_DATA:
                return event
            if deadline is None:
                wait = idle if idle is not None else self.server.timeouts.head
            else:
                wait = deadline - self.loop.time()
            if wait <= 0:
                raise TimeoutError
            data = await asyncio.wait_for(self.reader.read(65536), wait)
            if deadline is None:  # the request has begun: its head must now arrive in time
                deadline = self.loop.time() + self.server.timeouts.head
                idle = None
            self.conn.receive_data(data)  # b"" is the end of input: h11 tells a clean close from a cut

    async def _send(self, req: Request, resp: Response) -> None:
        h11 = self.h11
        await encode_body(resp)
        headers = [("server", "hashbroker"), *resp.headers.items()]
        if resp.status != 204 and resp.status >= 200:
            headers.append(("content-length", str(len(resp.body))))
        if not self._request_read():
            headers.append(("connection", "close"))
        reason = HTTPStatus(resp.status).phrase if resp.status in HTTPStatus._value2member_map_ else ""
        self._write(self.conn.send(h11.Response(status_code=resp.status, headers=headers, reason=reason)))
        if resp.body and req.method != "HEAD" and resp.status != 204:
            self._write(self.conn.send(h11.Data(data=resp.body)))
        self._write(self.conn.send(h11.EndOfMessage()))
        await self.writer.drain()

    def _write(self, data: bytes | None) -> None:
        if data:
            self.writer.write(data)
