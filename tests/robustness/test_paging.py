"""Paging and lazy restart of `hashbroker serve` with a data dir, through real sockets and pika.

A consumer-less flood of 1 KB messages must not keep every body in memory (RSS growth per queued
message well under the body size), every message must come back exactly once, in order, with its
properties, and a restart over a deep stored queue must answer AMQP without reading the queue first.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pika
import pytest

from tests.serve_support import free_port, proc_status, stop_serve

PY = sys.executable
BODY = 1024
TRANSIENT = 100_000
PERSISTENT = 200_000
#: RSS growth allowed per queued 1 KB message (the body alone is 1,024 bytes; ~1,450 B without paging).
MAX_RSS_PER_MESSAGE = 600
#: The restarted broker must answer AMQP well before it could have read 200 MB of stored messages
#: (generous for a loaded 2-core VM: it answers in well under a second when idle).
MAX_SERVE_SECONDS = 10.0

pytestmark = pytest.mark.slow


def start_timed(data: Path, port: int, log: Path) -> tuple[subprocess.Popen[bytes], float]:
    """Start `hashbroker serve` and return it with the seconds until it answered an AMQP handshake."""
    env = {**os.environ, "HASHBROKER_LOG_LEVEL": "WARNING"}
    cmd = [PY, "-m", "broker.cli.main", "serve", "--port", str(port), "--data-dir", str(data)]
    with log.open("ab") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
    started = time.monotonic()
    deadline = started + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
                s.sendall(b"AMQP\x00\x00\x09\x01")
                s.settimeout(60)
                if s.recv(1) == b"\x01":  # connection.start: the broker serves clients
                    return proc, time.monotonic() - started
        except (ConnectionRefusedError, ConnectionResetError):
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError(f"hashbroker serve did not come up: {log.read_text()[-2000:]}")
        time.sleep(0.05)


def connect(port: int) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port, heartbeat=0))


def body(i: int) -> bytes:
    head = b"%08d|" % i
    return head + bytes((i + k) % 251 for k in range(16)) * ((BODY - len(head)) // 16 + 1)


def publish(ch: pika.adapters.blocking_connection.BlockingChannel, queue: str, n: int, mode: int) -> None:
    for i in range(n):
        props = pika.BasicProperties(delivery_mode=mode, message_id=f"{queue}-{i}", headers={"i": i})
        ch.basic_publish("", queue, body(i)[:BODY], props)


def depth(ch: pika.adapters.blocking_connection.BlockingChannel, queue: str) -> int:
    return int(ch.queue_declare(queue, passive=True).method.message_count)


def wait_depth(ch: pika.adapters.blocking_connection.BlockingChannel, queue: str, n: int) -> None:
    deadline = time.monotonic() + 300
    while depth(ch, queue) != n:
        assert time.monotonic() < deadline, f"{queue} never reached {n}"
        time.sleep(0.2)


def consume_all(ch: pika.adapters.blocking_connection.BlockingChannel, queue: str, n: int, mode: int) -> None:
    """Every message once, in order, with its properties (acked in batches)."""
    ch.basic_qos(prefetch_count=2000)
    expected = 0
    pending = 0
    stream: Iterator[tuple[object, object, object]] = ch.consume(queue, inactivity_timeout=60)
    for method, props, raw in stream:
        assert method is not None, f"{queue}: stalled after {expected} of {n}"
        assert props.message_id == f"{queue}-{expected}", (queue, expected, props.message_id)  # type: ignore[attr-defined]
        assert props.headers == {"i": expected} and props.delivery_mode == mode  # type: ignore[attr-defined]
        assert raw == body(expected)[:BODY]
        expected += 1
        pending += 1
        if pending == 1000 or expected == n:
            ch.basic_ack(method.delivery_tag, multiple=True)  # type: ignore[attr-defined]
            pending = 0
        if expected == n:
            break
    ch.cancel()
    assert expected == n
    assert depth(ch, queue) == 0


def test_flood_pages_out_and_a_deep_store_restarts_lazily(tmp_path: Path) -> None:
    data = tmp_path / "data"
    log = tmp_path / "serve.log"
    port = free_port()
    proc, _ = start_timed(data, port, log)
    try:
        conn = connect(port)
        ch = conn.channel()
        ch.queue_declare("paging-t", durable=False)
        ch.queue_declare("paging-p", durable=True)
        publish(ch, "paging-t", 2000, 1)  # warm up the code paths before the baseline
        wait_depth(ch, "paging-t", 2000)
        ch.queue_purge("paging-t")
        time.sleep(1)
        before = proc_status(proc.pid, "VmRSS")
        publish(ch, "paging-t", TRANSIENT, 1)
        publish(ch, "paging-p", PERSISTENT, 2)
        wait_depth(ch, "paging-t", TRANSIENT)
        wait_depth(ch, "paging-p", PERSISTENT)
        time.sleep(2)  # the store's writer drains what it still holds
        per_message = (proc_status(proc.pid, "VmRSS") - before) / (TRANSIENT + PERSISTENT)
        print(f"\npaging: {per_message:.0f} B RSS per queued 1 KB message")
        assert per_message < MAX_RSS_PER_MESSAGE, f"{per_message:.0f} B RSS per queued message"
        assert list((data / "paging").iterdir())  # the flood went to page files
        consume_all(ch, "paging-t", TRANSIENT, 1)
        conn.close()
    finally:
        stop_serve(proc, 120)
    assert proc.returncode == 0, log.read_text()[-2000:]

    proc, seconds = start_timed(data, port, log)
    try:
        print(f"paging: restart over {PERSISTENT} stored messages answered AMQP in {seconds:.2f} s")
        assert seconds < MAX_SERVE_SECONDS, f"took {seconds:.1f} s to answer AMQP"
        conn = connect(port)
        ch = conn.channel()
        assert depth(ch, "paging-p") == PERSISTENT
        with pytest.raises(pika.exceptions.ChannelClosedByBroker):
            ch.queue_declare("paging-t", passive=True)  # transient queue (and its pages) are gone
        ch = conn.channel()
        consume_all(ch, "paging-p", PERSISTENT, 2)
        conn.close()
    finally:
        stop_serve(proc, 120)
    assert proc.returncode == 0
    assert b"Traceback" not in log.read_bytes()
