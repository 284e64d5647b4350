"""The `amqp` source: consuming through the bridge's client, batch reads, and a streaming query
stopped mid-way and restarted from its checkpoint (at least once, queue empty at the end)."""

from __future__ import annotations

import datetime as dt
import threading
import time
from pathlib import Path
from typing import Any

import pika
import pytest

pytest.importorskip("pyspark")

from spark_bridge.consumer import AmqpConsumer
from spark_bridge.wire import AmqpAddress
from tests.spark_support import fresh_topology

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


def _fill(uri: str, queue: str, count: int, start: int = 0) -> None:
    """Declare `queue` afresh and publish `count` messages with message ids start..start+count-1."""
    fresh_topology(uri, "", [queue])
    with pika.BlockingConnection(pika.URLParameters(uri)) as conn:
        channel = conn.channel()
        channel.queue_declare(queue)
        channel.confirm_delivery()
        for i in range(start, start + count):
            channel.basic_publish(
                "",
                queue,
                f"m{i}".encode(),
                pika.BasicProperties(message_id=str(i), headers={"n": i}),
                mandatory=False,
            )


def _ready(uri: str, queue: str) -> int:
    with AmqpConsumer(AmqpAddress.parse(uri)) as conn:
        return conn.message_count(queue)


def test_consumer_delivers_properties_and_acks(broker_url: str) -> None:
    queue = "sb.src.props"
    fresh_topology(broker_url, "", [queue])
    stamp = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    with pika.BlockingConnection(pika.URLParameters(broker_url)) as conn:
        channel = conn.channel()
        channel.queue_declare(queue)
        for i in range(3):
            props = pika.BasicProperties(
                message_id=f"id{i}",
                correlation_id="c",
                content_type="text/plain",
                timestamp=int(stamp.timestamp()),
                headers={"n": i, "s": "x", "t": {"a": 1}},
            )
            channel.basic_publish("", queue, b"x" * (200_000 * i), props)  # 0, 200 kB, 400 kB
    from spark_bridge.source import to_row

    with AmqpConsumer(AmqpAddress.parse(broker_url)) as consumer:
        consumer.consume(queue, prefetch=10)
        got = consumer.take(10, wait=5)
        assert [len(d.body) for d in got] == [0, 200_000, 400_000]
        rows = [to_row(d, None) for d in got]
        assert [r[4] for r in rows] == ["id0", "id1", "id2"]
        assert rows[1][1:9] == (
            queue,
            "",
            False,
            "id1",
            "c",
            dt.datetime(2026, 1, 2, 3, 4, 5),
            "text/plain",
            {"n": "1", "s": "x", "t": '{"a": 1}'},
        )
        consumer.ack(got[1].delivery_tag)  # cumulative: acks the first two
    # the third, never acked, is back in the queue when the connection closes
    assert _ready(broker_url, queue) == 1
    fresh_topology(broker_url, "", [queue])


def test_batch_read_requeues_or_consumes(spark: Any, broker_url: str) -> None:
    queue = "sb.src.batch"
    _fill(broker_url, queue, 500)

    def reader() -> Any:  # DataFrameReader.option changes the reader itself: one per read
        return spark.read.format("amqp").option("uri", broker_url).option("queue", queue)

    peek = reader().option("maxMessages", "100").option("consume", "false").load().collect()
    assert sorted(int(r.message_id) for r in peek) == list(range(100))
    assert _ready(broker_url, queue) == 500
    rows = reader().load().collect()
    assert sorted(int(r.message_id) for r in rows) == list(range(500))
    assert {r.headers["n"] for r in rows} == {str(i) for i in range(500)}
    assert _ready(broker_url, queue) == 0
    with pytest.raises(Exception, match=r"404 NOT_FOUND"):
        spark.read.format("amqp").option("uri", broker_url).option("queue", "sb.src.none").load().collect()
    fresh_topology(broker_url, "", [queue])


