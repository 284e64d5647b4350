"""A quorum queue across a hashbroker restart (data_dir store): the queue with its arguments, every
message (transient ones too: rabbit_fifo's Raft log keeps them all) in its order with its delivery
count, and the messages checked out when the broker stopped coming back returned, counted once
more (x-delivery-count, redelivered), as RabbitMQ 3.10.8 returns a checked-out message whose
consumer went away. A graceful stop returns them as a closed channel does; after SIGKILL the
restart returns them from the store's checked-out marks."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pika
import pytest

from broker.embedded import BrokerThread
from tests.serve_support import start_serve

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


@pytest.mark.timeout(90)
def test_transient_messages_and_delivery_counts_survive_restarts(tmp_path: Path) -> None:
    """rabbit_fifo's log keeps every message whatever its delivery mode, with its delivery count.
    At boot the leader re-monitors the consumers, finds them gone and returns their checked-out
    messages (`return_all`, each return counting, after the returns already waiting); the ready
    messages keep their counts. A second restart counts nothing again."""
    with connection(tmp_path) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("qq", durable=True, arguments=QQ)
        ch.basic_publish("", "qq", b"a", PERSISTENT)
        ch.basic_publish("", "qq", b"b", pika.BasicProperties(delivery_mode=1))
        ch.basic_publish("", "qq", b"c", PERSISTENT)
        ch.basic_publish("", "qq", b"d")  # no delivery_mode: transient
        for _ in range(2):  # "a" returned twice
            method, _p, body = ch.basic_get("qq")
            assert body == b"a"
            ch.basic_nack(method.delivery_tag, requeue=True)
        method, props, body = ch.basic_get("qq")
        assert (body, props.headers["x-delivery-count"]) == (b"a", 2)  # held at shutdown
        method, _p, body = ch.basic_get("qq")
        assert body == b"b"
        ch.basic_nack(method.delivery_tag, requeue=True)  # "b" waits in returns, count 1
    with connection(tmp_path) as conn:
        ch = conn.channel()
        assert ch.queue_declare("qq", durable=True, arguments=QQ).method.message_count == 4
    with connection(tmp_path) as conn:  # a second restart with nothing consumed
        ch = conn.channel()
        assert gets(ch, "qq") == [("b", True, 1), ("a", True, 3), ("c", False, 0), ("d", False, 0)]


@pytest.mark.timeout(90)
def test_consumer_deliveries_count_on_after_a_restart_up_to_the_limit(tmp_path: Path) -> None:
    """A consumer's unacked message when the broker stops: its return counts, so with
    x-delivery-limit 1 a message returned once before is over the limit and dead-lettered (reason
    delivery_limit) as rabbit_fifo's return_one does, and stays so after the restart."""
    args = {"x-queue-type": "quorum", "x-delivery-limit": 1, "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "dlq"}  # fmt: skip
    with connection(tmp_path) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("dlq", durable=True)
        ch.queue_declare("qq", durable=True, arguments=args)
        for body in (b"x", b"y"):
            ch.basic_publish("", "qq", body, PERSISTENT)  # the dead-lettered copy stays persistent
        ch.basic_qos(prefetch_count=1)
        seen: list[tuple[bytes, Any]] = []

        def on_message(c: Any, method: Any, props: Any, body: bytes) -> None:
            seen.append((body, (props.headers or {}).get("x-delivery-count")))
            if len(seen) == 1:
                c.basic_nack(method.delivery_tag, requeue=True)

        ch.basic_consume("qq", on_message)
        while len(seen) < 2:
            conn.process_data_events(time_limit=0.1)
        assert seen == [(b"x", None), (b"x", 1)]  # "x" is checked out with count 1 at shutdown
    with connection(tmp_path) as conn:
        ch = conn.channel()
        method, props, body = ch.basic_get("dlq", auto_ack=True)
        assert body == b"x" and method is not None
        death = props.headers["x-death"][0]
        assert (death["reason"], death["queue"], death["count"]) == ("delivery_limit", "qq", 1)
        assert gets(ch, "qq") == [("y", False, 0)]


@pytest.mark.timeout(60)
def test_a_store_written_before_delivery_counts_were_kept(tmp_path: Path) -> None:
    """A data directory whose queue_messages table lacks the delivery-count column opens (the
    column is added) and a delivered message comes back counted once, as it always did."""
    import sqlite3

    from amqpwire.fields import Field, FieldTable
    from broker.store.sqlite.schema import STORE_FILE, create_schema

    path = tmp_path / STORE_FILE
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    create_schema(conn, path)
    columns = {r[1] for r in conn.execute("PRAGMA table_info(queue_messages)")}
    assert "delivery_count" not in columns  # the layout schema version 1 shipped with
    qargs = FieldTable([("x-queue-type", Field("longstr", b"quorum"))]).encode()
    conn.execute("INSERT INTO vhosts (name, description, tags) VALUES (?, '', '[]')", (b"/",))
    conn.execute("INSERT INTO queues (vhost, name, durable, exclusive, auto_delete, arguments) "
                 "VALUES (?, ?, 1, 0, 0, ?)", (b"/", b"old", qargs))  # fmt: skip
    props = b"\x10\x00\x02"  # delivery_mode 2
    for i, (body, delivered) in enumerate(((b"m1", 1), (b"m2", 0)), start=1):
        conn.execute("INSERT INTO messages (id, refs, exchange, routing_key, properties, body) "
                     "VALUES (?, 1, ?, ?, ?, ?)", (i, b"", b"old", props, body))  # fmt: skip
        conn.execute("INSERT INTO queue_messages (vhost, queue, seq, msg_id, redelivered) "
                     "VALUES (?, ?, ?, ?, ?)", (b"/", b"old", i, i, delivered))  # fmt: skip
    conn.close()
    with connection(tmp_path) as amqp:
        assert gets(amqp.channel(), "old") == [("m1", True, 1), ("m2", False, 0)]


def serve(data: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`hashbroker serve` in a subprocess (so that it can be SIGKILLed) and its AMQP URL."""
    proc, port = start_serve("--host", "127.0.0.1", "--data-dir", str(data), "--log-level", "ERROR")
    return proc, f"amqp://guest:guest@127.0.0.1:{port}/%2F"


@pytest.mark.timeout(120)
def test_checked_out_messages_are_returned_by_the_restart_after_a_crash(tmp_path: Path) -> None:
    """SIGKILL while messages are checked out (no channel close returns them): the restart
    returns them from the store's marks, each return counting (x-delivery-count 2 after one nack
    and a redelivery), after the messages already waiting in `returns`; with x-delivery-limit 1
    the restart's return is over the limit and dead-letters the message (delivery_limit)."""
    limited = {"x-queue-type": "quorum", "x-delivery-limit": 1, "x-dead-letter-exchange": "",
               "x-dead-letter-routing-key": "dlq"}  # fmt: skip
    proc, url = serve(tmp_path)
    try:
        conn = pika.BlockingConnection(pika.URLParameters(url))
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("dlq", durable=True)
        ch.queue_declare("qa", durable=True, arguments=QQ)
        ch.queue_declare("qb", durable=True, arguments=limited)
        for body in (b"a", b"b", b"c"):
            ch.basic_publish("", "qa", body, PERSISTENT)
        ch.basic_publish("", "qa", b"t")  # transient
        ch.basic_publish("", "qb", b"x", PERSISTENT)
        for queue, body in (("qa", b"a"), ("qb", b"x")):
            method, _p, got = ch.basic_get(queue)
            assert got == body
            ch.basic_nack(method.delivery_tag, requeue=True)
            method, props, got = ch.basic_get(queue)
            assert (got, props.headers["x-delivery-count"]) == (body, 1)  # checked out again
        method, _p, got = ch.basic_get("qa")
        assert got == b"b"
        ch.basic_nack(method.delivery_tag, requeue=True)  # waits in returns with count 1
        ch.basic_publish("", "dlq", b"barrier", PERSISTENT)  # confirmed: what came before is stored
        assert ch.basic_get("dlq", auto_ack=True)[2] == b"barrier"
        ch.basic_publish("", "dlq", b"barrier2", PERSISTENT)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    with connection(tmp_path) as conn:
        ch = conn.channel()
        assert gets(ch, "qa") == [("b", True, 1), ("a", True, 2), ("c", False, 0), ("t", False, 0)]
        assert gets(ch, "qb") == []
        method, props, body = ch.basic_get("dlq", auto_ack=True)
        assert body == b"barrier2"
        method, props, body = ch.basic_get("dlq", auto_ack=True)
        assert body == b"x"
        death = props.headers["x-death"][0]
        assert (death["reason"], death["queue"]) == ("delivery_limit", "qb")
