"""/api/stream/* (rabbitmq_stream_management) against RabbitMQ 3.10.8: one rstream program (a named
producer that publishes one message, a named consumer that reads it) runs against each broker, and
the management API's answers about those connections are reduced to field names, value types and
the values both brokers must agree on (counters, credits, offsets, names, the negotiated limits).

The live broker is shared: only the connections this test opened (by their connection_name) are
looked at, and its overview's connection count can only be checked to include them."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from rstream import Consumer, ConsumerOffsetSpecification, MessageContext, OffsetType, Producer

from broker.server import Broker

RABBIT_STREAM_PORT = 5552
RABBIT_MGMT_PORT = 15672
USER = PASSWORD = "guest"
WAIT = 30.0


def _get(port: int, path: str) -> tuple[int, Any]:
    auth = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/api{path}", headers={"Authorization": f"Basic {auth}"}
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def _live_reason() -> str | None:
    try:
        with socket.create_connection(("127.0.0.1", RABBIT_STREAM_PORT), timeout=1):
            pass
    except OSError:
        return "RabbitMQ's stream port 5552 does not answer: rabbitmq-plugins enable rabbitmq_stream"
    try:
        status, _ = _get(RABBIT_MGMT_PORT, "/stream/connections")
    except OSError:
        return "RabbitMQ's management port 15672 does not answer: rabbitmq-plugins enable rabbitmq_management"
    if status != 200:
        return "no /api/stream/connections: rabbitmq-plugins enable rabbitmq_stream_management"
    return None


def _shape(value: Any) -> Any:
    """Field names and JSON types, recursively for objects (lists: the shape of their first item)."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return ["list", _shape(value[0])] if value else ["list"]
    return type(value).__name__


def _q(path: str) -> str:
    return urllib.parse.quote(path, safe="")


async def program(stream_port: int, mgmt_port: int, prefix: str) -> dict[str, Any]:
    """What the management API says about one producer and one consumer connection."""
    stream = f"{prefix}-s"
    got = asyncio.Event()

    async def on_message(msg: bytes, ctx: MessageContext) -> None:
        got.set()

    producer = Producer(
        "127.0.0.1", port=stream_port, username=USER, password=PASSWORD, connection_name=f"{prefix}-p"
    )
    consumer = Consumer(
        "127.0.0.1", port=stream_port, username=USER, password=PASSWORD, connection_name=f"{prefix}-c"
    )
    await producer.start()
    try:
        await producer.create_stream(stream, exists_ok=True)
        await producer.send_wait(stream, b"one")
        await consumer.start()
        await consumer.subscribe(
            stream, on_message, offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None)
        )
        await asyncio.wait_for(got.wait(), WAIT)
        return await asyncio.to_thread(_observe, mgmt_port, prefix, stream)
    finally:
        await consumer.close()
        await producer.delete_stream(stream, missing_ok=True)
        await producer.close()


