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
    received = drain(broker_url, queue, timeout=60)  # all it holds, duplicates too
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


def test_channel_close_carries_the_reply_code(broker_url: str) -> None:
    """A broker's channel.close reaches callers as ChannelClosedError with `reply_code`."""
    from pamqp import commands

    from spark_bridge import AmqpBridgeError, ChannelClosedError
    from spark_bridge._amqp import AmqpAddress, AmqpConnection
    from spark_bridge.topology import passive_counts

    with AmqpConnection(AmqpAddress.parse(broker_url)) as conn:
        with pytest.raises(ChannelClosedError) as info:
            conn.rpc(commands.Queue.Declare(queue="sb.no.such.q", passive=True), commands.Queue.DeclareOk)
        assert info.value.reply_code == 404
        assert isinstance(info.value, AmqpBridgeError)
        assert str(info.value).startswith("404 ")
        assert "sb.no.such.q" in info.value.reply_text
        # The connection is still usable on a fresh channel.
        conn.rpc(commands.Queue.Declare(queue="sb.reply.q", auto_delete=False), commands.Queue.DeclareOk)
        conn.rpc(commands.Queue.Delete(queue="sb.reply.q"), commands.Queue.DeleteOk)
    [missing] = passive_counts(broker_url, ["sb.no.such.q"])
    assert (missing.messages_ready, missing.consumers) == (None, None)


def test_publishing_to_a_missing_exchange_keeps_the_reply_code(broker_url: str) -> None:
    import pyarrow as pa

    from spark_bridge import ChannelClosedError
    from spark_bridge.options import SinkOptions
    from spark_bridge.writer import PartitionPublisher, TaskScope

    opts = SinkOptions(uri=broker_url, exchange="sb.no.such.x", routing_key="k")
    batch = pa.RecordBatch.from_pylist([{"n": i} for i in range(10)])
    with pytest.raises(ChannelClosedError, match=r"^amqp sink, partition 0 attempt 0 .*: 404 ") as info:
        PartitionPublisher(opts, TaskScope("unit", 0, 0)).run([batch])
    assert info.value.reply_code == 404


def test_connection_timeout_uri_parameter_is_in_milliseconds() -> None:
    from spark_bridge._amqp import AmqpAddress

    assert AmqpAddress.parse("amqp://h/").connect_timeout == 10.0
    assert AmqpAddress.parse("amqp://h/?connection_timeout=2500").connect_timeout == 2.5
    assert AmqpAddress.parse("amqp://h/vh?heartbeat=5&connection_timeout=10000").connect_timeout == 10.0
    for bad in ("0", "-5", "soon", ""):
        with pytest.raises(ValueError, match="connection_timeout must be a positive number of milliseconds"):
            AmqpAddress.parse(f"amqp://h/?connection_timeout={bad}")
    with pytest.raises(ValueError, match=r"connect_timeout is not supported; use connection_timeout"):
        AmqpAddress.parse("amqp://h/?connect_timeout=5")


def test_register_ships_the_code_once_per_spark_context(spark: Any) -> None:
    context = spark.sparkContext
    assert getattr(context, "_spark_bridge_shipped", False) is True
    before = list(context._python_includes)
    spark_bridge.register(spark)
    assert list(context._python_includes) == before
    assert before.count("hashbroker_spark_bridge.zip") == 1


def test_package_zip_temp_dir_is_removed_at_exit(tmp_path: Any) -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(spark_bridge.__file__).resolve().parent.parent
    code = "import spark_bridge; print(spark_bridge._package_zip())"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True, timeout=60
    )
    zip_path = Path(out.stdout.strip())
    assert zip_path.name == "hashbroker_spark_bridge.zip"
    assert not zip_path.parent.exists()


def test_killing_proxy_leaves_idle_connections_open(rabbitmq_url: str) -> None:
    """Unarmed, the proxy must not cut a connection that stays quiet longer than its connect timeout."""
    import time

    from pamqp import commands

    from spark_bridge._amqp import AmqpAddress, AmqpConnection

    port = int(rabbitmq_url.rsplit(":", 1)[1].split("/")[0])
    proxy = KillingProxy("127.0.0.1", port)
    try:
        with AmqpConnection(AmqpAddress.parse(proxy.url(rabbitmq_url))) as conn:
            time.sleep(6)
            conn.rpc(commands.Queue.Declare(queue="sb.idle.q", auto_delete=False), commands.Queue.DeclareOk)
            conn.rpc(commands.Queue.Delete(queue="sb.idle.q"), commands.Queue.DeleteOk)
    finally:
        proxy.close()
    assert proxy.killed == 0


def test_drain_timeout_is_an_overall_deadline(rabbitmq_url: str) -> None:
    import time

    fresh_topology(rabbitmq_url, "", ["sb.drain.q"])
    from pamqp import commands

    from spark_bridge._amqp import AmqpAddress, AmqpConnection

    with AmqpConnection(AmqpAddress.parse(rabbitmq_url)) as conn:
        conn.rpc(commands.Queue.Declare(queue="sb.drain.q", auto_delete=False), commands.Queue.DeclareOk)
    started = time.monotonic()
    assert drain(rabbitmq_url, "sb.drain.q") == []  # empty queue: nothing expected, no waiting
    assert time.monotonic() - started < 1.0
    started = time.monotonic()
    assert drain(rabbitmq_url, "sb.drain.q", expected=5, timeout=2.0) == []
    assert 2.0 <= time.monotonic() - started < 4.0
    fresh_topology(rabbitmq_url, "", ["sb.drain.q"])
