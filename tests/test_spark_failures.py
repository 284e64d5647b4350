"""Failure behaviour of the `amqp` sink: no broker, and a connection cut in the middle of a batch."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F

import spark_bridge
from tests.spark_support import KillingProxy, drain, fresh_topology

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_broker_down_at_start_is_a_clear_driver_error(spark: Any) -> None:
    uri = f"amqp://guest:guest@127.0.0.1:{_free_port()}/%2F"
    df = spark.range(10).select(F.col("id").cast("string").alias("rk"))
    with pytest.raises(Exception, match=r"cannot connect to AMQP broker at amqp://127\.0\.0\.1:\d+/%2F"):
        df.write.format("amqp").option("uri", uri).option("routingKeyColumn", "rk").mode("append").save()


def test_broker_down_at_start_streaming(spark: Any, tmp_path: Any) -> None:
    uri = f"amqp://guest:guest@127.0.0.1:{_free_port()}/%2F"
    source = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 10).load()
    query = (
        source.writeStream.format("amqp")
        .option("uri", uri)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match=r"cannot connect to AMQP broker"):
        query.awaitTermination()


def test_connection_killed_mid_batch_is_retried_without_losing_confirmed_rows(
    spark: Any, broker_url: str, tmp_path: Any
) -> None:
    """The first two executor connections die after ~200 kB; Spark retries those tasks, the job
    succeeds, and every row is in the queue (some twice, with the same message_id)."""
    port = int(broker_url.rsplit(":", 1)[1].split("/")[0])
    proxy = KillingProxy("127.0.0.1", port)
    exchange, queue = "sb.kill.x", "sb.kill.q"
    fresh_topology(broker_url, exchange, [queue])
    rows = 20_000
    proxy.arm(kill_after=200_000, kills=2)
    stats = tmp_path / "stats.jsonl"
    try:
        df = spark.range(0, rows, numPartitions=2).select(F.col("id").alias("n"), F.lit("k").alias("rk"))
        (
            df.write.format("amqp")
            .option("uri", proxy.url(broker_url))
            .option("exchange", exchange)
            .option("routingKeyColumn", "rk")
            .option("maxInFlight", "200")
            .option("declareExchange", "true")
            .option("bindings", json.dumps([{"queue": queue, "key": "k"}]))
            .option("statsFile", str(stats))
            .mode("append")
            .save()
        )
    finally:
        proxy.close()
    assert proxy.killed == 2
    [commit] = [json.loads(line) for line in stats.read_text().splitlines()]
    assert commit["published"] == commit["confirmed"] == rows  # only successful attempts count
    received = drain(broker_url, queue, expected=3 * rows, timeout=60)
    by_id: dict[str, bytes] = {}
    for message in received:
        assert message.message_id is not None
        assert by_id.setdefault(message.message_id, message.body) == message.body
    assert sorted(json.loads(body)["n"] for body in by_id.values()) == list(range(rows))
    assert len(received) > rows  # the killed attempts had published (and confirmed) some rows
    counts = {
        r["queue"]: r["messages"] for r in spark_bridge.queue_counts(spark, broker_url, [queue]).collect()
    }
    assert counts[queue] == 0
    fresh_topology(broker_url, exchange, [queue])
