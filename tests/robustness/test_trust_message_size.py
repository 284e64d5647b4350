"""max_message_size over real sockets: a content header declaring more than the limit is refused
at once with RabbitMQ's 406, the channel closes (the connection stays), and the body that follows
is discarded unread, so a 2^40-byte header cannot make the broker buffer anything."""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pika
import pika.exceptions
import pytest
from pamqp import commands

from broker.embedded import BrokerThread
from tests.differential_support import RawAmqp

PY = sys.executable


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.fixture
def serve(tmp_path: Path) -> object:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    env = {**os.environ, "HASHBROKER_LOG_LEVEL": "WARNING"}
    cmd = [PY, "-m", "broker.cli.main", "serve", "--port", str(port), "--data-dir", ":memory:"]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE)
    deadline = time.time() + 15
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except ConnectionRefusedError:
            assert time.time() < deadline and proc.poll() is None
            time.sleep(0.05)
    yield proc, port
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_terabyte_header_refused_before_the_body(serve: tuple[subprocess.Popen[bytes], int]) -> None:
    proc, port = serve
    client = RawAmqp("127.0.0.1", port, timeout=10)
    client.open_channel(1)
    before = rss_kib(proc.pid)
    method = commands.Basic.Publish(exchange="", routing_key="nowhere")
    client.send(1, method)
    payload = struct.pack(">HHQH", 60, 0, 2**40, 0)
    client.send_bytes(struct.pack(">BHI", 2, 1, len(payload)) + payload + b"\xce")
    channel, close = client.recv()
    assert channel == 1 and isinstance(close, commands.Channel.Close)
    assert (close.reply_code, close.reply_text, close.class_id, close.method_id) == (
        406,
        "PRECONDITION_FAILED - message size 1099511627776 is larger than configured max size 134217728",
        60,
        40,
    )
    chunk = b"z" * (131072 - 8)
    body = struct.pack(">BHI", 3, 1, len(chunk)) + chunk + b"\xce"
    sent = 0
    while sent < 200 * 1024 * 1024:  # 200 MB of body after the refusal: all discarded
        client.send_bytes(body * 16)
        sent += 16 * len(chunk)
    peak = rss_kib(proc.pid)
    client.send(1, commands.Channel.CloseOk())
    client.open_channel(1)  # the connection is healthy: the channel opens again
    client.send(1, commands.Queue.Declare(queue="after", exclusive=True))
    assert isinstance(client.recv()[1], commands.Queue.DeclareOk)
    client.close()
    print(f"RSS before {before} KiB, after 200 MB of refused body {peak} KiB")
    assert (peak - before) < 100 * 1024, f"RSS grew {(peak - before) // 1024} MiB"


def test_configured_limit_with_pika() -> None:
    with BrokerThread(port=0, max_message_size=1000) as b:
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        ch = conn.channel()
        ch.queue_declare("sized", exclusive=True)
        ch.confirm_delivery()
        ch.basic_publish("", "sized", b"a" * 1000)
        assert b.broker.assembling_bytes == 0
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
            ch.basic_publish("", "sized", b"a" * 1001)
        assert (info.value.reply_code, info.value.reply_text) == (
            406,
            "PRECONDITION_FAILED - message size 1001 is larger than configured max size 1000",
        )
        ch2 = conn.channel()
        assert ch2.queue_declare("sized", passive=True).method.message_count == 1
        conn.close()
