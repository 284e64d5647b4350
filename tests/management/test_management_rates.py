"""Queue message_stats counters and sampled rates in the management API, against RabbitMQ 3.10.8.

The counters are compared with the live broker's management API after the same scenario (publish,
get with and without ack, a nack with requeue, consume with and without ack); RabbitMQ emits its
stats every 5 s, so its side waits for them. The rates are checked on hashbroker with samples
taken at chosen instants: a rate is the change per second between the two latest samples.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pika
import pytest

from broker.embedded import BrokerThread
from tests import conftest
from tests.differential_support import optional_rabbitmq_url
from tests.management.test_management_api import http
from tests.management_support import mgmt_base

STATS_KEYS = (
    "publish",
    "ack",
    "deliver",
    "deliver_no_ack",
    "get",
    "get_no_ack",
    "get_empty",
    "deliver_get",
    "redeliver",
)


@pytest.fixture(scope="module")
def hb() -> Iterator[BrokerThread]:
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        yield b


def scenario(url: str, queue: str) -> None:
    """What the stats must count: 8 publishes, 3 gets (1 no-ack, 1 nacked back), 4+2 deliveries."""
    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        ch = conn.channel()
        ch.queue_delete(queue)
        ch.queue_declare(queue)
        for _ in range(6):
            ch.basic_publish("", queue, b"x")
        method, _p, _b = ch.basic_get(queue, auto_ack=False)
        ch.basic_ack(method.delivery_tag)
        ch.basic_get(queue, auto_ack=True)
        method, _p, _b = ch.basic_get(queue, auto_ack=False)
        ch.basic_nack(method.delivery_tag, requeue=True)
        tag = ch.basic_consume(queue, lambda c, m, p, b: c.basic_ack(m.delivery_tag))
        conn.process_data_events(1)
        ch.basic_cancel(tag)
        for _ in range(2):
            ch.basic_publish("", queue, b"y")
        tag = ch.basic_consume(queue, lambda *a: None, auto_ack=True)
        conn.process_data_events(1)
        ch.basic_cancel(tag)
    finally:
        conn.close()


def counters(base: str, queue: str, auth: tuple[str, str] = ("guest", "guest")) -> dict[str, Any] | None:
    status, body, _ = http(base, "GET", f"/api/queues/%2F/{queue}", auth=auth)
    assert status == 200, body
    stats = body.get("message_stats")
    return None if stats is None else {k: v for k, v in stats.items() if not k.endswith("_details")}


def wait_for(fn: Callable[[], Any], timeout: float = 15.0) -> Any:
    deadline = time.time() + timeout
    while True:
        value = fn()
        if value or time.time() > deadline:
            return value
        time.sleep(0.5)


def test_queue_counters_on_hashbroker(hb: BrokerThread) -> None:
    scenario(hb.url, "stats.q")
    assert counters(mgmt_base(hb), "stats.q") == {
        "publish": 8,
        "ack": 5,
        "deliver": 4,
        "deliver_no_ack": 2,
        "get": 2,
        "get_no_ack": 1,
        "get_empty": 0,
        "deliver_get": 9,
        "redeliver": 1,
    }


def test_queue_counters_equal_rabbitmq(hb: BrokerThread, request: pytest.FixtureRequest) -> None:
    rabbit = optional_rabbitmq_url(request)
    if rabbit is None:
        pytest.skip("no RabbitMQ reachable on 127.0.0.1:5672")
    queue = "hb.stats.diff"
    scenario(rabbit, queue)
    try:
        # RabbitMQ's stats arrive with its next emission (every 5 s)
        def settled() -> dict[str, Any] | None:
            c = counters(conftest.RABBITMQ_API, queue)
            complete = c is not None and set(c) == set(STATS_KEYS)  # publish counts can come last
            return c if complete and c.get("ack") == 5 and c.get("deliver_no_ack") == 2 else None

        theirs = wait_for(settled)
    finally:
        conn = pika.BlockingConnection(pika.URLParameters(rabbit))
        conn.channel().queue_delete(queue)
        conn.close()
    scenario(hb.url, queue)
    assert counters(mgmt_base(hb), queue) == theirs
    assert set(theirs) == set(STATS_KEYS)


def test_fresh_and_get_only_queues_match_rabbitmq_keys(hb: BrokerThread) -> None:
    """Observed on 3.10.8: no message_stats before any activity; after one empty basic.get, every
    deliver-side key at 0 (get_empty too: 3.10.8 counts empty gets per channel) and no `publish`."""
    conn = pika.BlockingConnection(pika.URLParameters(hb.url))
    ch = conn.channel()
    ch.queue_declare("stats.fresh")
    assert counters(mgmt_base(hb), "stats.fresh") is None
    ch.basic_get("stats.fresh")
    conn.close()
    assert counters(mgmt_base(hb), "stats.fresh") == dict.fromkeys(
        ("ack", "deliver", "deliver_get", "deliver_no_ack", "get", "get_empty", "get_no_ack", "redeliver"), 0
    )


def test_rates_are_the_change_per_second_between_samples(hb: BrokerThread) -> None:
    assert hb.broker.management is not None
    state = hb.broker.management.state
    base = mgmt_base(hb)
    conn = pika.BlockingConnection(pika.URLParameters(hb.url))
    ch = conn.channel()
    ch.confirm_delivery()
    ch.queue_declare("stats.rates")
    t0 = time.monotonic() + 1000.0  # far from the periodic sampler's instants
    hb.call(state.sample, t0)
    for _ in range(100):
        ch.basic_publish("", "stats.rates", b"z")
    for _ in range(30):
        ch.basic_get("stats.rates", auto_ack=True)
    hb.call(state.sample, t0 + 2.0)
    status, body, _ = http(base, "GET", "/api/queues/%2F/stats.rates")
    assert status == 200
    stats = body["message_stats"]
    assert stats["publish_details"] == {"rate": 50.0}  # 100 in 2 s
    assert stats["get_no_ack_details"] == {"rate": 15.0}
    assert stats["deliver_get_details"] == {"rate": 15.0}
    assert stats["ack_details"] == {"rate": 0.0}
    assert body["messages_details"] == {"rate": 35.0}  # 70 more messages in 2 s
    assert body["messages_ready_details"] == {"rate": 35.0}
    _, overview, _ = http(base, "GET", "/api/overview")
    assert overview["queue_totals"]["messages_details"]["rate"] >= 35.0
    hb.call(state.sample, t0 + 4.0)  # nothing happened in the latest interval: rates drop to 0.0
    _, body, _ = http(base, "GET", "/api/queues/%2F/stats.rates")
    assert body["message_stats"]["publish_details"] == {"rate": 0.0}
    assert body["messages_details"] == {"rate": 0.0}
    conn.close()
