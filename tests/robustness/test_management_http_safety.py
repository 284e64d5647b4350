"""The management HTTP server under hostile clients, over real sockets.

Credentials are checked before any body byte is read (unauthenticated uploads are answered 401 at
once and cost no memory), framing errors are 400 and close, slow and idle clients are cut off, and
JSON endpoints refuse the content types RabbitMQ refuses (live-compared).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from broker.embedded import BrokerThread
from broker.management.http import HttpServer, Request, Response, Timeouts
from tests import conftest
from tests.conftest import rabbitmq_reachable

GUEST = "Basic " + base64.b64encode(b"guest:guest").decode()
SIXTEEN_MIB = 16 * 1024 * 1024


def rss() -> int:
    with open("/proc/self/statm") as fh:
        import os

        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def exchange(port: int, raw: bytes, body: bytes = b"", wait: float = 5.0) -> tuple[bytes, bool]:
    """Send `raw` (then `body`, tolerating a server that stops reading it); everything the server
    answered and whether it closed the connection (False: still open after `wait` seconds)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(wait)
    out = b""
    try:
        s.sendall(raw)
        if body:
            with contextlib.suppress(OSError):  # answered and closed without reading: the point
                s.sendall(body)
        while chunk := s.recv(65536):
            out += chunk
        return out, True
    except ConnectionResetError:
        return out, True
    except TimeoutError:
        return out, False
    finally:
        s.close()


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerThread]:
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        yield b


def mport(b: BrokerThread) -> int:
    return int(b.broker.management.port)


def test_unauthenticated_upload_is_refused_before_its_body(broker: BrokerThread) -> None:
    head = f"POST /api/definitions HTTP/1.1\r\nhost: x\r\ncontent-length: {SIXTEEN_MIB}\r\n\r\n".encode()
    started = time.monotonic()
    answer, closed = exchange(mport(broker), head)  # no body byte sent at all
    assert answer.startswith(b"HTTP/1.1 401 ")
    assert b'www-authenticate: Basic realm="RabbitMQ Management"' in answer
    assert closed and time.monotonic() - started < 2


def test_uploads_to_the_public_pages_are_refused_before_their_body(broker: BrokerThread) -> None:
    head = f"POST /static/app.js HTTP/1.1\r\nhost: x\r\ncontent-length: {SIXTEEN_MIB}\r\n\r\n".encode()
    answer, closed = exchange(mport(broker), head)
    assert answer.startswith(b"HTTP/1.1 404 ") and closed


def test_wrong_password_upload_is_refused_before_its_body(broker: BrokerThread) -> None:
    auth = "Basic " + base64.b64encode(b"guest:wrong").decode()
    head = f"POST /api/definitions HTTP/1.1\r\nhost: x\r\nauthorization: {auth}\r\n"
    head += f"content-type: application/json\r\ncontent-length: {SIXTEEN_MIB}\r\n\r\n"
    answer, closed = exchange(mport(broker), head.encode())
    assert answer.startswith(b"HTTP/1.1 401 ") and answer.endswith(
        b'{"error":"not_authorized","reason":"Login failed"}'
    )
    assert closed


def test_sixty_unauthenticated_16_mib_posts_leave_memory_flat(broker: BrokerThread) -> None:
    body = b"x" * SIXTEEN_MIB
    head = f"POST /api/definitions HTTP/1.1\r\nhost: x\r\ncontent-length: {SIXTEEN_MIB}\r\n\r\n".encode()
    before = rss()
    for _ in range(60):
        answer, _closed = exchange(mport(broker), head, body)
        assert answer.startswith(b"HTTP/1.1 401 ")
    assert rss() - before < 100 * 1024 * 1024


@pytest.mark.parametrize("lengths", [("2", "5"), ("1_0",), ("abc",)])
def test_bad_content_length_is_400_and_closes(broker: BrokerThread, lengths: tuple[str, ...]) -> None:
    head = f"PUT /api/vhosts/cl-test HTTP/1.1\r\nhost: x\r\nauthorization: {GUEST}\r\n"
    head += "".join(f"content-length: {n}\r\n" for n in lengths) + "\r\n{}"
    answer, closed = exchange(mport(broker), head.encode())
    assert answer == b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"
    assert closed
    assert "cl-test" not in broker.broker.vhosts  # the body was not run as a request either


