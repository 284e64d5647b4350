"""A quorum queue across a hashbroker restart (data_dir store): the queue with its arguments, its
persistent messages in order, and a message delivered before the restart coming back as returned
once (x-delivery-count 1, redelivered), as RabbitMQ 3.10.8 returns a checked-out message whose
channel went away."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pika
import pytest

from broker.embedded import BrokerThread

QQ = {"x-queue-type": "quorum", "x-delivery-limit": 5}
PERSISTENT = pika.BasicProperties(delivery_mode=2)


@contextlib.contextmanager
def connection(data_dir: Path) -> Iterator[pika.BlockingConnection]:
    with BrokerThread(host="127.0.0.1", port=0, data_dir=str(data_dir)) as b:
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        try:
            yield conn
        finally:
            with contextlib.suppress(Exception):
                conn.close()


def gets(ch: Any, queue: str) -> list[tuple[str, bool, Any]]:
    out = []
    while True:
        method, props, body = ch.basic_get(queue, auto_ack=True)
        if method is None:
            return out
        out.append((body.decode(), method.redelivered, (props.headers or {}).get("x-delivery-count")))


@pytest.mark.timeout(60)
def test_quorum_queue_and_its_messages_survive_a_restart(tmp_path: Path) -> None:
    with connection(tmp_path) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("qq", durable=True, arguments=QQ)
        for body in ("a", "b", "c"):
            ch.basic_publish("", "qq", body.encode(), PERSISTENT)
        method, _props, _body = ch.basic_get("qq", auto_ack=False)
        assert method is not None  # "a" is held, unacked, when the broker stops
    with connection(tmp_path) as conn:
        ch = conn.channel()
        ok = ch.queue_declare("qq", durable=True, arguments=QQ)  # same arguments: equivalent
        assert ok.method.message_count == 3
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as err:
            conn.channel().queue_declare("qq", durable=True, arguments={"x-queue-type": "quorum"})
        assert "inequivalent arg 'x-delivery-limit'" in str(err.value)
        assert gets(ch, "qq") == [("a", True, 1), ("b", False, 0), ("c", False, 0)]
