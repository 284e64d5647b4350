"""The hash exchanges' live view: `bucket_of` (the bucket and destination a message hashes to)
agrees with `route` and leaves routing unchanged; the watch records only while polled and lapses;
GET /api/hashbroker/exchanges/{vhost}/{name}/hash-trace reports where each message went, with the
authorization of reading the exchange; the dashboard renders it in a real browser (Chromium)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pika
import pytest

from amqpwire.fields import FieldTable
from broker.embedded import BrokerThread
from broker.entities import hash_watch
from broker.entities.clock import ManualClock
from broker.entities.message import RoutingView, StoredMessage
from broker.entities.vhost import VHost
from broker.protocol import properties as P
from exchanges import Binding, Destination, SimpleMessage, create_exchange
from exchanges.compat import Compat
from tests.management.test_dashboard import run_chromium
from tests.management.test_management_api import http

KEYS = [f"key-{i}" for i in range(2000)]
WEIGHTS = [("qa", "1"), ("qb", "3"), ("qc", "2")]


def _h(value: str) -> FieldTable:
    return FieldTable.from_python({"h": value})


def _id(value: str) -> dict[str, Any]:
    return {"message_id": value}


def _bound(exchange_type: str, arguments: dict[str, Any] | None = None) -> Any:
    x = create_exchange(exchange_type, arguments)
    for name, weight in WEIGHTS:
        x.add_binding(Binding(Destination.queue(name), weight))
    return x


@pytest.mark.parametrize(
    ("exchange_type", "arguments", "message"),
    [
        ("x-consistent-hash", None, lambda k: SimpleMessage([k])),
        ("x-consistent-hash", {"hash-header": "h"}, lambda k: SimpleMessage(["rk"], _h(k))),
        ("x-consistent-hash", {"hash-property": "message_id"}, lambda k: SimpleMessage(["rk"], None, _id(k))),
        ("x-modulus-hash", None, lambda k: SimpleMessage([k])),
        ("x-modulus-hash", None, lambda k: SimpleMessage([k, "cc-" + k])),
    ],
)  # fmt: skip
def test_bucket_of_is_the_bucket_route_picks_and_changes_no_routing(
    exchange_type: str, arguments: dict[str, Any] | None, message: Any
) -> None:
    x, reference = _bound(exchange_type, arguments), _bound(exchange_type, arguments)
    seen = Counter()
    for k in KEYS:
        picked = x.bucket_of(message(k))
        assert picked is not None
        bucket, buckets, dest = picked
        assert 0 <= bucket < buckets
        assert [dest] == x.route(message(k)) == reference.route(message(k))
        seen[dest.name] += 1
    assert set(seen) == {"qa", "qb", "qc"}
    assert all(x.route(message(k)) == reference.route(message(k)) for k in KEYS)


def test_bucket_of_on_the_consistent_hash_ring_follows_the_weights() -> None:
    x = _bound("x-consistent-hash")
    runs = {name: (first, first + count) for first, count, _kind, name in x.state_summary["segments"]}
    for k in KEYS[:300]:
        bucket, buckets, dest = x.bucket_of(SimpleMessage([k]))
        assert buckets == 6 and runs[dest.name][0] <= bucket < runs[dest.name][1]
    assert create_exchange("x-consistent-hash").bucket_of(SimpleMessage(["k"])) is None
    assert create_exchange("direct").bucket_of(SimpleMessage(["k"])) is None


def _publish(v: VHost, name: str, key: str) -> None:
    x = v.exchanges[name]
    msg = StoredMessage(name, key, P.encode({}), b"")
    hash_watch.record(v, x, RoutingView(msg), [q.name for q in v.route(x, msg)])


def test_a_watch_records_only_while_polled_and_is_bounded() -> None:
    clock = ManualClock()
    v = VHost("/", Compat.for_version("3.10.8"), clock)
    x = v.declare_exchange("hx", "x-modulus-hash", durable=False, auto_delete=False, internal=False,
                           arguments=FieldTable())  # fmt: skip
    _publish(v, "hx", "before")
    assert not v.tapped and hash_watch.entries(v, "hx") == []
    hash_watch.watch(v, "hx", size=3)
    assert v.tapped
    for i in range(5):
        _publish(v, "hx", f"k{i}")
    got = hash_watch.entries(v, "hx")
    assert [e["routing_key"] for e in got] == ["k2", "k3", "k4"] and [e["seq"] for e in got] == [3, 4, 5]
    assert all(e["destination"] is None and e["queues"] == [] for e in got)  # nothing bound yet
    assert [e["seq"] for e in hash_watch.entries(v, "hx", since=4)] == [5]
    assert x.impl is not None
    clock.advance(hash_watch.WATCH_SECONDS + 1)
    _publish(v, "hx", "late")
    assert not v.tapped and v.hash_watches == {}


@pytest.fixture(scope="module")
def broker() -> Iterator[tuple[BrokerThread, str]]:
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        yield b, f"http://127.0.0.1:{b.broker.management.port}"


def _declare(url: str, name: str, exchange_type: str, arguments: dict[str, Any] | None = None) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.exchange_declare(name, exchange_type, arguments=arguments)
    for q, w in WEIGHTS:
        ch.queue_declare(f"{name}.{q}")
        ch.queue_bind(f"{name}.{q}", name, w)
    conn.close()


def _landed(url: str, name: str) -> dict[str, str]:
    """body -> queue it is in, for every message in the exchange's queues."""
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    out = {}
    for q, _w in WEIGHTS:
        while True:
            method, _props, body = ch.basic_get(f"{name}.{q}", auto_ack=True)
            if method is None:
                break
            out[body.decode()] = f"{name}.{q}"
    conn.close()
    return out


