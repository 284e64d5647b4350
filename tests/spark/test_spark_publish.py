"""The `amqp` sink end to end: the seed's topology, streaming with restart, properties, counts."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F

import spark_bridge
from spark_bridge.counts import collect_queue_counts
from tests.spark_support import KillingProxy, drain, fresh_topology

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

TOPOLOGY = "chx_weights_1_1_2_2"


def _stats(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _sink(df: Any, uri: str, exchange: str, stats: Path, **options: str) -> Any:
    writer = df.write.format("amqp").option("uri", uri).option("exchange", exchange)
    writer = writer.option("statsFile", str(stats))
    for key, value in options.items():
        writer = writer.option(key, value)
    return writer.mode("append")


def test_batch_seed_topology_matches_rabbitmq_reference(
    spark: Any, broker_url: str, reference: dict[str, Any], tmp_path: Path
) -> None:
    """100,000 keys "0".."99999" into x-consistent-hash with weights 1,1,2,2 give RabbitMQ's counts."""
    ref = reference["big"][TOPOLOGY]
    queues = [f"sb.seed.q{i}" for i in range(4)]
    weights = [b["binding_key"] for b in ref["bindings_in_order"]]
    exchange = "sb.seed.chx"
    fresh_topology(broker_url, exchange, queues)

    df = spark.range(0, 100_000, numPartitions=2).select(
        F.col("id").cast("string").alias("routing_key"), F.col("id").alias("n")
    )
    stats = tmp_path / "stats.jsonl"
    _sink(
        df,
        broker_url,
        exchange,
        stats,
        routingKeyColumn="routing_key",
        declareExchange="true",
        exchangeType=ref["exchange_type"],
        bindings=json.dumps([{"queue": q, "weight": int(w)} for q, w in zip(queues, weights, strict=True)]),
    ).save()

    counts = spark_bridge.queue_counts(spark, broker_url, queues).collect()
    by_queue = {row["queue"]: row["messages"] for row in counts}
    assert [by_queue[q] for q in queues] == ref["counts_list_in_binding_order"]
    [commit] = _stats(stats)
    assert commit["event"] == "commit"
    assert commit["published"] == commit["confirmed"] == 100_000
    assert commit["returned"] == commit["nacked"] == 0
    fresh_topology(broker_url, exchange, queues)


