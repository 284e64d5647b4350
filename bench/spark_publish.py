"""Benchmark: rows/s published by the `amqp` Spark sink and read by the `amqp` source, hashbroker
vs RabbitMQ.

    .venv/bin/python bench/spark_publish.py                 # 1,000,000 rows into both brokers
    .venv/bin/python bench/spark_publish.py --rows 200000 --json out.json
    .venv/bin/python bench/spark_publish.py --hashbroker-uri amqp://... --rabbitmq-uri ''

hashbroker runs in a child process (so that its event loop does not share the GIL of the driver)
unless --hashbroker-uri is given. Each target gets the seed topology (x-consistent-hash, 4 queues
with weights 1,1,2,2), one untimed warm-up write (Python workers start, code ships), then the timed
write of --rows rows with routing keys "0".."N-1" and a 16-byte body, confirms on. The time is the
wall clock of `save()`; the queue depths are checked afterwards, then the topology is deleted.

The source: --rows messages are published into one classic queue, then read back twice, timed:
a batch read (`spark.read.format("amqp")`, acking, one task) and, after refilling, a streaming
query (`spark.readStream.format("amqp")`, maxMessagesPerBatch 50,000) until every row arrived.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_ROWS_PER_S = 50_000
QUEUES = [f"bench.spark.q{i}" for i in range(4)]
WEIGHTS = [1, 1, 2, 2]
EXCHANGE = "bench.spark.chx"
SOURCE_QUEUE = "bench.spark.source"

_BROKER_CHILD = """
import sys
from broker.embedded import BrokerThread
with BrokerThread(host="127.0.0.1", port=0) as broker:
    print(broker.url, flush=True)
    sys.stdin.read()
"""


def start_hashbroker() -> tuple[subprocess.Popen[str], str]:
    """Run hashbroker in its own process; it stops when our end of its stdin closes."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _BROKER_CHILD],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("amqp://"):
        proc.kill()
        raise SystemExit(f"hashbroker did not start (got {url!r})")
    return proc, url


