"""The management port refuses hostile input as RabbitMQ 3.10.8's cowboy does (compared live):
JSON nested deeply or out of a double's range is a 400 "not_json" (never a 500 with a traceback),
an oversized header value or too many headers a 431, an oversized request line a 414; a connection
that sends no request is closed after 5 s, one that has made a request is kept (cowboy's timeouts).
"""

from __future__ import annotations

import base64
import socket
import time
from collections.abc import Iterator

import pytest

from broker.embedded import BrokerThread
from tests import conftest

AUTH = base64.b64encode(b"guest:guest").decode()


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerThread]:
    with BrokerThread(port=0, management_port=0) as bt:
        yield bt


def rabbit_port() -> int:
    return int(str(conftest.RABBITMQ_API).rsplit(":", 1)[1])


def exchange(port: int, method: str, path: str, body: bytes = b"", extra: str = "") -> tuple[int, bytes]:
    """One raw request: (status, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        head = (
            f"{method} {path} HTTP/1.1\r\nhost: x\r\nauthorization: Basic {AUTH}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n{extra}\r\n"
        )
        s.sendall(head.encode() + body)
        data = b""
        while True:
            chunk = s.recv(65536)
            data += chunk
            head_bytes, sep, rest = data.partition(b"\r\n\r\n")
            if sep:
                lengths = [h for h in head_bytes.split(b"\r\n") if h.lower().startswith(b"content-length:")]
                length = int(lengths[0].split(b":")[1]) if lengths else 0
                if len(rest) >= length:
                    return int(head_bytes.split(b" ")[1]), rest[:length]
            if not chunk:
                raise AssertionError(f"connection closed mid-answer: {data[:200]!r}")


BODIES = {
    "nested arrays": b"[" * 100_000 + b"]" * 100_000,
    "nested arrays 2000": b"[" * 2_000 + b"]" * 2_000,
    "exponent out of range": b'{"durable":1e999999}',
    "NaN": b'{"durable":NaN}',
    "Infinity": b'{"durable":-Infinity}',
}


@pytest.mark.parametrize("name", list(BODIES))
def test_json_bombs_are_not_json(broker: BrokerThread, rabbitmq_url: str, name: str) -> None:
    path = "/api/queues/%2F/hardening-never-created"
    ours = exchange(broker.broker.management.port, "PUT", path, BODIES[name])
    theirs = exchange(rabbit_port(), "PUT", path, BODIES[name])
    assert ours == theirs == (400, b'{"error":"bad_request","reason":"not_json"}')


def test_deeply_nested_object_is_refused_not_crashed(broker: BrokerThread) -> None:
    """RabbitMQ's decoder takes 100,000 nested objects (and ignores the unknown key); Python's
    cannot, and answers 400 not_json rather than failing with a traceback."""
    body = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    status, answer = exchange(broker.broker.management.port, "PUT", "/api/queues/%2F/hardening-deep", body)
    assert (status, answer) == (400, b'{"error":"bad_request","reason":"not_json"}')
    status, _ = exchange(broker.broker.management.port, "POST", "/api/definitions", body)
    assert status == 400


@pytest.mark.parametrize(
    ("what", "extra", "path", "status"),
    [
        ("70 KB header", "x-big: " + "a" * 70_000 + "\r\n", "/api/overview", 431),
        ("8 KB header value", "x-big: " + "a" * 8_000 + "\r\n", "/api/overview", 431),
        ("4 KB header value", "x-big: " + "a" * 4_000 + "\r\n", "/api/overview", 200),
        ("101 headers", "".join(f"x-h{i}: 1\r\n" for i in range(99)), "/api/overview", 431),
        ("100 headers", "".join(f"x-h{i}: 1\r\n" for i in range(96)), "/api/overview", 200),
        ("10 KB request line", "", "/api/overview?" + "a" * 10_000, 414),
        ("7.9 KB request line", "", "/api/overview?" + "a" * 7_900, 200),
    ],
)
def test_head_limits_as_rabbitmq(
    broker: BrokerThread, rabbitmq_url: str, what: str, extra: str, path: str, status: int
) -> None:
    ours = exchange(broker.broker.management.port, "GET", path, extra=extra)[0]
    theirs = exchange(rabbit_port(), "GET", path, extra=extra)[0]
    assert ours == theirs == status


def closed_after(port: int, *, request_first: bool, limit: float) -> float | None:
    """Seconds until the server closes an idle connection (None if still open after `limit`)."""
    with socket.create_connection(("127.0.0.1", port), timeout=limit + 5) as s:
        if request_first:
            s.sendall(b"GET /api/auth HTTP/1.1\r\nhost: x\r\n\r\n")
            time.sleep(0.3)
            s.recv(65536)
        start = time.monotonic()
        s.settimeout(limit)
        try:
            while s.recv(65536):
                pass
        except TimeoutError:
            return None
        return time.monotonic() - start


@pytest.mark.slow
def test_idle_connections_closed_as_rabbitmq(broker: BrokerThread) -> None:
    waited = closed_after(broker.broker.management.port, request_first=False, limit=15)
    assert waited is not None and 4.5 <= waited <= 6.5
    assert closed_after(broker.broker.management.port, request_first=True, limit=7) is None
