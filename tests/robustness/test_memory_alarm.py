"""The memory alarm: a consumer-less flood against `hashbroker serve` (a subprocess, so its resident
memory is its own) is blocked with connection.blocked "low on memory" once the broker passes
--memory-high-watermark, the broker's memory stays bounded, every confirmed message reaches a
consumer that drains the queue afterwards, and the publisher hears connection.unblocked.

RabbitMQ 3.10.8's behaviour (rabbit_reader): only a connection that publishes while an alarm is
set is blocked; it is told why when it advertises the `connection.blocked` capability.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pika
import pytest

from tests.serve_support import proc_status, start_serve, stop_serve

BODY = b"x" * 1024
WINDOW = 2000  # unconfirmed messages the publisher keeps in flight
HEADROOM = 80 * 1000 * 1000  # the test's watermark: this much above the idle broker


def start_broker(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[bytes], int, Path]:
    """`hashbroker serve` with a data dir in `tmp_path`; the process, its port and its log file."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    log_path = tmp_path / "broker.log"
    with open(log_path, "wb") as log:
        env = {"HASHBROKER_LOG_LEVEL": "WARNING"}
        proc, port = start_serve(
            "--data-dir",
            str(tmp_path / "data"),
            *args,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            wait=20,
        )
    return proc, port, log_path


def idle_rss(tmp_path: Path) -> int:
    """The resident size (bytes) of a broker that has just started serving."""
    probe, _port, _log = start_broker(tmp_path)
    try:
        return proc_status(probe.pid, "VmRSS")
    finally:
        stop_serve(probe, 15)


@dataclass
class Flood:
    """A pika SelectConnection publishing 1 KB messages with confirms, WINDOW in flight."""

    port: int
    queue: str
    stop: threading.Event = field(default_factory=threading.Event)
    published: int = 0
    confirmed: int = 0
    blocked: list[str] = field(default_factory=list)
    unblocked: threading.Event = field(default_factory=threading.Event)
    blocked_at: float = 0.0
    started: float = 0.0
    error: str = ""
    conn: Any = None
    ch: Any = None

    def run(self) -> None:
        params = pika.ConnectionParameters("127.0.0.1", self.port, heartbeat=0)
        self.conn = pika.SelectConnection(
            params,
            on_open_callback=self._opened,
            on_open_error_callback=self._failed,
            on_close_callback=lambda _c, _e: self.conn.ioloop.stop(),
        )
        self.conn.add_on_connection_blocked_callback(self._blocked)
        self.conn.add_on_connection_unblocked_callback(lambda _c, _f: self.unblocked.set())
        self.conn.ioloop.start()

    def _failed(self, _conn: Any, err: Any) -> None:
        self.error = repr(err)
        self.conn.ioloop.stop()

    def _opened(self, conn: Any) -> None:
        conn.channel(on_open_callback=self._channel)

    def _channel(self, ch: Any) -> None:
        self.ch = ch
        ch.confirm_delivery(self._ack)
        ch.queue_declare(self.queue, callback=lambda _f: self._pump())

    def _blocked(self, _conn: Any, frame: Any) -> None:
        self.blocked.append(frame.method.reason)
        self.blocked_at = self.blocked_at or time.monotonic()

    def _ack(self, frame: Any) -> None:
        m = frame.method
        assert type(m).__name__ == "Ack", f"broker nacked {m}"
        done = m.delivery_tag if m.multiple else self.confirmed + 1
        self.confirmed = max(self.confirmed, done)
        self._pump()

    def _pump(self) -> None:
        if self.stop.is_set() or self.blocked:  # once blocked, only the window in flight goes on
            return
        self.started = self.started or time.monotonic()
        while self.published - self.confirmed < WINDOW:
            self.ch.basic_publish("", self.queue, BODY)
            self.published += 1

    def close(self, thread: threading.Thread) -> None:
        self.stop.set()
        self.conn.ioloop.add_callback_threadsafe(self.conn.close)
        thread.join(30)

    def wait_all_confirmed(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while self.confirmed < self.published and time.monotonic() < deadline:
            time.sleep(0.1)


def drain(port: int, queue: str, idle: float = 3.0) -> int:
    """Consume (acking in batches) until the queue stays empty for `idle` seconds; the count."""
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port, heartbeat=0))
    try:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=1000)
        got = 0
        last = acked = 0
        for method, _props, body in ch.consume(queue, inactivity_timeout=idle):
            if method is None:
                break
            assert body == BODY
            got += 1
            last = method.delivery_tag
            if got % 500 == 0:
                ch.basic_ack(last, multiple=True)
                acked = last
        if last != acked:  # a tag acked twice is 406 "unknown delivery tag" (a count ending on 500s)
            ch.basic_ack(last, multiple=True)
        ch.cancel()
        return got
    finally:
        conn.close()


