"""A stream across a broker restart: its persistent messages come back at their offsets.

Each message is stored at its offset plus one, so offsets survive even where segment rolls left
gaps. (RabbitMQ keeps every message of a stream, persistent or not; hashbroker's persistence
writes delivery_mode 2 messages only, see the README's known differences.)
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pika

from broker.embedded import BrokerThread


def _read(url: str, name: str, offset: Any) -> list[tuple[int, str]]:
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.basic_qos(prefetch_count=100)
    got: list[tuple[int, str]] = []

    def on_message(c: Any, method: Any, props: Any, body: bytes) -> None:
        got.append((props.headers["x-stream-offset"], body.decode()))
        c.basic_ack(method.delivery_tag)

    ch.basic_consume(name, on_message, arguments={"x-stream-offset": offset})
    deadline = time.monotonic() + 3
    seen, last = -1, time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - last < 0.5:
        conn.process_data_events(time_limit=0.05)
        if seen != len(got):
            seen, last = len(got), time.monotonic()
    conn.close()
    return got


def test_persistent_stream_messages_keep_their_offsets_across_a_restart(tmp_path: Path) -> None:
    args = {"x-queue-type": "stream", "x-stream-max-segment-size-bytes": 300}
    with BrokerThread(host="127.0.0.1", port=0, data_dir=str(tmp_path)) as b:
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("s", durable=True, arguments=args)
        for i in range(6):
            ch.basic_publish("", "s", f"m{i}".encode() + b"x" * 98, pika.BasicProperties(delivery_mode=2))
        conn.close()
        before = _read(b.url, "s", "first")
    assert [o for o, _ in before] == [0, 1, 3, 5, 7, 9]  # one message per segment after the first
    with BrokerThread(host="127.0.0.1", port=0, data_dir=str(tmp_path)) as b:
        assert _read(b.url, "s", "first") == before
        assert _read(b.url, "s", 5) == before[3:]
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("s", durable=True, arguments=args)  # equivalent after the restart
        ch.basic_publish("", "s", b"after", pika.BasicProperties(delivery_mode=2))
        conn.close()
        assert _read(b.url, "s", "last") == [(11, "after")]