def test_streaming_rate_source_publishes_every_row_across_a_checkpoint_restart(
    spark: Any, broker_url: str, tmp_path: Path
) -> None:
    """Batch 0 succeeds; batch 1 fails mid-publish (connections cut, all retries); the restarted
    query replays batch 1. Every row read arrives, duplicates only with an identical message_id."""
    host, port = "127.0.0.1", int(broker_url.rsplit(":", 1)[1].split("/")[0])
    proxy = KillingProxy(host, port)
    uri = proxy.url(broker_url)
    exchange, queue = "sb.stream.x", "sb.stream.q"
    fresh_topology(broker_url, exchange, [queue])
    rows_per_batch = 6000
    stats = tmp_path / "stats.jsonl"
    checkpoint = tempfile.mkdtemp(dir=tmp_path)

    def start() -> Any:
        source = (
            spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", rows_per_batch)
            .option("numPartitions", 2)
            .load()
        )
        return (
            source.select(F.col("value").cast("string").alias("routing_key"), "value")
            .writeStream.format("amqp")
            .option("uri", uri)
            .option("exchange", exchange)
            .option("routingKey", "k")
            .option("declareExchange", "true")
            .option("exchangeType", "direct")
            .option("bindings", json.dumps([{"queue": queue, "key": "k"}]))
            .option("maxInFlight", "500")
            .option("statsFile", str(stats))
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )

    try:
        rows_read = 0
        query = start()
        query.awaitTermination()
        rows_read += sum(p["numInputRows"] for p in query.recentProgress)

        proxy.arm(kill_after=60_000)  # every executor connection dies after ~60 kB
        query = start()
        with pytest.raises(Exception, match=r"lost.*after \d+ messages published and \d+ confirmed"):
            query.awaitTermination()
        assert proxy.killed >= 4  # the first attempt and Spark's retries

        proxy.arm(kill_after=None)
        query = start()
        query.awaitTermination()
        rows_read += sum(p["numInputRows"] for p in query.recentProgress)
    finally:
        proxy.close()

    # The restart replays batch 1 and, with availableNow, may go on to batch 2.
    assert rows_read in (2 * rows_per_batch, 3 * rows_per_batch)
    received = drain(broker_url, queue, timeout=60)  # all it holds, duplicates too
    by_id: dict[str, bytes] = {}
    for message in received:
        assert message.message_id is not None
        assert by_id.setdefault(message.message_id, message.body) == message.body
    values = sorted(json.loads(body)["value"] for body in by_id.values())
    assert values == list(range(rows_read))  # no row lost, none invented
    assert len(received) >= len(by_id) == rows_read
    events = _stats(stats)
    commits = [e["batch_id"] for e in events if e["event"] == "commit"]
    assert commits == list(range(rows_read // rows_per_batch))
    assert sum(e["confirmed"] for e in events if e["event"] == "commit") == rows_read
    fresh_topology(broker_url, exchange, [queue])


def test_properties_headers_and_body_columns(spark: Any, broker_url: str, tmp_path: Path) -> None:
    """Property columns by AMQP name, a map column as headers, binary and string bodies."""
    exchange, queue = "sb.props.x", "sb.props.q"
    fresh_topology(broker_url, exchange, [queue])
    df = spark.createDataFrame(
        [
            (
                "k",
                "hello",
                {"tenant": "a"},
                "mid-1",
                "corr-1",
                1700000000,
                "text/plain",
                5,
                "60000",
                "t",
                "app",
            ),
            ("k", "wörld", None, None, None, None, None, None, None, None, None),
        ],
        "rk string, body string, hdrs map<string,string>, message_id string, correlation_id string, "
        "timestamp long, content_type string, priority int, expiration string, type string, app_id string",
    )
    _sink(
        df.coalesce(1),
        broker_url,
        exchange,
        tmp_path / "s.jsonl",
        routingKeyColumn="rk",
        bodyColumn="body",
        headersColumn="hdrs",
        deliveryMode="1",
        messageIdPrefix="props",
        declareExchange="true",
        bindings=json.dumps([{"queue": queue, "key": "k"}]),
    ).save()
    got = sorted(drain(broker_url, queue, expected=2), key=lambda m: m.body)
    first, second = got
    assert first.body == b"hello" and second.body == "wörld".encode()
    p = first.properties
    assert (p.message_id, p.correlation_id, p.timestamp, p.content_type) == (
        "mid-1",
        "corr-1",
        1700000000,
        "text/plain",
    )
    assert (p.priority, p.expiration, p.type, p.app_id, p.delivery_mode) == (5, "60000", "t", "app", 1)
    assert p.headers == {"tenant": "a"}
    assert second.properties.message_id == "props:0:1"  # generated: prefix, partition, row index
    assert second.properties.headers is None
    fresh_topology(broker_url, exchange, [queue])


def test_mandatory_return_fails_the_task_naming_the_count(
    spark: Any, rabbitmq_url: str, tmp_path: Path
) -> None:
    exchange = "sb.unroutable.x"
    fresh_topology(rabbitmq_url, exchange, [])
    df = spark.range(0, 50, numPartitions=1).select(F.col("id").cast("string").alias("rk"))
    with pytest.raises(
        Exception, match=r"50 of 50 messages were returned as unroutable under mandatory=true"
    ):
        _sink(
            df,
            rabbitmq_url,
            exchange,
            tmp_path / "s.jsonl",
            routingKeyColumn="rk",
            mandatory="true",
            declareExchange="true",
            exchangeType="direct",
        ).save()
    fresh_topology(rabbitmq_url, exchange, [])


def test_options_are_validated_on_the_driver(spark: Any, rabbitmq_url: str, tmp_path: Path) -> None:
    df = spark.range(3)
    with pytest.raises(Exception, match=r"option 'routingKeyColumn' names column 'nope'"):
        _sink(df, rabbitmq_url, "", tmp_path / "s", routingKeyColumn="nope").save()
    with pytest.raises(Exception, match=r"option 'maxInFlight' must be an integer"):
        _sink(df, rabbitmq_url, "", tmp_path / "s", maxInFlight="lots").save()
    with pytest.raises(Exception, match=r"can only append"):
        _sink(df, rabbitmq_url, "", tmp_path / "s").mode("overwrite").save()


def test_queue_counts_same_on_both_brokers(spark: Any, broker_url: str) -> None:
    """A list of names works everywhere; a pattern needs a management API (RabbitMQ has one)."""
    from spark_bridge.counts import find_management
    from spark_bridge.topology import declare_topology

    queues = ["sb.counts.a", "sb.counts.b"]
    fresh_topology(broker_url, "sb.counts.x", queues)
    from spark_bridge._amqp import AmqpAddress, AmqpConnection
    from spark_bridge.topology import Binding

    with AmqpConnection(AmqpAddress.parse(broker_url)) as conn:
        declare_topology(conn, "sb.counts.x", "fanout", {}, [Binding(q, "") for q in queues])
    df = spark.range(7).select(F.lit("x").alias("body"))
    df.write.format("amqp").option("uri", broker_url).option("exchange", "sb.counts.x").option(
        "bodyColumn", "body"
    ).mode("append").save()
    table = spark_bridge.queue_counts(spark, broker_url, [*queues, "sb.counts.missing"])
    assert table.columns == ["queue", "messages", "messages_ready", "messages_unacknowledged", "consumers"]
    rows = {r["queue"]: r for r in table.collect()}
    assert [rows[q]["messages"] for q in queues] == [7, 7]
    assert [rows[q]["messages_ready"] for q in queues] == [7, 7]
    assert [rows[q]["consumers"] for q in queues] == [0, 0]
    assert rows["sb.counts.missing"]["messages"] is None
    if find_management(broker_url) is not None:
        by_pattern = collect_queue_counts(broker_url, r"sb\.counts\..*")
        assert [r[0] for r in by_pattern] == queues
    else:
        with pytest.raises(ValueError, match="needs the broker's management API"):
            collect_queue_counts(broker_url, r"sb\.counts\..*")
    fresh_topology(broker_url, "sb.counts.x", queues)


def test_stream_message_ids_refuse_missing_query_or_batch_id() -> None:
    """Without Spark's query and micro-batch ids every micro-batch would reuse the same ids."""
    from pyspark.sql.types import StructType

    from spark_bridge.datasource import AmqpStreamWriter, stream_message_id_prefix
    from spark_bridge.options import SinkOptions

    refusal = (
        r"^spark_bridge: Spark did not expose the streaming query/batch id; refusing to publish "
        r"with non-unique message ids"
    )
    assert stream_message_id_prefix(None, "query-1", "7") == "query-1:7"
    assert stream_message_id_prefix("mine", "query-1", "7") == "mine:7"
    assert stream_message_id_prefix("mine", None, "0") == "mine:0"
    for query_id, batch_id in ((None, "7"), ("query-1", None), (None, None), ("", "7"), ("q", "")):
        with pytest.raises(RuntimeError, match=refusal):
            stream_message_id_prefix(None, query_id, batch_id)
    with pytest.raises(RuntimeError, match=r"did not expose the streaming batch id; refusing"):
        stream_message_id_prefix("mine", "query-1", None)
    # Outside a Spark task there is no TaskContext at all: the writer refuses before connecting.
    writer = AmqpStreamWriter(SinkOptions(uri="amqp://guest:guest@127.0.0.1:1/%2F"), StructType())
    with pytest.raises(RuntimeError, match=refusal):
        writer.write(iter([]))


def test_message_id_prefix_too_long_is_a_driver_error(spark: Any, rabbitmq_url: str, tmp_path: Path) -> None:
    from spark_bridge.options import MAX_MESSAGE_ID_PREFIX_BYTES, SinkOptions
    from spark_bridge.writer import TaskScope

    assert MAX_MESSAGE_ID_PREFIX_BYTES == 204
    longest = "p" * MAX_MESSAGE_ID_PREFIX_BYTES
    assert SinkOptions.parse({"uri": rabbitmq_url, "messageIdPrefix": longest}).message_id_prefix == longest
    # The longest prefix still fits with the largest batch id, partition and row index.
    stream_prefix = f"{longest}:{2**63 - 1}"
    assert len(TaskScope(stream_prefix, 2**31 - 1, 0).message_id(2**63 - 1).encode()) == 255
    for too_long in ("p" * 205, "é" * 103):  # 103 two-byte characters are 206 bytes
        with pytest.raises(ValueError, match=r"option 'messageIdPrefix' is 20\d bytes in UTF-8, at most 204"):
            SinkOptions.parse({"uri": rabbitmq_url, "messageIdPrefix": too_long})
    with pytest.raises(ValueError, match=r"option 'routingKey' is 256 bytes in UTF-8, at most 255"):
        SinkOptions.parse({"uri": rabbitmq_url, "routingKey": "k" * 256})
    with pytest.raises(ValueError, match=r"option 'exchange' is 256 bytes in UTF-8, at most 255"):
        SinkOptions.parse({"uri": rabbitmq_url, "exchange": "x" * 256})
    df = spark.range(3).select(F.col("id").cast("string").alias("rk"))
    with pytest.raises(Exception, match=r"option 'messageIdPrefix' is 205 bytes in UTF-8") as info:
        _sink(df, rabbitmq_url, "", tmp_path / "s", routingKeyColumn="rk", messageIdPrefix="p" * 205).save()
    assert "bytes must be in range" not in str(info.value)


def test_generated_message_ids_come_from_one_helper_and_name_the_row_over_255_bytes() -> None:
    from spark_bridge import PublishFailedError
    from spark_bridge.writer import TaskScope

    scope = TaskScope("w", 3, 1)
    assert list(scope.message_ids(9, 3)) == [b"w:3:9", b"w:3:10", b"w:3:11"]
    assert scope.message_id(10) == "w:3:10"
    long_scope = TaskScope("p" * 240, 0, 0)  # 243-byte head: row indexes of 13 digits are too long
    assert len(next(long_scope.message_ids(10**12 - 1, 1))) == 255
    with pytest.raises(
        PublishFailedError, match=r"^row 1000000000000: its generated message id would be 256 bytes"
    ):
        long_scope.message_ids(10**12 - 5, 10)
    with pytest.raises(PublishFailedError, match=r"^row 0: its generated message id would be 258 bytes"):
        TaskScope("p" * 254, 0, 0).message_ids(0, 1)


def _publish_rows(uri: str, rows: list[dict[str, Any]], **options: Any) -> Any:
    """One partition through PartitionPublisher, as a task would, without Spark."""
    import pyarrow as pa

    from spark_bridge.options import SinkOptions
    from spark_bridge.writer import PartitionPublisher, TaskScope

    opts = SinkOptions(uri=uri, **options)
    return PartitionPublisher(opts, TaskScope("unit", 0, 0)).run([pa.RecordBatch.from_pylist(rows)])


def test_out_of_range_row_values_are_publish_errors_naming_the_row(rabbitmq_url: str) -> None:
    from spark_bridge import PublishFailedError

    rows: list[dict[str, Any]] = [{"rk": "sb.none", "body": f"b{i}", "priority": 1} for i in range(4)]
    rows[2]["priority"] = 300
    with pytest.raises(PublishFailedError, match=r"row 2: priority must be between 0 and 255.*got 300"):
        _publish_rows(rabbitmq_url, rows, routing_key_column="rk", body_column="body")
    rows[2]["priority"] = -1
    with pytest.raises(PublishFailedError, match=r"row 2: priority must be between 0 and 255.*got -1"):
        _publish_rows(rabbitmq_url, rows, routing_key_column="rk", body_column="body")
    # The fast path (no property columns): a routing key over 255 bytes.
    keys: list[dict[str, Any]] = [{"rk": "k", "body": "b"} for _ in range(3)]
    keys[1]["rk"] = "k" * 256
    with pytest.raises(
        PublishFailedError, match=r"partition 0 attempt 0 .*: row 1: routing key is 256 bytes"
    ):
        _publish_rows(rabbitmq_url, keys, routing_key_column="rk", body_column="body")
    # The slow path: a message_id column value over 255 bytes.
    ids: list[dict[str, Any]] = [{"rk": "k", "body": "b", "message_id": "m"} for _ in range(3)]
    ids[2]["message_id"] = "m" * 300
    with pytest.raises(PublishFailedError, match=r"row 2: AMQP short string of 300 bytes"):
        _publish_rows(rabbitmq_url, ids, routing_key_column="rk", body_column="body")
    # In range, the same rows publish.
    rows[2]["priority"] = 255
    done = _publish_rows(rabbitmq_url, rows, routing_key_column="rk", body_column="body")
    assert (done.published, done.confirmed) == (4, 4)


def test_out_of_range_priority_fails_the_job_with_the_row(
    spark: Any, rabbitmq_url: str, tmp_path: Path
) -> None:
    df = spark.createDataFrame([("k", 1), ("k", 256)], "rk string, priority int").coalesce(1)
    with pytest.raises(
        Exception, match=r"PublishFailedError: .*row 1: priority must be between 0 and 255"
    ) as info:
        _sink(df, rabbitmq_url, "", tmp_path / "s", routingKeyColumn="rk").save()
    assert "bytes must be in range" not in str(info.value)