class _Seen:
    """foreachBatch sink: every (message_id, redelivered) seen, per batch."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.redelivered = 0
        self.lock = threading.Lock()

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = df.select("message_id", "redelivered").collect()
        with self.lock:
            self.ids.extend(int(r.message_id) for r in rows)
            self.redelivered += sum(1 for r in rows if r.redelivered)


def _start(spark: Any, uri: str, queue: str, checkpoint: Path, seen: _Seen) -> Any:
    source = (
        spark.readStream.format("amqp")
        .option("uri", uri)
        .option("queue", queue)
        .option("prefetch", "3000")
        .option("maxMessagesPerBatch", "1500")
        .load()
    )
    return (
        source.writeStream.foreachBatch(seen)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_stream_stopped_midway_and_restarted_sees_every_message(
    spark: Any, broker_url: str, tmp_path: Path
) -> None:
    total = 20_000
    queue = "sb.src.stream"
    _fill(broker_url, queue, total)
    checkpoint = tmp_path / "ckpt"
    first = _Seen()
    query = _start(spark, broker_url, queue, checkpoint, first)
    try:
        _wait(lambda: len(first.ids) >= total // 3, 180, "a third of the messages")
    finally:
        query.stop()
    assert len(first.ids) < total  # stopped mid-way
    second = _Seen()
    query = _start(spark, broker_url, queue, checkpoint, second)
    try:
        _wait(lambda: set(first.ids) | set(second.ids) >= set(range(total)), 300, "every message")
        # the batch holding the last messages is acked once Spark committed it
        _wait(lambda: _ready(broker_url, queue) == 0, 30, "an empty queue")
        time.sleep(1.0)
    finally:
        query.stop()
    assert set(first.ids) | set(second.ids) == set(range(total))
    assert second.redelivered > 0  # what the stopped query had not committed came back
    assert _ready(broker_url, queue) == 0  # nothing left unacked by the stopped query either
    fresh_topology(broker_url, "", [queue])


class _Batches:
    """foreachBatch sink keeping each micro-batch's (offset, message_id) rows by batch id."""

    def __init__(self) -> None:
        self.batches: dict[int, list[tuple[int, str]]] = {}
        self.replayed: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = [(r.offset, r.message_id) for r in df.select("offset", "message_id").collect()]
        with self.lock:
            if batch_id in self.batches:
                self.replayed.append(batch_id)
                assert self.batches[batch_id] == rows, f"batch {batch_id} replayed with other rows"
            self.batches[batch_id] = rows

    def rows(self) -> list[tuple[int, str]]:
        with self.lock:
            return [row for batch_id in sorted(self.batches) for row in self.batches[batch_id]]


def test_stream_queue_restart_yields_the_same_rows_without_gap_or_duplicate(
    spark: Any, rabbitmq_url: str, tmp_path: Path
) -> None:
    total = 5_000
    queue = "sb.src.streamq"
    fresh_topology(rabbitmq_url, "", [queue])
    with pika.BlockingConnection(pika.URLParameters(rabbitmq_url)) as conn:
        channel = conn.channel()
        channel.queue_declare(queue, durable=True, arguments={"x-queue-type": "stream"})
        channel.confirm_delivery()
        for i in range(total):
            channel.basic_publish("", queue, b"", pika.BasicProperties(message_id=str(i)))

    def start(sink: _Batches) -> Any:
        source = (
            spark.readStream.format("amqp")
            .option("uri", rabbitmq_url)
            .option("queue", queue)
            .option("queueType", "stream")
            .option("startingOffset", "first")
            .option("prefetch", "500")
            .option("maxMessagesPerBatch", "400")
            .load()
        )
        return (
            source.writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    sink = _Batches()  # one sink for both runs: batch ids continue from the checkpoint
    query = start(sink)
    try:
        _wait(lambda: len(sink.rows()) >= total // 3, 180, "a third of the stream")
    finally:
        query.stop()
    assert len(sink.rows()) < total
    query = start(sink)
    try:
        _wait(lambda: len(sink.rows()) >= total, 300, "the whole stream")
        time.sleep(1.0)  # nothing more may come
    finally:
        query.stop()
    rows = sink.rows()
    assert [offset for offset, _ in rows] == list(range(total))
    assert [message_id for _, message_id in rows] == [str(i) for i in range(total)]
    fresh_topology(rabbitmq_url, "", [queue])


def test_source_options_are_checked_on_the_driver() -> None:
    from spark_bridge.source import SourceOptions

    uri = "amqp://guest:guest@127.0.0.1:5672/%2F"
    opts = SourceOptions.parse({"uri": uri, "queue": "q", "prefetch": "500"})
    assert (opts.prefetch, opts.max_messages_per_batch, opts.consume, opts.queue_type) == (
        500,
        500,
        True,
        "classic",
    )
    for bad, message in (
        ({"uri": uri}, "option 'queue' is required"),
        ({"queue": "q"}, "option 'uri' is required"),
        ({"uri": uri, "queue": "q", "prefetch": "70000"}, "at most 65535"),
        ({"uri": uri, "queue": "q", "queueType": "lazy"}, "classic, quorum or stream"),
        ({"uri": uri, "queue": "q", "startingOffset": "soon"}, "first, last, next or a stream offset"),
        ({"uri": uri, "queue": "q", "consume": "maybe"}, "must be true or false"),
    ):
        with pytest.raises(ValueError, match=message):
            SourceOptions.parse(bad)
