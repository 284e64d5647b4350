"""Stream-protocol connections in the management API's connection resources, against RabbitMQ
3.10.8: one program (raw stream clients, two management users of its own) runs against each
broker and records what the API answers and what the clients see.

Observed on 3.10.8: /api/connections, /api/vhosts/{vhost}/connections and /api/connections/{name}
show a stream connection as /api/stream/connections does (protocol "stream", no "type"), with no
channels; DELETE on /api/connections/{name} or /api/stream/connections/{vhost}/{name} answers 204
and the client's socket closes without any frame (no close command, whatever X-Reason says); a
monitoring user may look at someone else's connection but not close it (401), a management user
may do neither.

The live broker is shared: only the connections this program opened are looked at (found by the
client's own port), and its users are removed at the end."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pika
import pytest

from broker.embedded import BrokerThread
from tests.differential.test_stream_management_differential import (
    RABBIT_MGMT_PORT,
    RABBIT_STREAM_PORT,
    _hashbroker,
    _live_reason,
    _shape,
)
from tests.management_support import q
from tests.stream_raw import RawStream

WAIT = 30.0
RABBIT_AMQP_PORT = 5672
VALUES = ("auth_mechanism", "channel_max", "channels", "frame_max", "protocol", "ssl", "user", "vhost")


def _http(
    port: int, method: str, path: str, auth: str = "guest:guest", reason: str = "", body: Any = None
) -> list[Any]:
    """[status, decoded body] of one request (X-Reason sent when `reason` is given; `body` as JSON)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api{path}", data=data, method=method)
    req.add_header("authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    req.add_header("content-type", "application/json")
    if reason:
        req.add_header("x-reason", reason)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as err:
        status, raw = err.code, err.read()
    return [status, json.loads(raw) if raw else None]


class Api:
    """The management API of one broker, called from the program's event loop (the embedded
    hashbroker runs on that same loop, so every request goes through a thread)."""

    def __init__(self, port: int) -> None:
        self.port = port

    async def __call__(
        self, method: str, path: str, auth: str = "guest:guest", reason: str = "", body: Any = None
    ) -> list[Any]:
        return await asyncio.to_thread(_http, self.port, method, path, auth, reason, body)

    async def listed(self, client_port: int) -> dict[str, Any]:
        """The client's connection in /api/connections once its statistics are in (RabbitMQ emits
        them some seconds after the connection opened)."""
        end = time.monotonic() + WAIT
        while True:
            _, rows = await self("GET", "/connections")
            mine = [r for r in rows if r.get("peer_port") == client_port]
            if (mine and "recv_oct" in mine[0] and "state" in mine[0]) or time.monotonic() > end:
                assert mine, f"no connection from port {client_port} in /api/connections"
                return mine[0]
            await asyncio.sleep(0.5)

    async def gone(self, path: str) -> None:
        """Wait until GET `path` answers 404: RabbitMQ drops a closed connection from its statistics
        a moment after the socket closed, so the API may still show it right after the client saw
        the close."""
        end = time.monotonic() + WAIT
        while (await self("GET", path))[0] != 404 and time.monotonic() < end:
            await asyncio.sleep(0.2)


async def _open(stream_port: int) -> tuple[RawStream, int]:
    client = await RawStream.open(stream_port)
    return client, client.writer.get_extra_info("sockname")[1]


async def _until_closed(client: RawStream) -> list[str]:
    """The commands the client receives until its socket closes."""
    got: list[str] = []
    try:
        while True:
            got.append(type(await asyncio.wait_for(client.receive(), WAIT)).__name__)
    except asyncio.IncompleteReadError:
        return [*got, "socket closed"]


async def program(stream_port: int, mgmt_port: int, prefix: str) -> dict[str, Any]:
    api = Api(mgmt_port)
    monitor, manager = f"{prefix}-mon", f"{prefix}-mgmt"
    try:
        return await _observe(api, stream_port, prefix, monitor, manager)
    finally:
        for user in (monitor, manager):
            await api("DELETE", f"/users/{user}")


async def _observe(api: Api, stream_port: int, prefix: str, monitor: str, manager: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for user, tag in ((monitor, "monitoring"), (manager, "management")):
        assert (await api("PUT", f"/users/{user}", body={"password": "pw", "tags": tag}))[0] == 201
    everything = {"configure": ".*", "write": ".*", "read": ".*"}
    assert (await api("PUT", f"/permissions/%2F/{manager}", body=everything))[0] == 201
    client, client_port = await _open(stream_port)
    row = await api.listed(client_port)
    name = row["name"]
    _, streams = await api("GET", "/stream/connections")
    (in_streams,) = [r for r in streams if r["name"] == name]
    out["listed"] = {k: row[k] for k in VALUES} | {
        "has type": "type" in row,
        "ssl_protocol": row["ssl_protocol"],
    }
    out["listed shape"] = _shape(row)
    out["same fields as /api/stream/connections"] = sorted(row) == sorted(in_streams)
    _, in_vhost = await api("GET", "/vhosts/%2F/connections")
    out["in the vhost's list"] = [r["protocol"] for r in in_vhost if r["name"] == name]
    _, columns = await api("GET", "/connections?columns=name,protocol")
    out["columns"] = [[sorted(r), r["protocol"]] for r in columns if r["name"] == name]
    status, one = await api("GET", f"/connections/{q(name)}")
    out["one"] = [status, _shape(one), one["ssl_protocol"], one["peer_cert_subject"], one["protocol"]]
    out["one channels"] = await api("GET", f"/connections/{q(name)}/channels")
    _, overview = await api("GET", "/overview")
    out["overview counts it"] = overview["object_totals"]["connections"] >= 1
    paths = (f"/stream/connections/%2F/{q(name)}", f"/connections/{q(name)}")
    for user in (manager, monitor):
        for path in paths:
            kind = path.split("/")[1]
            out[f"{user.replace(prefix, '<p>')} GET {kind}"] = (await api("GET", path, f"{user}:pw"))[0]
            out[f"{user.replace(prefix, '<p>')} DELETE {kind}"] = await api("DELETE", path, f"{user}:pw")
    out["still open"] = (await api("GET", paths[0]))[0]
    out["DELETE in another vhost"] = await api("DELETE", f"/stream/connections/{prefix}-none/{q(name)}")
    out["DELETE"] = await api("DELETE", paths[0], reason="closed by a differential test")
    out["client sees"] = await _until_closed(client)
    await api.gone(paths[0])
    out["after"] = [
        await api("GET", paths[0]),
        await api("DELETE", paths[0]),
        (await api("GET", paths[1]))[0],
    ]
    # the same through /api/connections/{name}
    client, client_port = await _open(stream_port)
    name = (await api.listed(client_port))["name"]
    out["DELETE /api/connections"] = await api("DELETE", f"/connections/{q(name)}", reason="bye")
    out["its client sees"] = await _until_closed(client)
    await api.gone(f"/connections/{q(name)}")
    out["gone from /api/connections"] = (await api("GET", f"/connections/{q(name)}"))[0]
    return out


Program = Callable[[int, int, str], Awaitable[dict[str, Any]]]


async def _both(program: Program, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    theirs = await program(RABBIT_STREAM_PORT, RABBIT_MGMT_PORT, name)
    async with _hashbroker() as (_broker, stream_port, mgmt_port):
        return theirs, await program(stream_port, mgmt_port, name)


def same_on_both(program: Program, name: str) -> dict[str, Any]:
    """Run `program(stream port, management port, name)` on RabbitMQ, then on an embedded
    hashbroker (skipped, with the plugin to enable, where RabbitMQ cannot serve it); assert both
    records are equal and return RabbitMQ's."""
    if (reason := _live_reason()) is not None:
        pytest.skip(reason)
    theirs, ours = asyncio.run(_both(program, name))
    assert ours == theirs
    return theirs


@pytest.mark.live
@pytest.mark.slow  # RabbitMQ emits a connection's statistics some seconds after it opened
def test_stream_connections_in_connection_resources_match_rabbitmq() -> None:
    theirs = same_on_both(program, f"strclose-{uuid.uuid4().hex[:8]}")
    assert theirs["listed"]["protocol"] == "stream"


def _monitor_and_amqp_connection(amqp_port: int, mgmt_port: int, prefix: str) -> list[Any]:
    """What a monitoring user gets for guest's AMQP connection: [GET status, DELETE answer, whether
    the connection is still open]."""
    user = f"{prefix}-amqp-mon"
    assert _http(mgmt_port, "PUT", f"/users/{user}", body={"password": "pw", "tags": "monitoring"})[0] == 201
    conn = pika.BlockingConnection(
        pika.ConnectionParameters("127.0.0.1", amqp_port, client_properties={"connection_name": prefix})
    )
    try:
        end = time.monotonic() + WAIT
        while (
            not (
                names := [
                    r["name"]
                    for r in _http(mgmt_port, "GET", "/connections")[1]
                    if r.get("user_provided_name") == prefix
                ]
            )
            and time.monotonic() < end
        ):
            time.sleep(0.5)
        path = f"/connections/{q(names[0])}"
        seen = _http(mgmt_port, "GET", path, f"{user}:pw")[0]
        return [seen, _http(mgmt_port, "DELETE", path, f"{user}:pw"), conn.is_open]
    finally:
        conn.close()
        _http(mgmt_port, "DELETE", f"/users/{user}")


@pytest.mark.live
def test_a_monitor_may_not_close_someone_elses_amqp_connection() -> None:
    if (reason := _live_reason()) is not None:
        pytest.skip(reason)
    prefix = f"strclose-{uuid.uuid4().hex[:8]}"
    theirs = _monitor_and_amqp_connection(RABBIT_AMQP_PORT, RABBIT_MGMT_PORT, prefix)
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        assert b.broker.management is not None
        ours = _monitor_and_amqp_connection(b.port, b.broker.management.port, prefix)
    assert theirs[:2] == [
        200,
        [401, {"error": "not_authorised", "reason": "User not authorised to access object"}],
    ]
    assert ours == theirs