def _ours(rows: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    return [
        r
        for r in rows
        if r.get("client_properties", {}).get("connection_name", "").endswith(prefix + "-p")
        or r.get("client_properties", {}).get("connection_name", "").endswith(prefix + "-c")
    ]


def _observe(port: int, prefix: str, stream: str) -> dict[str, Any]:
    """Poll until the counters settled (RabbitMQ's stats arrive every few seconds), then observe."""
    end = time.monotonic() + WAIT
    while True:
        _, conns = _get(port, "/stream/connections")
        _, pubs = _get(port, "/stream/publishers")
        _, cons = _get(port, "/stream/consumers")
        mine = _ours(conns, prefix)
        my_pubs = [p for p in pubs if p["queue"]["name"] == stream]
        my_cons = [c for c in cons if c["queue"]["name"] == stream]
        settled = (
            len(mine) >= 2
            and all("state" in c for c in mine)  # RabbitMQ emitted the connections' statistics
            and all("recv_oct" in c for c in mine)  # and, in a later emission, their socket counters
            and my_pubs
            and my_pubs[0]["confirmed"] == 1
            and my_cons
            and my_cons[0]["consumed"] == 1
            and my_cons[0]["credits"] == 10  # the client's credit for the chunk came back
        )
        if settled or time.monotonic() > end:
            break
        time.sleep(0.5)
    out: dict[str, Any] = {
        "connection names": sorted(
            c["client_properties"]["connection_name"].replace(prefix, "<p>") for c in mine
        ),
        "connection shape": _shape(mine[0]) if mine else None,
        "connection values": sorted(
            json.dumps(
                {
                    k: c[k]
                    for k in (
                        "auth_mechanism",
                        "channel_max",
                        "frame_max",
                        "protocol",
                        "ssl",
                        "timeout",
                        "user",
                        "vhost",
                        "ssl_protocol",
                        "peer_cert_subject",
                    )
                }
                | {
                    "user_provided_name": c["user_provided_name"].replace(prefix, "<p>"),
                    "name is peer -> listener": c["name"]
                    == f"{c['peer_host']}:{c['peer_port']} -> {c['host']}:{c['port']}",
                }
            )
            for c in mine
        ),
        "publishers": [_pub(p, prefix) for p in my_pubs],
        "publisher shape": _shape(my_pubs[0]) if my_pubs else None,
        "consumers": [_con(c, prefix) for c in my_cons],
        "consumer shape": _shape(my_cons[0]) if my_cons else None,
    }
    vhost_conns = _ours(_get(port, "/stream/connections/%2F")[1], prefix)
    out["vhost connections"] = len(vhost_conns)
    out["vhost publishers"] = len(
        [p for p in _get(port, "/stream/publishers/%2F")[1] if p["queue"]["name"] == stream]
    )
    out["vhost consumers"] = len(
        [c for c in _get(port, "/stream/consumers/%2F")[1] if c["queue"]["name"] == stream]
    )
    out["stream publishers"] = len(_get(port, f"/stream/publishers/%2F/{_q(stream)}")[1])
    for c in mine:
        label = c["client_properties"]["connection_name"].replace(prefix, "<p>")
        base = f"/stream/connections/%2F/{_q(c['name'])}"
        status, one = _get(port, base)
        out[f"one {label}"] = [status, _shape(one), one.get("ssl_protocol"), one.get("peer_cert_issuer")]
        out[f"one {label} publishers"] = [_pub(p, prefix) for p in _get(port, base + "/publishers")[1]]
        out[f"one {label} consumers"] = [_con(x, prefix) for x in _get(port, base + "/consumers")[1]]
        out[f"one {label} in another vhost"] = _get(
            port, f"/stream/connections/{prefix}-none/{_q(c['name'])}"
        )[0]
    for path in (
        "/stream/connections/%2F/nobody",
        "/stream/connections/%2F/nobody/publishers",
        f"/stream/connections/{prefix}-none",
        f"/stream/publishers/{prefix}-none",
        f"/stream/consumers/{prefix}-none",
        f"/stream/publishers/%2F/{prefix}-none",
    ):
        out[path.replace(prefix, "<p>")] = _get(port, path)
    status, overview = _get(port, "/overview")
    out["overview counts them"] = status == 200 and overview["object_totals"]["connections"] >= len(mine)
    return out


def _pub(p: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {
        k: (v.replace(prefix, "<p>") if isinstance(v, str) else v)
        for k, v in p.items()
        if k not in ("connection_details", "queue")
    } | {"queue": p["queue"]["name"].replace(prefix, "<p>"), "details": sorted(p["connection_details"])}


def _con(c: dict[str, Any], prefix: str) -> dict[str, Any]:
    return _pub(c, prefix)


@asynccontextmanager
async def _hashbroker() -> AsyncIterator[tuple[Broker, int, int]]:
    with tempfile.TemporaryDirectory() as data_dir:
        broker = Broker(host="127.0.0.1", port=0, data_dir=data_dir, stream_port=0, management_port=0)
        await broker.start()
        try:
            assert broker.stream_server is not None and broker.management is not None
            yield broker, broker.stream_server.port, broker.management.port
        finally:
            await broker.stop()


@pytest.mark.slow  # RabbitMQ emits a connection's first statistics ~10 s after it opened
def test_stream_management_matches_rabbitmq() -> None:
    reason = _live_reason()
    if reason is not None:
        pytest.skip(reason)
    prefix = f"stream2-{uuid.uuid4().hex[:8]}"

    async def hashbroker_side() -> dict[str, Any]:
        async with _hashbroker() as (_broker, stream_port, mgmt_port):
            return await program(stream_port, mgmt_port, prefix)

    theirs = asyncio.run(program(RABBIT_STREAM_PORT, RABBIT_MGMT_PORT, prefix))
    ours = asyncio.run(hashbroker_side())
    assert theirs["connection shape"] is not None, theirs
    assert ours == theirs
