"""OPTIONS and an unsupported method on known management paths, against RabbitMQ 3.10.8: OPTIONS
is 200 (before any authentication) and another method 405, both with the path's methods in the
allow header in RabbitMQ's order (HEAD, GET, PUT, POST, DELETE, OPTIONS)."""

from __future__ import annotations

import base64
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from broker.embedded import BrokerThread
from tests.differential.test_stream_management_differential import RABBIT_MGMT_PORT, _live_reason

PATHS = [
    "/api/overview",
    "/api/definitions",
    "/api/queues/%2F/allow-test-none",
    "/api/queues/%2F/allow-test-none/contents",
    "/api/queues/%2F/allow-test-none/get",
    "/api/exchanges/%2F/amq.direct/publish",
    "/api/bindings/%2F/e/amq.direct/q/allow-test-none",
    "/api/connections/allow-test-none",
    "/api/stream/connections",
    "/api/stream/connections/%2F/allow-test-none",
    "/api/stream/connections/%2F/allow-test-none/consumers",
]


def _answer(port: int, method: str, path: str, auth: bool) -> tuple[int, str | None]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    if auth:
        req.add_header("authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers.get("allow")
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("allow")


@pytest.fixture(scope="module")
def mgmt_port() -> Iterator[int]:
    with BrokerThread(host="127.0.0.1", port=0, management_port=0, stream_port=0) as b:
        assert b.broker.management is not None
        yield int(b.broker.management.port)


@pytest.mark.live
@pytest.mark.parametrize("path", PATHS)
def test_allow_header_as_rabbitmq(mgmt_port: int, path: str) -> None:
    if (reason := _live_reason()) is not None:
        pytest.skip(reason)
    for method, auth in (("OPTIONS", True), ("OPTIONS", False), ("PATCH", True)):
        theirs = _answer(RABBIT_MGMT_PORT, method, path, auth)
        assert theirs[1], (method, path, theirs)
        assert _answer(mgmt_port, method, path, auth) == theirs, (method, auth)