def test_an_authorised_upload_over_the_limit_is_413(broker: BrokerThread) -> None:
    head = f"POST /api/definitions HTTP/1.1\r\nhost: x\r\nauthorization: {GUEST}\r\n"
    head += f"content-type: application/json\r\ncontent-length: {SIXTEEN_MIB + 1}\r\n\r\n"
    answer, closed = exchange(mport(broker), head.encode())
    assert answer.startswith(b"HTTP/1.1 413 ") and closed


class SmallServer:
    """An HttpServer with short timeouts on its own loop thread (the broker's are 60 s / 10 s)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.server = HttpServer(
            self.handle, timeouts=Timeouts(idle=0.5, head=0.5, body=0.5, min_body_rate=1024)
        )
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    @staticmethod
    async def handle(req: Request) -> Response:
        return Response.json({"got": len(req.body)})

    def __enter__(self) -> int:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start("127.0.0.1", 0), self.loop).result(5)
        return self.server.port

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def closed_within(port: int, send: list[bytes], pause: float, limit: float) -> float:
    """Seconds until the server closes a client that sends `send` piece by piece, `pause` apart."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(limit)
    started = time.monotonic()
    try:
        for piece in send:
            s.sendall(piece)
            time.sleep(pause)
        while s.recv(65536):
            pass
    except (ConnectionResetError, BrokenPipeError):
        pass
    finally:
        s.close()
    return time.monotonic() - started


def test_idle_and_slow_clients_are_timed_out() -> None:
    with SmallServer() as port:
        assert closed_within(port, [], 0, 5) < 2  # connected, never sent a byte
        slowloris = [b"G", b"E", b"T", b" ", b"/", b" ", b"H", b"T", b"T", b"P", b"/", b"1"]
        assert closed_within(port, slowloris, 0.2, 5) < 2  # head trickled byte by byte
        trickle = [b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 100000\r\n\r\n"] + [b"x"] * 20
        assert closed_within(port, trickle, 0.2, 10) < 2  # body far below the minimum rate


def test_keep_alive_serves_requests_one_after_another() -> None:
    with SmallServer() as port:
        s = socket.create_connection(("127.0.0.1", port))
        s.settimeout(5)
        two = b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 3\r\n\r\nabcGET / HTTP/1.1\r\nhost: x\r\n\r\n"
        s.sendall(two)
        out = b""
        while not out.endswith(b'{"got":0}'):
            out += s.recv(65536)
        s.close()
        assert b'{"got":3}' in out and b'{"got":0}' in out


CONTENT_TYPE_CASES = [  # (method, path, content type or None, body)
    ("POST", "/api/definitions", "text/plain", b"{}"),
    ("POST", "/api/definitions", "application/x-www-form-urlencoded", b"{}"),
    ("POST", "/api/definitions", None, b"{}"),
    ("POST", "/api/definitions", "application/json", b"{}"),
    ("PUT", "/api/vhosts/ct-test", "garbage", b"{}"),
    ("PUT", "/api/vhosts/ct-test", "text/plain", b"{}"),
    ("DELETE", "/api/vhosts/ct-test", None, b""),
]


def answers(port: int) -> list[tuple[int, bytes]]:
    import http.client

    out = []
    for method, path, ctype, body in CONTENT_TYPE_CASES:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        headers = {"authorization": GUEST}
        if ctype is not None:
            headers["content-type"] = ctype
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        out.append((resp.status, resp.read()))
        conn.close()
    return out


@pytest.mark.live
def test_json_endpoints_refuse_content_types_as_rabbitmq(broker: BrokerThread) -> None:
    if not rabbitmq_reachable():
        pytest.skip("the reference RabbitMQ is not reachable on 127.0.0.1:5672")
    theirs = answers(int(conftest.RABBITMQ_API.rsplit(":", 1)[1]))
    assert [s for s, _b in theirs] == [415, 415, 415, 204, 415, 201, 204]
    assert answers(mport(broker)) == theirs
