"""message_stats above the queues (vhosts, the overview, exchanges), against RabbitMQ 3.10.8.

The same scenario runs in a fresh vhost of each broker: fanout and exchange-to-exchange routing,
mandatory and plain unroutable publishes, confirms (an ack and a reject-publish nack), a
transaction rolled back and one committed, gets, a requeue, consumers with and without acks, a
deleted queue. RabbitMQ emits its stats every 5 s, so its side waits until they settle.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pika
import pytest

from broker.embedded import BrokerThread
from tests import conftest
from tests.differential_support import optional_rabbitmq_url
from tests.management_support import call, mgmt_base, q

EVERYTHING = {"configure": ".*", "write": ".*", "read": ".*"}


@pytest.fixture(scope="module")
def hb() -> Iterator[BrokerThread]:
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        yield b


def scenario(url: str, vhost: str) -> None:
    params = pika.URLParameters(url)
    params.virtual_host = vhost
    conn = pika.BlockingConnection(params)
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.exchange_declare("fx", "fanout")
        ch.exchange_declare("e2e", "fanout")
        ch.exchange_bind("e2e", "fx")
        for name in ("q1", "q2"):
            ch.queue_declare(name)
            ch.queue_bind(name, "fx")
        ch.queue_declare("q3")
        ch.queue_bind("q3", "e2e")
        ch.exchange_declare("dx", "direct")
        for _ in range(3):
            ch.basic_publish("fx", "", b"f")  # q1, q2 and (through e2e) q3
        for _ in range(2):
            with pytest.raises(pika.exceptions.UnroutableError):
                ch.basic_publish("dx", "nowhere", b"u", mandatory=True)
        ch.basic_publish("dx", "nowhere", b"d")
        ch.queue_declare("lim", arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
        ch.basic_publish("", "lim", b"1")
        with pytest.raises(pika.exceptions.NackError):
            ch.basic_publish("", "lim", b"2")
        plain = conn.channel()
        for _ in range(2):
            plain.basic_publish("", "q1", b"no-confirm")
        tx = conn.channel()
        tx.tx_select()
        tx.basic_publish("", "q1", b"rolled-back")
        tx.tx_rollback()
        tx.basic_publish("", "q1", b"committed")
        tx.tx_commit()
        method, _p, _b = ch.basic_get("q1")
        ch.basic_ack(method.delivery_tag)
        ch.basic_get("q1", auto_ack=True)
        method, _p, _b = ch.basic_get("q1")
        ch.basic_reject(method.delivery_tag, requeue=True)
        ch.basic_get("q1", auto_ack=True)  # the requeued one: a redelivery
        ch.queue_declare("empty")
        ch.basic_get("empty")
        got: list[str] = []

        def acked(c: Any, m: Any, _p: Any, _b: bytes) -> None:
            got.append("q2")
            c.basic_ack(m.delivery_tag)

        tag = ch.basic_consume("q2", acked)
        until_three(conn, got, "q2")
        ch.basic_cancel(tag)
        tag = ch.basic_consume("q3", lambda *_a: got.append("q3"), auto_ack=True)
        until_three(conn, got, "q3")
        ch.basic_cancel(tag)
        ch.queue_delete("q2")  # its deliveries stay in the vhost's totals
    finally:
        conn.close()


def until_three(conn: pika.BlockingConnection, got: list[str], queue: str) -> None:
    """Serve the connection until the consumer of `queue` had its 3 messages (a loaded machine
    may take longer than any fixed wait), at most 20 s."""
    deadline = time.monotonic() + 20
    while got.count(queue) < 3 and time.monotonic() < deadline:
        conn.process_data_events(0.1)
    conn.process_data_events(0)  # the last ack written
    assert got.count(queue) == 3, got


def counters(stats: dict[str, Any] | None) -> dict[str, int] | None:
    return None if stats is None else {k: v for k, v in stats.items() if not k.endswith("_details")}


def observe(base: str, vhost: str) -> dict[str, Any]:
    _status, v = call(base, "GET", f"/api/vhosts/{q(vhost)}")
    _status, xs = call(base, "GET", f"/api/exchanges/{q(vhost)}")
    _status, qs = call(base, "GET", f"/api/queues/{q(vhost)}")
    return {
        "vhost": counters(v.get("message_stats")),
        "exchanges": {x["name"]: counters(x.get("message_stats")) for x in xs},
        "queues": {x["name"]: counters(x.get("message_stats")) for x in qs},
    }


def run(base: str, url: str, expect: dict[str, Any] | None = None) -> dict[str, Any]:
    """The scenario in a fresh vhost and what the API shows after it; with `expect`, poll up to
    30 s for it (RabbitMQ's counters arrive with its stats emissions, every 5 s, and only grow)."""
    vhost = f"hb-stats-{uuid.uuid4().hex[:8]}"
    assert call(base, "PUT", f"/api/vhosts/{q(vhost)}")[0] in (201, 204)
    try:
        assert call(base, "PUT", f"/api/permissions/{q(vhost)}/guest", EVERYTHING)[0] in (201, 204)
        fresh = {"fresh": "message_stats" in call(base, "GET", f"/api/vhosts/{q(vhost)}")[1]}
        scenario(url, vhost)
        seen = {**fresh, **observe(base, vhost)}
        deadline = time.monotonic() + 30
        while expect is not None and seen != expect and time.monotonic() < deadline:
            time.sleep(0.5)
            seen = {**fresh, **observe(base, vhost)}
        return seen
    finally:
        call(base, "DELETE", f"/api/vhosts/{q(vhost)}")


def test_vhost_and_exchange_counters_on_hashbroker(hb: BrokerThread) -> None:
    got = run(mgmt_base(hb), hb.url)
    assert got["fresh"] is False  # no message_stats before any activity
    assert got["vhost"] == {
        "publish": 11,  # 3 fx + 3 dx + 2 lim + 2 plain + 1 committed (not the rolled-back one)
        "confirm": 7,  # the publishes acked on the confirm channel (not the nack)
        "return_unroutable": 2,
        "drop_unroutable": 0,
        "get": 2,
        "get_no_ack": 2,
        "get_empty": 0,
        "deliver": 3,
        "deliver_no_ack": 3,
        "deliver_get": 10,
        "ack": 4,
        "redeliver": 1,
    }
    xs = got["exchanges"]
    assert xs["fx"] == {"publish_in": 3, "publish_out": 9}  # q1, q2 and q3 through e2e
    assert xs["e2e"] is None and xs["amq.direct"] is None
    assert xs["dx"] == {"publish_in": 3}
    assert xs[""] == {"publish_in": 5, "publish_out": 5}  # the refused lim publish reached lim


def test_overview_sums_the_vhosts_and_rates_follow_samples(hb: BrokerThread) -> None:
    base = mgmt_base(hb)
    state = hb.broker.management.state  # type: ignore[union-attr]
    vhost = f"hb-rates-{uuid.uuid4().hex[:8]}"
    assert call(base, "PUT", f"/api/vhosts/{q(vhost)}")[0] == 201
    try:
        assert call(base, "PUT", f"/api/permissions/{q(vhost)}/guest", EVERYTHING)[0] in (201, 204)
        before = counters(call(base, "GET", "/api/overview")[1]["message_stats"]) or {}
        hb.call(lambda: state.sample(100.0))
        params = pika.URLParameters(hb.url)
        params.virtual_host = vhost
        with pika.BlockingConnection(params) as conn:
            ch = conn.channel()
            ch.queue_declare("r")
            for _ in range(10):
                ch.basic_publish("", "r", b"x")
            ch.queue_declare("r", passive=True)  # the publishes are in
        hb.call(lambda: state.sample(105.0))
        v = call(base, "GET", f"/api/vhosts/{q(vhost)}")[1]["message_stats"]
        assert (v["publish"], v["publish_details"]) == (10, {"rate": 2.0})
        x = call(base, "GET", f"/api/exchanges/{q(vhost)}/amq.default")[1]["message_stats"]
        assert x == {
            "publish_in": 10,
            "publish_in_details": {"rate": 2.0},
            "publish_out": 10,
            "publish_out_details": {"rate": 2.0},
        }
        after = call(base, "GET", "/api/overview")[1]["message_stats"]
        assert after["publish"] == before.get("publish", 0) + 10
        assert after["publish_details"]["rate"] >= 2.0
    finally:
        call(base, "DELETE", f"/api/vhosts/{q(vhost)}")


@pytest.mark.timeout(120)
def test_counters_equal_rabbitmq(hb: BrokerThread, request: pytest.FixtureRequest) -> None:
    rabbit = optional_rabbitmq_url(request)
    if rabbit is None:
        pytest.skip("no RabbitMQ reachable on 127.0.0.1:5672")
    ours = run(mgmt_base(hb), hb.url)
    theirs = run(conftest.RABBITMQ_API, rabbit, expect=ours)
    assert ours == theirs
