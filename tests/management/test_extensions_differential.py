"""/api/extensions (the scripts RabbitMQ's UI loads for the plugins on) and the stream connections
in /api/connections, with rabbitmq_stream_management on and off.

With the plugin on, hashbroker's answer is compared with the live RabbitMQ 3.10.8 (which has it on).
The shared RabbitMQ cannot have it switched off, so the answers without it were observed once on a
separate 3.10.8 node started with rabbitmq_management and rabbitmq_stream only: /api/extensions
was `WITHOUT_STREAM_MANAGEMENT`, /api/stream/... was 404, and /api/connections still listed a stream
connection (protocol "stream"), which DELETE closed (204; the client's socket closed, no frame),
while `rabbitmqctl list_connections` left it out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from broker.cli import ctl
from broker.embedded import BrokerThread
from tests.differential.test_stream_management_differential import RABBIT_MGMT_PORT, _live_reason
from tests.management.test_stream_connection_close_differential import _http, _open, _until_closed
from tests.management_support import q

WITHOUT_STREAM_MANAGEMENT: list[Any] = [{"javascript": "dispatcher.js"}]
"""RabbitMQ 3.10.8's /api/extensions with rabbitmq_management and rabbitmq_stream on: the one
extension module of the management plugin itself (rabbit_mgmt_dispatcher)."""


@pytest.fixture(scope="module")
def without_stream_management() -> Iterator[BrokerThread]:
    with BrokerThread(
        host="127.0.0.1",
        port=0,
        management_port=0,
        stream_port=0,
        plugins=["rabbitmq_management", "rabbitmq_stream"],
    ) as b:
        yield b


def _mgmt_port(b: BrokerThread) -> int:
    assert b.broker.management is not None
    return int(b.broker.management.port)


@pytest.mark.live
def test_extensions_with_stream_management_as_rabbitmq() -> None:
    reason = _live_reason()
    if reason is not None:
        pytest.skip(reason)
    theirs = _http(RABBIT_MGMT_PORT, "GET", "/extensions")
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        ours = _http(_mgmt_port(b), "GET", "/extensions")
    assert theirs[0] == 200 and {"javascript": "stream.js"} in theirs[1]
    assert ours == theirs


@pytest.mark.live
def test_extensions_without_stream_management(without_stream_management: BrokerThread) -> None:
    reason = _live_reason()
    if reason is not None:
        pytest.skip(reason)
    ours = _http(_mgmt_port(without_stream_management), "GET", "/extensions")
    assert ours == [200, WITHOUT_STREAM_MANAGEMENT]
    # what the live RabbitMQ's answer holds before the stream plugin's modules
    theirs = _http(RABBIT_MGMT_PORT, "GET", "/extensions")[1]
    assert theirs[: len(WITHOUT_STREAM_MANAGEMENT)] == WITHOUT_STREAM_MANAGEMENT


def test_stream_connections_listed_without_stream_management(without_stream_management: BrokerThread) -> None:
    port = _mgmt_port(without_stream_management)
    server = without_stream_management.broker.stream_server
    assert server is not None

    async def run() -> dict[str, Any]:
        client, client_port = await _open(server.port)
        _, rows = await asyncio.to_thread(_http, port, "GET", "/connections")
        (row,) = [r for r in rows if r["peer_port"] == client_port]
        path = f"/connections/{q(row['name'])}"
        return {
            "protocol": row["protocol"],
            "stream path": (await asyncio.to_thread(_http, port, "GET", "/stream/connections"))[0],
            "one": (await asyncio.to_thread(_http, port, "GET", path))[1]["protocol"],
            "DELETE": await asyncio.to_thread(_http, port, "DELETE", path),
            "client sees": await _until_closed(client),
            "after": (await asyncio.to_thread(_http, port, "GET", path))[0],
        }

    assert asyncio.run(run()) == {
        "protocol": "stream",
        "stream path": 404,
        "one": "stream",
        "DELETE": [204, None],
        "client sees": ["socket closed"],
        "after": 404,
    }


def test_ctl_list_connections_leaves_stream_connections_out(
    capsys: pytest.CaptureFixture[str], without_stream_management: BrokerThread
) -> None:
    """rabbitmqctl list_connections shows AMQP connections only (observed on that 3.10.8 node: a
    stream connection is listed by rabbitmq-streams list_stream_connections, not there)."""
    server = without_stream_management.broker.stream_server
    assert server is not None
    url = f"http://127.0.0.1:{_mgmt_port(without_stream_management)}"

    async def run() -> tuple[int, list[Any], int]:
        client, client_port = await _open(server.port)
        listed = (
            await asyncio.to_thread(_http, _mgmt_port(without_stream_management), "GET", "/connections")
        )[1]
        capsys.readouterr()
        rc = await asyncio.to_thread(ctl.run, ["--url", url, "list_connections", "peer_port", "-q"])
        await client.close()
        return rc, [r["peer_port"] for r in listed], client_port

    rc, listed, client_port = asyncio.run(run())
    assert rc == 0 and client_port in listed
    assert capsys.readouterr().out.split() == []
