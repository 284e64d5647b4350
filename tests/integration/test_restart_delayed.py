"""x-delayed-message across a clean restart (data_dir store), as the delayed-message plugin keeps it.

The plugin hands a released message to the queues like any publish, so a persistent message
released into a durable queue is kept by that queue; and it keeps the messages it still holds in a
disc table, so those of a durable delayed exchange are held again after a restart and delivered
when due.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pika

from broker.embedded import BrokerThread

PERSISTENT = 2
DELAYED_ARGS = {"x-delayed-type": "direct"}


@contextlib.contextmanager
def channel(data_dir: Path) -> Iterator[tuple[BrokerThread, Any]]:
    """An embedded hashbroker on `data_dir` (stopped cleanly on exit) and a pika channel to it."""
    with BrokerThread(host="127.0.0.1", port=0, data_dir=str(data_dir)) as b:
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        try:
            yield b, conn.channel()
        finally:
            with contextlib.suppress(Exception):
                conn.close()


def depth(ch: Any, queue: str) -> int:
    return int(ch.queue_declare(queue, passive=True).method.message_count)


def declare(ch: Any) -> None:
    ch.exchange_declare("dx", "x-delayed-message", durable=True, arguments=DELAYED_ARGS)
    ch.queue_declare("dq", durable=True)
    ch.queue_bind("dq", "dx", "k")


def props(delay: int | None = None) -> pika.BasicProperties:
    headers = {"x-delay": delay} if delay is not None else None
    return pika.BasicProperties(delivery_mode=PERSISTENT, headers=headers)


def test_released_persistent_message_survives_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with channel(data) as (_b, ch):
        declare(ch)
        ch.basic_publish("dx", "k", b"delayed", props(100))
        ch.basic_publish("", "dq", b"direct", props())
        time.sleep(0.6)
        assert depth(ch, "dq") == 2
    with channel(data) as (_b, ch):
        assert depth(ch, "dq") == 2
        bodies = set()
        for _ in range(2):
            method, _p, body = ch.basic_get("dq", auto_ack=True)
            assert method is not None
            bodies.add(body)
        assert bodies == {b"delayed", b"direct"}


def test_held_message_of_a_durable_exchange_is_delivered_after_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with channel(data) as (b, ch):
        declare(ch)
        ch.exchange_declare("tx", "x-delayed-message", durable=False, arguments=DELAYED_ARGS)
        ch.queue_bind("dq", "tx", "k")
        ch.basic_publish("dx", "k", b"held", props(1500))
        ch.basic_publish("tx", "k", b"transient exchange", props(1500))
        time.sleep(0.2)
        assert depth(ch, "dq") == 0
        assert b.call(b.broker.policies.delayed_count) == 2
    with channel(data) as (b, ch):
        assert depth(ch, "dq") == 0
        assert b.call(b.broker.policies.delayed_count) == 1  # the transient exchange is gone
        deadline = time.monotonic() + 5
        while depth(ch, "dq") < 1:
            assert time.monotonic() < deadline, "the held message was not delivered after the restart"
            time.sleep(0.05)
        method, properties, body = ch.basic_get("dq", auto_ack=True)
        assert method is not None and body == b"held"
        assert properties.delivery_mode == PERSISTENT and properties.headers["x-delay"] == 1500
        assert b.call(b.broker.policies.delayed_count) == 0
    with channel(data) as (b, ch):  # delivered once: nothing is held or queued again
        time.sleep(0.2)
        assert depth(ch, "dq") == 0
        assert b.call(b.broker.policies.delayed_count) == 0