def flood_until_blocked(port: int, queue: str, timeout: float = 240.0) -> tuple[Flood, threading.Thread]:
    flood = Flood(port, queue)
    thread = threading.Thread(target=flood.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not flood.blocked and not flood.error and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not flood.error, flood.error
    assert flood.blocked, f"never blocked after {flood.published} messages"
    return flood, thread


def run_flood(tmp_path: Path, watermark: int | None = None) -> dict[str, Any]:
    """Start a broker with `watermark` (bytes; default: HEADROOM above its idle size), flood it,
    drain it; returns the figures the test and the README quote."""
    idle = idle_rss(tmp_path / "probe")
    limit = watermark if watermark is not None else idle + HEADROOM
    proc, port, log_path = start_broker(tmp_path / "broker", "--memory-high-watermark", str(limit))
    try:
        flood, thread = flood_until_blocked(port, "alarms-flood")
        time.sleep(2.0)  # blocked: further input must not grow the broker
        confirmed = flood.confirmed
        peak = proc_status(proc.pid, "VmHWM")
        drained = drain(port, "alarms-flood")
        assert flood.unblocked.wait(60), "no connection.unblocked after the queue was drained"
        flood.wait_all_confirmed()  # the window that waited in the socket goes in now
        drained += drain(port, "alarms-flood")
        flood.close(thread)
        return {
            "idle": idle,
            "limit": limit,
            "peak": peak,
            "reasons": flood.blocked,
            "confirmed_when_blocked": confirmed,
            "confirmed": flood.confirmed,
            "published": flood.published,
            "drained": drained,
            "seconds_to_blocked": flood.blocked_at - flood.started,
            "log": log_path.read_text(),
        }
    finally:
        stop_serve(proc, 15)


@pytest.mark.slow
def test_flood_is_blocked_bounded_and_fully_delivered(tmp_path: Path) -> None:
    r = run_flood(tmp_path)
    assert r["reasons"] == ["low on memory"]
    # the poll runs every 0.5 s: the overshoot is what one flood adds in that time, not more
    assert r["peak"] <= r["limit"] + (r["limit"] - r["idle"]), r
    # every message published was confirmed and delivered once
    assert r["confirmed"] == r["drained"] == r["published"], r
    assert r["confirmed_when_blocked"] > 0
    assert "memory resource limit alarm set on node rabbit@localhost" in r["log"]
    assert "memory resource limit alarm cleared on node rabbit@localhost" in r["log"]


@pytest.mark.slow
def test_consumer_keeps_receiving_while_publisher_is_blocked(tmp_path: Path) -> None:
    """A connection that never published is not blocked: it consumes, declares and gets on while
    the flood's connection is held (rabbit_reader blocks publishers only)."""
    idle = idle_rss(tmp_path / "probe")
    proc, port, _log = start_broker(tmp_path / "broker", "--memory-high-watermark", str(idle + HEADROOM // 2))
    try:
        flood, thread = flood_until_blocked(port, "alarms-flood2")
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port, heartbeat=0))
        seen: list[str] = []
        conn.add_on_connection_blocked_callback(lambda _c, f: seen.append(f.method.reason))
        ch = conn.channel()
        ch.queue_declare("alarms-side", auto_delete=True)  # not a publish: still served
        method, _props, body = ch.basic_get("alarms-flood2", auto_ack=True)
        assert method is not None and body == BODY
        assert seen == []
        conn.close()
        drain(port, "alarms-flood2")
        assert flood.unblocked.wait(60)
        flood.close(thread)
    finally:
        stop_serve(proc, 15)


def _observe_blocking(host_port: int, trigger: Any, release: Any, queue: str) -> dict[str, Any]:
    """What a publisher and a connection that never publishes hear while an alarm is set."""
    from tests.robustness.test_disk_alarm import Publisher, wait_for

    idle = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", host_port, heartbeat=0))
    idle_seen: list[str] = []
    idle.add_on_connection_blocked_callback(lambda _c, f: idle_seen.append(f.method.reason))
    pub = Publisher(host_port, queue)
    try:
        assert pub.ready.wait(15)
        try:
            trigger()
            pub.publish()
            wait_for(lambda: bool(pub.blocked), 10)
            idle.process_data_events(0.2)
        finally:
            release()
        unblocked = pub.unblocked.wait(15)
        idle.process_data_events(0.2)
        return {"publisher": list(pub.blocked), "unblocked": unblocked, "idle": list(idle_seen)}
    finally:
        with contextlib.suppress(Exception):
            idle.channel().queue_delete(queue)
        pub.close()
        idle.close()


def test_blocked_reason_matches_rabbitmq(rabbitmq_url: str) -> None:
    """RabbitMQ 3.10.8 with its watermark briefly at 0.0001 (restored to 0.4 in any case): the
    publisher hears "low on memory" then unblocked, the connection that never published nothing."""

    def watermark(value: str) -> None:
        subprocess.run(
            ["rabbitmqctl", "set_vm_memory_high_watermark", value],
            check=True,
            capture_output=True,
            timeout=30,
        )

    if shutil.which("rabbitmqctl") is None:
        pytest.skip("rabbitmqctl is not installed: cannot set RabbitMQ's watermark")
    from urllib.parse import urlparse

    port = urlparse(rabbitmq_url).port or 5672
    theirs = _observe_blocking(port, lambda: watermark("0.0001"), lambda: watermark("0.4"), "alarms-diff")
    from broker.embedded import BrokerThread

    with BrokerThread(port=0) as bt:
        alarms = bt.broker.alarms
        ours = _observe_blocking(
            bt.port,
            lambda: bt.call(alarms.set, "memory", "test"),
            lambda: bt.call(alarms.clear, "memory"),
            "alarms-diff",
        )
    assert theirs == {"publisher": ["low on memory"], "unblocked": True, "idle": []}
    assert ours == theirs
