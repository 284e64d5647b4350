"""Helpers for the Spark tests: one SparkSession per test run, brokers, a killing proxy, draining.

Fixtures live here rather than in conftest.py (which belongs to the whole suite); test modules
import them. The SparkSession is a process-wide singleton because pytest would otherwise create
one session-scoped fixture instance per importing module.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
pytest.importorskip("pandas")

from pyspark.sql import SparkSession

import spark_bridge
from spark_bridge.topology import delete_topology

# local[2, 4]: two cores like local[2], but a failed task is retried (up to 4 attempts) as on a
# cluster; plain local[N] never retries, which would make the retry tests meaningless.
MASTER = os.environ.get("SPARK_BRIDGE_TEST_MASTER", "local[2,4]")

_SESSION: SparkSession | None = None


def get_spark() -> SparkSession:
    """The shared local SparkSession (created on first use, stopped at interpreter exit)."""
    global _SESSION
    if _SESSION is None:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        _SESSION = (
            SparkSession.builder.master(MASTER)
            .appName("spark_bridge tests")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.python.worker.reuse", "true")
            .getOrCreate()
        )
        _SESSION.sparkContext.setLogLevel("ERROR")
        spark_bridge.register(_SESSION)
        atexit.register(_stop)
    return _SESSION


def _stop() -> None:
    global _SESSION
    if _SESSION is not None:
        _SESSION.stop()
        _SESSION = None


@pytest.fixture(scope="session")
def spark() -> SparkSession:
    return get_spark()


@pytest.fixture(scope="session")
def hashbroker_url() -> Iterator[str]:
    """A running hashbroker (embedded, in this process); skipped only if broker/ cannot be imported."""
    try:
        from broker.embedded import BrokerThread
    except ImportError as exc:
        pytest.skip(f"broker not available ({exc})")
    with BrokerThread(host="127.0.0.1", port=0) as broker:
        yield broker.url


@pytest.fixture(params=["hashbroker", "rabbitmq"])
def broker_url(request: pytest.FixtureRequest) -> str:
    """Each test that takes this runs against both brokers."""
    name = "hashbroker_url" if request.param == "hashbroker" else "rabbitmq_url"
    url: str = request.getfixturevalue(name)
    return url


def fresh_topology(uri: str, exchange: str, queues: list[str]) -> None:
    delete_topology(uri, exchange, queues)


@dataclass(frozen=True)
class Received:
    queue: str
    message_id: str | None
    routing_key: str
    body: bytes
    properties: Any


def drain(uri: str, queue: str, expected: int | None = None, timeout: float = 30.0) -> list[Received]:
    """Consume (auto-ack) until `expected` messages arrived or `timeout` seconds passed in all.

    `expected=None` means as many as the queue holds when draining starts (a passive declare):
    for callers whose publishes are all confirmed but who cannot know how many duplicates the
    retried tasks left. Returns what arrived by the deadline, so a shortfall shows up in the
    caller's assertions instead of as a hang.
    """
    import pika

    deadline = time.monotonic() + timeout
    params = pika.URLParameters(uri)
    out: list[Received] = []
    with pika.BlockingConnection(params) as conn:
        channel = conn.channel()
        if expected is None:
            expected = channel.queue_declare(queue, passive=True).method.message_count
        if expected <= 0:
            return out
        channel.basic_qos(prefetch_count=2000)
        for method, props, body in channel.consume(queue, auto_ack=True, inactivity_timeout=0.2):
            if method is not None:
                out.append(Received(queue, props.message_id, method.routing_key, body, props))
                if len(out) >= expected:
                    break
            if time.monotonic() >= deadline:
                break
        channel.cancel()
    return out


class KillingProxy:
    """A loopback TCP proxy that cuts client connections once they sent more than `kill_after` bytes.

    `kills` limits how many connections are cut (None: every one that goes over). Connections
    that send less (the driver's declare/preflight connection) pass untouched.
    """

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.kill_after: int | None = None
        self.kills_left: int | None = None
        self.killed = 0
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def url(self, template_url: str) -> str:
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(template_url)
        netloc = parts.netloc.rsplit("@", 1)
        creds = netloc[0] + "@" if len(netloc) == 2 else ""
        return urlunsplit(parts._replace(netloc=f"{creds}127.0.0.1:{self.port}"))

    def arm(self, kill_after: int | None, kills: int | None = None) -> None:
        with self._lock:
            self.kill_after = kill_after
            self.kills_left = kills

    def _should_kill(self, sent: int) -> bool:
        with self._lock:
            if self.kill_after is None or sent <= self.kill_after:
                return False
            if self.kills_left is not None:
                if self.kills_left <= 0:
                    return False
                self.kills_left -= 1
            self.killed += 1
            return True

    def _accept(self) -> None:
        self._server.settimeout(0.2)
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            # The timeout was for connecting only: an idle proxied connection (a task waiting for
            # confirms, the driver between declarations) must stay open until a kill or a close.
            upstream.settimeout(None)
            client.settimeout(None)
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, from_client: bool) -> None:
        sent = 0
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                sent += len(data)
                if from_client and self._should_kill(sent):
                    break
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self._stop.set()
        self._server.close()
