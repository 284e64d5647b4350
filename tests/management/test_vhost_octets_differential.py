"""/api/vhosts/{vhost}'s connection figures against RabbitMQ 3.10.8: `recv_oct` and `send_oct`
(with their `_details`) appear once the vhost has had a connection (here a stream one), add up
its connections' own figures, and stay after the connection closed.

Each broker gets a vhost of its own, so only this test's connection counts there."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from rstream import Producer

from tests.differential.test_stream_management_differential import _shape
from tests.management.test_stream_connection_close_differential import WAIT, Api, same_on_both
from tests.management_support import q


def _octets(vhost: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in vhost.items() if k.startswith(("recv_oct", "send_oct"))}


async def _poll(api: Api, path: str, ready: Any) -> Any:
    """GET `path` until `ready(body)` (RabbitMQ emits connection statistics every few seconds)."""
    end = time.monotonic() + WAIT
    while True:
        body = (await api("GET", path))[1]
        if ready(body) or time.monotonic() > end:
            return body
        await asyncio.sleep(0.5)


async def program(stream_port: int, mgmt_port: int, vhost: str) -> dict[str, Any]:
    api = Api(mgmt_port)
    assert (await api("PUT", f"/vhosts/{q(vhost)}"))[0] == 201
    try:
        everything = {"configure": ".*", "write": ".*", "read": ".*"}
        assert (await api("PUT", f"/permissions/{q(vhost)}/guest", body=everything))[0] in (201, 204)
        out: dict[str, Any] = {"before": _octets((await api("GET", f"/vhosts/{q(vhost)}"))[1])}
        producer = Producer(
            "127.0.0.1", port=stream_port, vhost=vhost, username="guest", password="guest", heartbeat=0
        )
        await producer.start()
        try:
            (conn,) = await _poll(
                api, f"/vhosts/{q(vhost)}/connections", lambda rows: rows and "recv_oct" in rows[0]
            )
            figures = await _poll(api, f"/vhosts/{q(vhost)}", lambda v: "recv_oct" in v)
            out["open"] = _shape(_octets(figures))
            out["the connection's figures"] = [figures["recv_oct"], figures["send_oct"]] == [
                conn["recv_oct"],
                conn["send_oct"],
            ]
        finally:
            await producer.close()
        await _poll(api, f"/vhosts/{q(vhost)}/connections", lambda rows: rows == [])
        after = (await api("GET", f"/vhosts/{q(vhost)}"))[1]
        out["closed"] = _shape(_octets(after))
        out["kept"] = after.get("recv_oct", -1) >= figures["recv_oct"]
        return out
    finally:
        await api("DELETE", f"/vhosts/{q(vhost)}")


@pytest.mark.live
@pytest.mark.slow  # RabbitMQ emits a connection's statistics some seconds after it opened
def test_vhost_connection_figures_as_rabbitmq() -> None:
    theirs = same_on_both(program, f"vhost-octets-{uuid.uuid4().hex[:8]}")
    assert theirs["open"] and theirs["the connection's figures"] and theirs["kept"]
