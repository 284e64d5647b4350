"""A complete Spark -> AMQP pipeline with hashbroker's Spark bridge.

    .venv/bin/python examples/spark_pipeline.py                      # embedded hashbroker
    .venv/bin/python examples/spark_pipeline.py --uri amqp://guest:guest@127.0.0.1:5672/%2F

1. batch: publish --rows rows (routing keys "0".."N-1") into an x-consistent-hash exchange with four
   queues of weights 1, 1, 2, 2 (the topology of the plugin's README);
2. streaming: publish from the `rate` source into the same exchange for --stream-seconds
   (routing keys "s0", "s1", ...), checkpointed, then stop the query;
3. per-queue counts with `spark_bridge.queue_counts`;
4. predicted vs actual: `spark_bridge.predict_queues` over exactly the keys published, grouped per
   queue, next to the counts the broker reports, plus the chi-squared uniformity of the keys.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

EXCHANGE = "example.chx"
QUEUES = ["example.q0", "example.q1", "example.q2", "example.q3"]
WEIGHTS = [1, 1, 2, 2]


@contextlib.contextmanager
def broker(uri: str | None) -> Iterator[str]:
    """The given URI, or an embedded hashbroker for the duration of the pipeline."""
    if uri:
        yield uri
        return
    from broker.embedded import BrokerThread

    with BrokerThread(host="127.0.0.1", port=0) as embedded:
        yield embedded.url


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--uri", default=None, help="AMQP URI (default: start an embedded hashbroker)")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--stream-seconds", type=float, default=6.0)
    parser.add_argument("--rows-per-second", type=int, default=2_000)
    args = parser.parse_args()

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import spark_bridge
    from spark_bridge.topology import delete_topology

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("spark_bridge example")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark_bridge.register(spark)
    bindings = [{"queue": q, "weight": w} for q, w in zip(QUEUES, WEIGHTS, strict=True)]

    try:
        with broker(args.uri) as uri:
            delete_topology(uri, EXCHANGE, QUEUES)
            sink_options = {
                "uri": uri,
                "exchange": EXCHANGE,
                "routingKeyColumn": "routing_key",
                "declareExchange": "true",
                "exchangeType": "x-consistent-hash",
                "bindings": json.dumps(bindings),
            }

            # 1. batch publish: the body is the row as JSON (no bodyColumn)
            batch = spark.range(0, args.rows, numPartitions=2).select(
                F.col("id").cast("string").alias("routing_key"), F.col("id").alias("order_id")
            )
            started = time.perf_counter()
            batch.write.format("amqp").options(**sink_options).mode("append").save()
            print(f"batch: {args.rows:,} rows published in {time.perf_counter() - started:.1f} s")

            # 2. streaming publish from the rate source
            checkpoint = tempfile.mkdtemp(prefix="spark_bridge_example_")
            stream = (
                spark.readStream.format("rate")
                .option("rowsPerSecond", args.rows_per_second)
                .option("numPartitions", 2)
                .load()
                .select(F.concat(F.lit("s"), F.col("value")).alias("routing_key"), "value", "timestamp")
            )
            query = (
                stream.writeStream.format("amqp")
                .options(**sink_options)
                .option("checkpointLocation", checkpoint)
                .trigger(processingTime="1 second")
                .start()
            )
            time.sleep(args.stream_seconds)
            # stop between two micro-batches, so that every published row is in recentProgress
            while query.status["isTriggerActive"]:
                time.sleep(0.02)
            query.stop()
            streamed = sum(p["numInputRows"] for p in query.recentProgress)
            print(f"stream: {streamed:,} rows published from the rate source")

            # 3. per-queue counts from the broker
            counts = spark_bridge.queue_counts(spark, uri, QUEUES)
            counts.show()

            # 4. predicted vs actual, for exactly the keys that were published
            published_keys = batch.select("routing_key").unionByName(
                spark.range(0, streamed).select(
                    F.concat(F.lit("s"), F.col("id").cast("string")).alias("routing_key")
                )
            )
            predicted = (
                spark_bridge.predict_queues(published_keys, "x-consistent-hash", bindings)
                .groupBy(F.col("predicted_queue").alias("queue"))
                .count()
                .withColumnRenamed("count", "predicted")
            )
            comparison = counts.select("queue", F.col("messages").alias("actual")).join(predicted, "queue")
            comparison = comparison.withColumn("equal", F.col("actual") == F.col("predicted")).orderBy(
                "queue"
            )
            comparison.show()
            print("chi-squared uniformity of the batch keys (the README's method):")
            spark_bridge.uniformity(batch, key_col="routing_key").show(30)
            all_equal = all(row["equal"] for row in comparison.collect())
            print(
                "predicted == actual for every queue"
                if all_equal
                else "MISMATCH between predicted and actual"
            )
            delete_topology(uri, EXCHANGE, QUEUES)
            return 0 if all_equal else 1
    finally:
        spark.stop()


if __name__ == "__main__":
    raise SystemExit(main())
