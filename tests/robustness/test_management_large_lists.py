"""Long list answers are built and encoded in batches with yields to the event loop in between
(so a 100k-binding GET does not stop the broker for the whole of it), and the batched encoding is
byte for byte what one json.dumps gives; sorting, paging and `?columns=` work on such lists too."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

from broker.embedded import BrokerThread
from broker.management.http import ENCODE_BATCH, Response, encode_body
from exchanges.base import Binding, Destination
from tests.management.test_management_api import http

N = 5 * ENCODE_BATCH + 7


def test_batched_encoding_is_json_dumps() -> None:
    payload = [{"n": i, "name": f"é-{i}", "x": [None, True, 1.5]} for i in range(N)]
    resp = Response.json(payload)
    assert resp.deferred and resp.body == b""
    yields = 0

    async def encode() -> None:
        nonlocal yields
        task = asyncio.ensure_future(encode_body(resp))
        while not task.done():
            yields += 1
            await asyncio.sleep(0)
        await task

    asyncio.run(encode())
    assert resp.body == json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    assert yields >= N // ENCODE_BATCH  # the loop ran between batches
    small = Response.json([1, 2])
    assert not small.deferred and small.body == b"[1,2]"


@pytest.fixture(scope="module")
def api() -> Iterator[str]:
    with BrokerThread(port=0, management_port=0) as bt:
        base = f"http://127.0.0.1:{bt.broker.management.port}"
        assert http(base, "PUT", "/api/queues/%2F/big-q", {})[0] == 201
        assert http(base, "PUT", "/api/exchanges/%2F/big-x", {"type": "direct"})[0] == 201

        def fill() -> None:
            vh = bt.broker.vhosts["/"]
            x = vh.exchanges["big-x"]
            for i in range(N):
                vh.add_binding(x, Binding(Destination.queue("big-q"), f"k{i:05d}"))

        bt.call(fill)
        yield base


def test_long_lists_served_whole_sorted_and_paged(api: str) -> None:
    status, body, _ = http(api, "GET", "/api/bindings/%2F")
    assert status == 200 and len(body) == N + 1  # and the default exchange's binding of big-q
    keys = [b["routing_key"] for b in body if b["source"] == "big-x"]
    assert keys == sorted(keys) and len(keys) == N
    status, body, _ = http(
        api, "GET", "/api/bindings/%2F?sort=routing_key&sort_reverse=true&columns=routing_key"
    )
    assert status == 200 and body[0] == {"routing_key": f"k{N - 1:05d}"}
    status, body, _ = http(api, "GET", "/api/queues?page=1&columns=name")
    assert status == 200 and body["items"] == [{"name": "big-q"}]