@pytest.mark.parametrize(
    ("exchange_type", "arguments"),
    [("x-consistent-hash", None), ("x-consistent-hash", {"hash-header": "h"}), ("x-modulus-hash", None)],
)
def test_the_endpoint_shows_the_bucket_and_queue_of_each_message(
    broker: tuple[BrokerThread, str], exchange_type: str, arguments: dict[str, Any] | None
) -> None:
    b, base = broker
    name = f"live-{exchange_type}-{'h' if arguments else 'rk'}"
    _declare(b.url, name, exchange_type, arguments)
    path = f"/api/hashbroker/exchanges/%2F/{quote(name)}/hash-trace"
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    ch = conn.channel()
    ch.confirm_delivery()
    ch.basic_publish(name, "unwatched", b"unwatched")
    status, first, _ = http(base, "GET", path + "?size=100")
    assert status == 200 and first["entries"] == [] and first["seq"] == 0  # nothing before a poll
    assert first["type"] == exchange_type and first["watch_seconds"] == hash_watch.WATCH_SECONDS
    for i in range(60):
        props = pika.BasicProperties(headers={"h": f"hv-{i}"})
        ch.basic_publish(name, f"rk-{i}", f"m{i}".encode(), props)
    conn.close()
    status, trace, _ = http(base, "GET", path + "?size=100")
    assert status == 200 and [e["seq"] for e in trace["entries"]] == list(range(1, 61))
    landed = _landed(b.url, name)
    landed.pop("unwatched")
    for i, e in enumerate(trace["entries"]):
        assert e["routing_key"] == f"rk-{i}"
        assert e["hashed"] == (f"hv-{i}" if arguments else f"rk-{i}" if exchange_type != "x-modulus-hash"
                               else [f"rk-{i}"])  # fmt: skip
        assert e["destination"] == {"kind": "queue", "name": landed[f"m{i}"]} and e["queues"] == [
            landed[f"m{i}"]
        ]
        assert 0 <= e["bucket"] < e["buckets"] == (6 if exchange_type == "x-consistent-hash" else 3)
    assert len(set(landed.values())) == 3
    status, tail, _ = http(base, "GET", path + "?since=58&size=100")
    assert [e["seq"] for e in tail["entries"]] == [59, 60]


def test_the_endpoint_refuses_as_reading_the_exchange_does(broker: tuple[BrokerThread, str]) -> None:
    b, base = broker
    _declare(b.url, "live-authz", "x-consistent-hash")
    path = "/api/hashbroker/exchanges/%2F/live-authz/hash-trace"
    assert http(base, "GET", "/api/hashbroker/exchanges/%2F/nope/hash-trace")[0] == 404
    assert http(base, "GET", "/api/hashbroker/exchanges/%2F/amq.direct/hash-trace")[0] == 400
    assert http(base, "GET", path + "?size=0")[0] == 400
    assert http(base, "GET", path, auth=None)[0] == 401
    assert http(base, "PUT", "/api/users/tracer-noperm", {"password": "p", "tags": "management"})[0] == 201
    try:
        who = ("tracer-noperm", "p")
        read = http(base, "GET", "/api/exchanges/%2F/live-authz", auth=who)
        live = http(base, "GET", path, auth=who)
        assert read[0] == live[0] == 401 and read[1] == live[1]
    finally:
        http(base, "DELETE", "/api/users/tracer-noperm")


def test_the_dashboard_shows_the_live_view(broker: tuple[BrokerThread, str]) -> None:
    """Chromium loads the dashboard (its first poll starts the watch), then is loaded again once the
    messages are published: each row names the key, the bucket and the queue the message is in."""
    b, base = broker
    _declare(b.url, "live-dash", "x-consistent-hash")
    http(base, "GET", "/api/hashbroker/exchanges/%2F/live-dash/hash-trace")  # as the open page would
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    ch = conn.channel()
    ch.confirm_delivery()
    for i in range(10):
        ch.basic_publish("live-dash", f"order-{i}", f"m{i}".encode())
    conn.close()
    dom = run_chromium(base + "/", "--dump-dom").stdout
    landed = _landed(b.url, "live-dash")
    rows = _rows(dom, "live-dash")
    assert len(rows) == 10, dom[-3000:]
    for row in rows:
        i = int(row["data-routing-key"].removeprefix("order-"))
        assert row["data-destination"] == landed[f"m{i}"] == row["data-queues"]
        assert 0 <= int(row["data-bucket"]) < 6


def _rows(dom: str, exchange: str) -> list[dict[str, str]]:
    from html.parser import HTMLParser

    class Rows(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.inside = False
            self.rows: list[dict[str, str]] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            a = {k: v or "" for k, v in attrs}
            if tag == "div" and "hash-live" in a.get("class", ""):
                self.inside = a.get("data-exchange") == exchange
            if tag == "tr" and self.inside and "data-seq" in a:
                self.rows.append(a)

    parser = Rows()
    parser.feed(dom)
    return parser.rows