def spark_session(master: str) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_bridge

    spark = (
        SparkSession.builder.master(master)
        .appName("spark_bridge bench")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark_bridge.register(spark)
    return spark


def write(spark: Any, uri: str, rows: int, partitions: int, max_in_flight: int) -> float:
    from pyspark.sql import functions as F

    df = spark.range(0, rows, numPartitions=partitions).select(
        F.col("id").cast("string").alias("routing_key"),
        F.lit(b"0123456789abcdef").alias("body"),
    )
    bindings = json.dumps([{"queue": q, "weight": w} for q, w in zip(QUEUES, WEIGHTS, strict=True)])
    started = time.perf_counter()
    (
        df.write.format("amqp")
        .option("uri", uri)
        .option("exchange", EXCHANGE)
        .option("routingKeyColumn", "routing_key")
        .option("bodyColumn", "body")
        .option("maxInFlight", str(max_in_flight))
        .option("declareExchange", "true")
        .option("exchangeType", "x-consistent-hash")
        .option("bindings", bindings)
        .mode("append")
        .save()
    )
    return time.perf_counter() - started


def fill_queue(spark: Any, uri: str, rows: int, args: argparse.Namespace) -> None:
    from pamqp import commands
    from pyspark.sql import functions as F

    from spark_bridge._amqp import AmqpAddress, AmqpConnection

    with AmqpConnection(AmqpAddress.parse(uri)) as conn:
        conn.rpc(commands.Queue.Declare(queue=SOURCE_QUEUE), commands.Queue.DeclareOk)
    df = spark.range(0, rows, numPartitions=args.partitions).select(F.lit(b"0123456789abcdef").alias("body"))
    (
        df.write.format("amqp")
        .option("uri", uri)
        .option("routingKey", SOURCE_QUEUE)
        .option("bodyColumn", "body")
        .option("maxInFlight", str(args.max_in_flight))
        .mode("append")
        .save()
    )


def read_batch(spark: Any, uri: str) -> tuple[float, int]:
    started = time.perf_counter()
    rows = spark.read.format("amqp").option("uri", uri).option("queue", SOURCE_QUEUE).load().count()
    return time.perf_counter() - started, int(rows)


def read_stream(spark: Any, uri: str, rows: int) -> tuple[float, int]:
    import tempfile

    seen = [0]

    def count(batch: Any, _batch_id: int) -> None:
        seen[0] += batch.count()

    reader = (
        spark.readStream.format("amqp")
        .option("uri", uri)
        .option("queue", SOURCE_QUEUE)
        .option("prefetch", "60000")
        .option("maxMessagesPerBatch", "50000")
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_source_") as checkpoint:
        query = reader.load().writeStream.foreachBatch(count).option("checkpointLocation", checkpoint).start()
        deadline = time.monotonic() + 1800
        while seen[0] < rows and time.monotonic() < deadline:
            time.sleep(0.05)
        seconds = time.perf_counter() - started
        query.stop()
    return seconds, seen[0]


def run_source(spark: Any, name: str, uri: str, args: argparse.Namespace) -> dict[str, Any]:
    from spark_bridge.topology import delete_topology

    delete_topology(uri, None, [SOURCE_QUEUE])
    fill_queue(spark, uri, 20_000, args)  # warm-up: the readers' Python workers start
    read_batch(spark, uri)
    fill_queue(spark, uri, 20_000, args)
    read_stream(spark, uri, 20_000)  # its last batch was never committed: those come back
    delete_topology(uri, None, [SOURCE_QUEUE])
    fill_queue(spark, uri, args.rows, args)
    batch_seconds, batch_rows = read_batch(spark, uri)
    fill_queue(spark, uri, args.rows, args)
    stream_seconds, stream_rows = read_stream(spark, uri, args.rows)
    delete_topology(uri, None, [SOURCE_QUEUE])
    result = {
        "target": name,
        "rows": args.rows,
        "batch_read_rows": batch_rows,
        "batch_read_rows_per_s": round(batch_rows / batch_seconds),
        "stream_read_rows": stream_rows,
        "stream_read_rows_per_s": round(stream_rows / stream_seconds),
    }
    print(
        f"{name:>10}: source batch read {batch_rows:,} rows = {batch_rows / batch_seconds:10,.0f} rows/s; "
        f"stream {stream_rows:,} rows = {stream_rows / stream_seconds:10,.0f} rows/s",
        flush=True,
    )
    return result


def run_target(spark: Any, name: str, uri: str, args: argparse.Namespace) -> dict[str, Any]:
    from spark_bridge.counts import collect_queue_counts
    from spark_bridge.topology import delete_topology

    delete_topology(uri, EXCHANGE, QUEUES)
    write(spark, uri, 20_000, args.partitions, args.max_in_flight)  # warm-up
    delete_topology(uri, EXCHANGE, QUEUES)
    seconds = write(spark, uri, args.rows, args.partitions, args.max_in_flight)
    counts = [row[1] for row in collect_queue_counts(uri, QUEUES)]
    delete_topology(uri, EXCHANGE, QUEUES)
    total = sum(c or 0 for c in counts)
    result = {
        "target": name,
        "rows": args.rows,
        "seconds": round(seconds, 3),
        "rows_per_s": round(args.rows / seconds),
        "queue_counts": counts,
        "all_rows_routed": total == args.rows,
    }
    print(
        f"{name:>10}: {args.rows:,} rows in {seconds:7.2f} s = {args.rows / seconds:10,.0f} rows/s "
        f"(queues {counts})",
        flush=True,
    )
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--max-in-flight", type=int, default=5000)
    parser.add_argument("--hashbroker-uri", default=None, help="use a running hashbroker instead of a child")
    parser.add_argument(
        "--rabbitmq-uri",
        default="amqp://guest:guest@127.0.0.1:5672/%2F",
        help="the reference RabbitMQ ('' to skip)",
    )
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--no-source", action="store_true", help="measure the sink only")
    args = parser.parse_args()

    child = None
    hb_uri = args.hashbroker_uri
    if hb_uri is None:
        child, hb_uri = start_hashbroker()
    spark = spark_session(args.master)
    results = []
    source_results = []
    try:
        results.append(run_target(spark, "hashbroker", hb_uri, args))
        if args.rabbitmq_uri:
            results.append(run_target(spark, "rabbitmq", args.rabbitmq_uri, args))
        if not args.no_source:
            source_results.append(run_source(spark, "hashbroker", hb_uri, args))
            if args.rabbitmq_uri:
                source_results.append(run_source(spark, "rabbitmq", args.rabbitmq_uri, args))
    finally:
        spark.stop()
        if child is not None:
            assert child.stdin is not None
            child.stdin.close()
            child.wait(timeout=30)
    summary: dict[str, Any] = {"master": args.master, "results": results, "source": source_results}
    if len(source_results) == 2:
        for kind in ("batch_read_rows_per_s", "stream_read_rows_per_s"):
            ratio = source_results[0][kind] / source_results[1][kind]
            summary[f"source_{kind}_ratio"] = round(ratio, 3)
            print(f"source {kind}: ratio hashbroker / rabbitmq = {ratio:.2f}")
    hb = results[0]["rows_per_s"]
    if len(results) == 2:
        summary["hashbroker_over_rabbitmq"] = round(hb / results[1]["rows_per_s"], 3)
        print(f"ratio hashbroker / rabbitmq = {summary['hashbroker_over_rabbitmq']:.2f}")
    summary["target_rows_per_s"] = TARGET_ROWS_PER_S
    summary["meets_target"] = hb >= TARGET_ROWS_PER_S
    print(
        f"hashbroker target {TARGET_ROWS_PER_S:,} rows/s: {'met' if summary['meets_target'] else 'NOT met'}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
