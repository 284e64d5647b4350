"""One management API request for the tests that drive hashbroker's and RabbitMQ's HTTP API alike."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.embedded import BrokerThread

GUEST = "guest:guest"


def call(base: str, method: str, path: str, body: Any = None, auth: str | None = GUEST) -> tuple[int, Any]:
    """(status, body): the body decoded from JSON, or as text when it is not JSON, or None when
    empty. `auth` None sends no credentials."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    if auth is not None:
        req.add_header("authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    if data is not None:
        req.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=15) as resp:
            raw, status = resp.read(), resp.status
    except urllib.error.HTTPError as err:
        raw, status = err.read(), err.code
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode("utf-8", "replace")


def q(s: str) -> str:
    """A path segment: a name with every reserved character quoted (`/` too)."""
    return urllib.parse.quote(s, safe="")


def mgmt_base(b: BrokerThread) -> str:
    """The management API's base URL of an embedded broker started with `management_port=0`."""
    assert b.broker.management is not None
    return f"http://127.0.0.1:{b.broker.management.port}"


@contextlib.contextmanager
def management_on_loop(b: BrokerThread) -> Iterator[str]:
    """A management server on the broker's own loop (as Broker.start runs it); yields its base URL."""
    from broker.management import ManagementServer, start_management

    loop = b.loop
    assert loop is not None
    server: ManagementServer = asyncio.run_coroutine_threadsafe(
        start_management(b.broker, "127.0.0.1", 0), loop
    ).result(10)
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(10)


@contextlib.contextmanager
def confirming_channel(data_dir: Path, **settings: Any) -> Iterator[tuple[BrokerThread, Any]]:
    """An embedded hashbroker with management on `data_dir` (stopped cleanly on exit, so that a
    second one on the same directory is a restart) and a confirming pika channel to it."""
    import pika

    from broker.embedded import BrokerThread

    with BrokerThread(host="127.0.0.1", port=0, management_port=0, data_dir=str(data_dir), **settings) as b:
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        try:
            ch = conn.channel()
            ch.confirm_delivery()
            yield b, ch
        finally:
            with contextlib.suppress(Exception):
                conn.close()


def take_all(ch: Any, queue: str) -> list[tuple[bytes, dict[str, Any]]]:
    """(body, headers) of every message of `queue`, taken with auto-ack, on a pika channel."""
    out = []
    while True:
        method, props, body = ch.basic_get(queue, auto_ack=True)
        if method is None:
            return out
        out.append((body, props.headers or {}))
