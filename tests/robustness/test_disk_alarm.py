"""The disk alarm: a disk_free_limit above the free space of the data dir's filesystem sets the
alarm at start-up; a publisher is blocked with "low on disk" as soon as it publishes, a connection
that only consumes is not, /api/nodes reports it, and clearing it unblocks the publisher.

Also the alarm API other parts of the broker use (`broker.runtime.alarms.set` / `clear`), and the size
units `memory_high_watermark` and `disk_free_limit` accept (RabbitMQ's parse_information_unit).
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.request
from typing import Any

import pika
import pytest

from broker.embedded import BrokerThread
from broker.runtime.alarms import blocked_reason
from broker.runtime.settings import Settings, parse_size, resolve_limit

HUGE = "1000000GB"  # 1 PB: RabbitMQ 3.10.8's units stop at GB/GiB


def nodes(port: int) -> list[dict[str, Any]]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/nodes")
    req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
    with urllib.request.urlopen(req, timeout=10) as resp:
        return list(json.load(resp))


def wait_for(predicate: Any, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


def free_space_is_enough(alarms: Any) -> None:
    """As if space had been freed: a limit of 0 and a reading taken now."""
    alarms.disk_limit = 0
    alarms.check_disk()


class Publisher:
    """A pika SelectConnection in its own thread that publishes one message when asked."""

    def __init__(self, port: int, queue: str = "alarms-disk") -> None:
        self.queue = queue
        self.blocked: list[str] = []
        self.unblocked = threading.Event()
        self.confirmed = threading.Event()
        self.ready = threading.Event()
        params = pika.ConnectionParameters("127.0.0.1", port, heartbeat=0)
        self.conn = pika.SelectConnection(
            params, on_open_callback=self._opened, on_close_callback=lambda _c, _e: self.conn.ioloop.stop()
        )
        self.conn.add_on_connection_blocked_callback(lambda _c, f: self.blocked.append(f.method.reason))
        self.conn.add_on_connection_unblocked_callback(lambda _c, _f: self.unblocked.set())
        self.thread = threading.Thread(target=self.conn.ioloop.start, daemon=True)
        self.thread.start()

    def _opened(self, conn: Any) -> None:
        conn.channel(on_open_callback=self._channel)

    def _channel(self, ch: Any) -> None:
        self.ch = ch
        ch.confirm_delivery(lambda _f: self.confirmed.set())
        ch.queue_declare(self.queue, callback=lambda _f: self.ready.set())

    def publish(self) -> None:
        self.conn.ioloop.add_callback_threadsafe(lambda: self.ch.basic_publish("", self.queue, b"d"))

    def close(self) -> None:
        self.conn.ioloop.add_callback_threadsafe(self.conn.close)
        self.thread.join(15)


def test_disk_alarm_blocks_publishers_and_shows_in_api_nodes() -> None:
    with BrokerThread(port=0, management_port=0, disk_free_limit=HUGE) as bt:
        broker = bt.broker
        mport = broker.management.port
        node = nodes(mport)[0]
        assert node["disk_free_alarm"] is True and node["mem_alarm"] is False
        assert node["disk_free_limit"] == 10**15 and 0 <= node["disk_free"] < 10**15
        assert node["mem_used"] > 0 and node["mem_limit"] > node["mem_used"]

        consumer = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", bt.port, heartbeat=0))
        seen: list[str] = []
        consumer.add_on_connection_blocked_callback(lambda _c, f: seen.append(f.method.reason))
        pub = Publisher(bt.port)
        try:
            assert pub.ready.wait(15)
            assert pub.blocked == []  # not blocked before it publishes
            pub.publish()
            assert wait_for(lambda: pub.blocked == ["low on disk"])
            conns = [c for c in broker.connections if c.alarm_blocked]
            assert len(conns) == 1 and conns[0].state == "blocked"
            # the consumer's connection is served: it declares and reads what got in
            cch = consumer.channel()
            cch.queue_declare("alarms-disk")
            assert wait_for(lambda: cch.basic_get("alarms-disk", auto_ack=True)[0] is not None, 10)
            assert seen == []
            # the publisher's next message is not read while blocked
            pub.confirmed.clear()
            pub.publish()
            assert not pub.confirmed.wait(1.0)
            # a store holding "disk" keeps the alarm after the free space is found sufficient
            bt.call(broker.alarms.set, "disk", "store cannot write", "store")
            bt.call(free_space_is_enough, broker.alarms)
            assert not pub.unblocked.wait(0.5)
            bt.call(broker.alarms.clear, "disk", "", "store")
            assert pub.unblocked.wait(15)
            assert pub.confirmed.wait(15)  # read and confirmed once unblocked
            node = nodes(mport)[0]
            assert node["disk_free_alarm"] is False and node["disk_free_limit"] == 0
            cch.queue_delete("alarms-disk")
        finally:
            pub.close()
            consumer.close()


def test_alarm_api_reasons_follow_rabbit_reader() -> None:
    """A blocked connection hears each change of the set ("low on memory & disk", then the one
    left) and connection.unblocked when none is left (rabbit_reader's control_throttle)."""
    with BrokerThread(port=0) as bt:
        broker = bt.broker
        pub = Publisher(bt.port)
        try:
            assert pub.ready.wait(15)
            bt.call(broker.alarms.set, "memory", "test")
            pub.publish()
            assert wait_for(lambda: pub.blocked == ["low on memory"])
            bt.call(broker.alarms.set, "disk", "test")
            assert wait_for(lambda: pub.blocked[-1:] == ["low on memory & disk"])
            bt.call(broker.alarms.clear, "memory")
            assert wait_for(lambda: pub.blocked[-1:] == ["low on disk"])
            assert not pub.unblocked.is_set()
            bt.call(broker.alarms.clear, "disk")
            assert pub.unblocked.wait(15)
            assert pub.confirmed.wait(15)
        finally:
            pub.close()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("123", 123),
        ("200MB", 200_000_000),
        ("50mb", 50_000_000),
        ("512MiB", 512 * 2**20),
        ("2GB", 2 * 10**9),
        ("1GiB", 2**30),
        ("3kB", 3000),
        ("3KiB", 3072),
        ("4k", 4096),
        ("5M", 5 * 2**20),
        ("6g", 6 * 2**30),
    ],
)
def test_sizes_in_rabbitmq_units(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["1TB", "1.5GB", "-1MB", "MB", "10 MB", "1mB", "1gB"])
def test_sizes_rabbitmq_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="is not a size"):
        parse_size(text)


def test_limits_as_fraction_or_size() -> None:
    assert resolve_limit(Settings().memory_high_watermark, 1000) == 400
    assert resolve_limit(Settings().disk_free_limit, 1000) == 50_000_000
    assert resolve_limit(Settings(memory_high_watermark="0.25").memory_high_watermark, 1000) == 250
    assert resolve_limit(Settings(memory_high_watermark=300_000_000).memory_high_watermark, 1) == 300_000_000
    assert resolve_limit(Settings(disk_free_limit=1.5).disk_free_limit, 1000) == 1500
    with pytest.raises(ValueError):
        Settings(memory_high_watermark="lots")
    with pytest.raises(ValueError):
        Settings(disk_free_limit=-0.5)


def test_blocked_reason_text() -> None:
    assert blocked_reason(frozenset({"disk", "memory"})) == "low on memory & disk"
    assert blocked_reason(frozenset({"memory"})) == "low on memory"
