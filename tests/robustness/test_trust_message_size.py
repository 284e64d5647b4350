"""max_message_size over real sockets: a content header declaring more than the limit is refused
at once with RabbitMQ's 406, the channel closes (the connection stays), and the body that follows
is discarded unread, so a 2^40-byte header cannot make the broker buffer anything."""

from __future__ import annotations

import struct
import subprocess
from collections.abc import Iterator

import pika
import pika.exceptions
import pytest
from pamqp import commands

from broker.embedded import BrokerThread
from tests.differential_support import RawAmqp
from tests.serve_support import proc_status, start_serve, stop_serve


@pytest.fixture
def serve() -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    env = {"HASHBROKER_LOG_LEVEL": "WARNING"}
    proc, port = start_serve("--data-dir", ":memory:", env=env, stderr=subprocess.PIPE, wait=15)
    yield proc, port
    stop_serve(proc, 10)


def test_terabyte_header_refused_before_the_body(serve: tuple[subprocess.Popen[bytes], int]) -> None:
    proc, port = serve
    client = RawAmqp("127.0.0.1", port, timeout=10)
    client.open_channel(1)
    before = proc_status(proc.pid, "VmRSS") // 1024
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
    peak = proc_status(proc.pid, "VmRSS") // 1024
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
