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
    received = drain(broker_url, queue, expected=10 * rows_per_batch, timeout=60)
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
