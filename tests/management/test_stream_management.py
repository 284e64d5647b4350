"""/api/stream/* on hashbroker with real stream-protocol clients: what the lists and the single
connection show, who may see what (a management user sees its own connections, a monitor every
one; the vhost list needs access to the vhost), the 404s, and /api/overview's connection count.
(tests/differential/test_stream_management_differential.py compares the fields with RabbitMQ.)"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from rstream import Consumer, ConsumerOffsetSpecification, MessageContext, OffsetType, Producer

from broker.embedded import BrokerThread
from tests.management_support import call, mgmt_base, q

STREAM = "stream2-mgmt"


class Clients:
    """A producer (one message published) and a consumer (it read it) kept open on their own
    event loop while the test asks the management API."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.ready = threading.Event()
        self.stop: asyncio.Event | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    async def _run(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.stop = asyncio.Event()
        got = asyncio.Event()

        async def on_message(msg: bytes, ctx: MessageContext) -> None:
            got.set()

        producer = Producer(
            "127.0.0.1", port=self.port, username="guest", password="guest", connection_name="p"
        )
        consumer = Consumer(
            "127.0.0.1", port=self.port, username="guest", password="guest", connection_name="c"
        )
        await producer.start()
        await producer.create_stream(STREAM, exists_ok=True)
        await producer.send_wait(STREAM, b"one")
        await consumer.start()
        await consumer.subscribe(
            STREAM, on_message, offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None)
        )
        await asyncio.wait_for(got.wait(), 10)
        await asyncio.sleep(0.2)  # the consumer's credit for the chunk comes back
        self.ready.set()
        await self.stop.wait()
        await consumer.close()
        await producer.close()

    def __enter__(self) -> Clients:
        self.thread.start()
        assert self.ready.wait(20), "the stream clients did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.loop is not None and self.stop is not None
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(10)


@pytest.fixture(scope="module")
def running() -> Iterator[tuple[str, BrokerThread]]:
    with BrokerThread(host="127.0.0.1", port=0, management_port=0, stream_port=0) as b:
        base = mgmt_base(b)
        assert b.broker.stream_server is not None
        assert (
            call(base, "PUT", "/api/users/stream2-watcher", {"password": "pw", "tags": "monitoring"})[0]
            == 201
        )
        assert (
            call(base, "PUT", "/api/users/stream2-plain", {"password": "pw", "tags": "management"})[0] == 201
        )
        with Clients(b.broker.stream_server.port):
            yield base, b


def _ours(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(
        (r for r in rows if r["client_properties"].get("connection_name") in ("p", "c")),
        key=lambda r: str(r["client_properties"]["connection_name"]),
    )


def test_connections_publishers_and_consumers(running: tuple[str, BrokerThread]) -> None:
    base, b = running
    status, conns = call(base, "GET", "/api/stream/connections")
    assert status == 200
    mine = _ours(conns)
    assert [c["user_provided_name"] for c in mine] == ["c", "p"]
    port = b.broker.stream_server.port  # type: ignore[union-attr]
    for c in mine:
        assert c["protocol"] == "stream" and c["port"] == port and c["vhost"] == "/" and c["user"] == "guest"
        assert c["name"] == f"{c['peer_host']}:{c['peer_port']} -> {c['host']}:{c['port']}"
        assert c["frame_max"] == 1048576 and c["timeout"] == 60 and c["auth_mechanism"] == "PLAIN"
        assert c["recv_oct"] > 0 and c["send_oct"] > 0 and c["ssl_protocol"] is None
    status, pubs = call(base, "GET", "/api/stream/publishers")
    assert status == 200
    (pub,) = [p for p in pubs if p["queue"]["name"] == STREAM]
    assert (pub["published"], pub["confirmed"], pub["errored"], pub["reference"]) == (1, 1, 0, "")
    assert pub["connection_details"]["name"] == mine[1]["name"]
    status, cons = call(base, "GET", "/api/stream/consumers/%2F")
    (con,) = [c for c in cons if c["queue"]["name"] == STREAM]
    assert (con["consumed"], con["offset"], con["offset_lag"], con["credits"]) == (1, 0, 0, 10)
    assert con["connection_details"]["name"] == mine[0]["name"]
    assert len(call(base, "GET", f"/api/stream/publishers/%2F/{STREAM}")[1]) == 1
    assert call(base, "GET", "/api/stream/publishers/%2F/stream2-none")[0] == 404


def test_one_connection(running: tuple[str, BrokerThread]) -> None:
    base, _b = running
    consumer, producer = _ours(call(base, "GET", "/api/stream/connections")[1])
    path = f"/api/stream/connections/%2F/{q(producer['name'])}"
    status, one = call(base, "GET", path)
    assert status == 200 and one["name"] == producer["name"] and one["ssl_protocol"] == ""
    assert [p["publisher_id"] for p in call(base, "GET", path + "/publishers")[1]] == [0]
    assert call(base, "GET", path + "/consumers")[1] == []
    path = f"/api/stream/connections/%2F/{q(consumer['name'])}"
    assert [c["subscription_id"] for c in call(base, "GET", path + "/consumers")[1]] == [0]
    assert call(base, "GET", f"/api/stream/connections/stream2-none/{q(producer['name'])}")[0] == 404
    assert call(base, "GET", "/api/stream/connections/%2F/nobody")[0] == 404
    assert call(base, "GET", "/api/stream/connections/%2F/nobody/publishers")[0] == 404
    assert call(base, "GET", "/api/stream/connections/stream2-none")[0] == 404


def test_who_sees_what(running: tuple[str, BrokerThread]) -> None:
    base, _b = running
    _, producer = _ours(call(base, "GET", "/api/stream/connections")[1])
    watcher, plain = "stream2-watcher:pw", "stream2-plain:pw"
    assert len(_ours(call(base, "GET", "/api/stream/connections", auth=watcher)[1])) == 2
    assert len([p for p in call(base, "GET", "/api/stream/publishers", auth=watcher)[1]]) >= 1
    # a management user sees its own connections only (none), and not guest's one by name
    assert call(base, "GET", "/api/stream/connections", auth=plain) == (200, [])
    assert call(base, "GET", "/api/stream/publishers", auth=plain) == (200, [])
    assert call(base, "GET", "/api/stream/consumers/%2F", auth=plain) == (200, [])
    status, body = call(base, "GET", f"/api/stream/connections/%2F/{q(producer['name'])}", auth=plain)
    assert status == 401 and body["reason"] == "User not authorised to access object"
    # the vhost's connection list needs access to the vhost (it has no permission there)
    assert call(base, "GET", "/api/stream/connections/%2F", auth=plain)[0] == 401
    assert call(base, "GET", "/api/stream/connections", auth=None)[0] == 401


def test_overview_counts_stream_connections(running: tuple[str, BrokerThread]) -> None:
    base, _b = running
    totals = call(base, "GET", "/api/overview")[1]["object_totals"]
    # /api/connections lists the stream connections too, as RabbitMQ does
    assert totals["connections"] == len(call(base, "GET", "/api/connections")[1])
    assert totals["connections"] >= 2
