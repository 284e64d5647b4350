"""Benchmark: rows/s published by the `amqp` Spark sink and read by the `amqp` source, hashbroker
vs RabbitMQ in the same run.

    .venv/bin/python bench/spark_publish.py                        # 1,000,000 rows, local[2]
    .venv/bin/python bench/spark_publish.py --cluster              # on a standalone cluster
    .venv/bin/python bench/spark_publish.py --rows 200000 --repeats 3 --only source --json out.json
    .venv/bin/python bench/spark_publish.py --hashbroker-uri amqp://... --rabbitmq-uri ''

hashbroker runs as `hashbroker serve --port <free> --data-dir <tmp>` in its own process unless
--hashbroker-uri is given. Spark runs in `local[2]` (--master) or, with --cluster, on a standalone
master and worker started with pyspark's `bin/spark-class` (bench/spark_cluster.py), the bridge
shipped to the executors as a built wheel. The brokers alternate (the order flips every repeat);
each figure is the median of --repeats timed runs, and the ratio is hashbroker / RabbitMQ.

The sink: each target gets the seed topology (x-consistent-hash, 4 queues with weights 1,1,2,2),
then --rows rows with routing keys "0".."N-1" and a 16-byte body are written, confirms on; the time
is the wall clock of `save()`; the queue depths are checked afterwards, then the topology deleted.

The source: --rows 16-byte messages are put into one classic queue by the bridge's own sink
(pipelined, confirms on; untimed), then read back, timed: a batch read (`spark.read.format("amqp")`
with `.count()`, acking, one task) and, after refilling, a streaming query (`spark.readStream`,
prefetch 60,000, maxMessagesPerBatch 50,000) until every row arrived. One untimed warm-up of each
per target starts the Python workers first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.spark_cluster import free_port, standalone_cluster, wait_port  # noqa: E402

TARGET_ROWS_PER_S = 50_000
RUN = f"{os.getpid()}"
QUEUES = [f"bench.spark.{RUN}.q{i}" for i in range(4)]
WEIGHTS = [1, 1, 2, 2]
EXCHANGE = f"bench.spark.{RUN}.chx"
SOURCE_QUEUE = f"bench.spark.{RUN}.source"
WARM_UP_ROWS = 20_000


def start_hashbroker(data_dir: str) -> tuple[subprocess.Popen[bytes], str]:
    """`hashbroker serve` in its own process (its event loop does not share the driver's GIL)."""
    port = free_port()
    cmd = [sys.executable, "-m", "broker.cli.main", "serve", "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(
        [*cmd, "--data-dir", data_dir, "--log-level", "WARNING"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        wait_port(port, 60)
    except RuntimeError:
        proc.kill()
        raise
    return proc, f"amqp://guest:guest@127.0.0.1:{port}/%2F"


def spark_session(master: str, wheel: Path | None) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_bridge

    builder = (
        SparkSession.builder.master(master)
        .appName("spark_bridge bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.python.worker.reuse", "true")
    )
    if wheel is not None:
        builder = builder.config("spark.submit.pyFiles", str(wheel))
        builder = builder.config("spark.executor.memory", "1g").config("spark.cores.max", "2")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark_bridge.register(spark, ship_code=wheel is None)
    return spark


def write(spark: Any, uri: str, rows: int, args: argparse.Namespace) -> float:
    from pyspark.sql import functions as F

    df = spark.range(0, rows, numPartitions=args.partitions).select(
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
        .option("maxInFlight", str(args.max_in_flight))
        .option("declareExchange", "true")
        .option("exchangeType", "x-consistent-hash")
        .option("bindings", bindings)
        .mode("append")
        .save()
    )
    return time.perf_counter() - started


def fill_queue(spark: Any, uri: str, rows: int, args: argparse.Namespace) -> None:
    """Put `rows` messages into the (fresh) source queue with the bridge's sink, confirms on."""
    from pamqp import commands
    from pyspark.sql import functions as F

    from spark_bridge._amqp import AmqpAddress, AmqpConnection
    from spark_bridge.topology import delete_topology

    delete_topology(uri, None, [SOURCE_QUEUE])
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
    depth = queue_depth(uri)
    if depth != rows:
        raise RuntimeError(f"{uri}: the source queue holds {depth} messages, not {rows}")


def queue_depth(uri: str) -> int:
    from spark_bridge.consumer import AmqpConsumer
    from spark_bridge.wire import AmqpAddress

    with AmqpConsumer(AmqpAddress.parse(uri)) as conn:
        return int(conn.message_count(SOURCE_QUEUE))


def read_batch(spark: Any, uri: str) -> tuple[float, int]:
    started = time.perf_counter()
    rows = spark.read.format("amqp").option("uri", uri).option("queue", SOURCE_QUEUE).load().count()
    return time.perf_counter() - started, int(rows)


def read_stream(spark: Any, uri: str, rows: int) -> tuple[float, int]:
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
    with tempfile.TemporaryDirectory(prefix="bench_source_") as checkpoint:
        started = time.perf_counter()
        query = reader.load().writeStream.foreachBatch(count).option("checkpointLocation", checkpoint).start()
        deadline = time.monotonic() + 3600
        while seen[0] < rows and time.monotonic() < deadline:
            time.sleep(0.05)
        seconds = time.perf_counter() - started
        query.stop()
    return seconds, seen[0]


def sink_once(spark: Any, uri: str, rows: int, args: argparse.Namespace) -> dict[str, Any]:
    from spark_bridge.counts import collect_queue_counts
    from spark_bridge.topology import delete_topology

    delete_topology(uri, EXCHANGE, QUEUES)
    seconds = write(spark, uri, rows, args)
    counts = [row[1] for row in collect_queue_counts(uri, QUEUES)]
    delete_topology(uri, EXCHANGE, QUEUES)
    routed = sum(c or 0 for c in counts)
    return {"seconds": seconds, "rows_per_s": rows / seconds, "queue_counts": counts, "routed": routed}


def source_once(spark: Any, uri: str, rows: int, args: argparse.Namespace) -> dict[str, Any]:
    from spark_bridge.topology import delete_topology

    fill_queue(spark, uri, rows, args)
    batch_seconds, batch_rows = read_batch(spark, uri)
    fill_queue(spark, uri, rows, args)
    stream_seconds, stream_rows = read_stream(spark, uri, rows)
    delete_topology(uri, None, [SOURCE_QUEUE])
    return {
        "batch_read_rows": batch_rows,
        "batch_read_rows_per_s": batch_rows / batch_seconds,
        "stream_read_rows": stream_rows,
        "stream_read_rows_per_s": stream_rows / stream_seconds,
    }


def measure(
    spark: Any, targets: list[tuple[str, str]], args: argparse.Namespace
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Warm each target up once, then `repeats` rounds with the brokers' order flipped each round."""
    kinds: list[tuple[str, Callable[..., dict[str, Any]]]] = []
    if args.only in ("both", "sink"):
        kinds.append(("sink", sink_once))
    if args.only in ("both", "source"):
        kinds.append(("source", source_once))
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        name: {k: [] for k, _ in kinds} for name, _ in targets
    }
    for _name, uri in targets:  # the Python workers start, the code ships; not timed
        for _, once in kinds:
            once(spark, uri, WARM_UP_ROWS, args)
    for rep in range(args.repeats):
        order = targets if rep % 2 == 0 else targets[::-1]
        for name, uri in order:
            for kind, once in kinds:
                result = once(spark, uri, args.rows, args)
                runs[name][kind].append(result)
                shown = {k: (round(v) if isinstance(v, float) else v) for k, v in result.items()}
                print(f"  round {rep + 1} {name:>10} {kind}: {shown}", flush=True)
    return runs


def summarise(
    runs: dict[str, dict[str, list[dict[str, Any]]]], args: argparse.Namespace, mode: str
) -> dict[str, Any]:
    metrics = {"sink": ["rows_per_s"], "source": ["batch_read_rows_per_s", "stream_read_rows_per_s"]}
    summary: dict[str, Any] = {"mode": mode, "rows": args.rows, "repeats": args.repeats, "medians": {}}
    for name, kinds in runs.items():
        for kind, results in kinds.items():
            for metric in metrics[kind]:
                median = statistics.median(r[metric] for r in results)
                summary["medians"].setdefault(name, {})[f"{kind}.{metric}"] = round(median)
    print(f"\n{mode}: {args.rows:,} rows, median of {args.repeats}")
    print(f"{'figure':<32} {'hashbroker':>12} {'rabbitmq':>12} {'ratio':>7}")
    hb = summary["medians"].get("hashbroker", {})
    rmq = summary["medians"].get("rabbitmq", {})
    for key in hb:
        ratio = hb[key] / rmq[key] if rmq.get(key) else None
        summary.setdefault("ratios", {})[key] = None if ratio is None else round(ratio, 3)
        shown = "" if ratio is None else f"{ratio:7.2f}"
        print(f"{key:<32} {hb[key]:>12,} {rmq.get(key, 0):>12,} {shown:>7}")
    if "sink.rows_per_s" in hb:
        summary["meets_sink_target"] = hb["sink.rows_per_s"] >= TARGET_ROWS_PER_S
        met = "met" if summary["meets_sink_target"] else "NOT met"
        print(f"hashbroker sink target {TARGET_ROWS_PER_S:,} rows/s: {met}")
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds per broker (median)")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--cluster", action="store_true", help="a standalone master and worker instead")
    parser.add_argument("--only", choices=["both", "sink", "source"], default="both")
    parser.add_argument("--max-in-flight", type=int, default=5000)
    parser.add_argument("--hashbroker-uri", default=None, help="use a running hashbroker instead of a child")
    parser.add_argument(
        "--rabbitmq-uri",
        default="amqp://guest:guest@127.0.0.1:5672/%2F",
        help="the reference RabbitMQ ('' to skip)",
    )
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()

    with ExitStack() as stack:
        hb_uri = args.hashbroker_uri
        if hb_uri is None:
            data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench_spark_hb_"))
            child, hb_uri = start_hashbroker(data_dir)
            stack.callback(child.wait, 30)
            stack.callback(child.terminate)
        wheel = None
        master = args.master
        if args.cluster:
            master, wheel = stack.enter_context(standalone_cluster())
        mode = "standalone cluster (1 worker, 2 cores)" if args.cluster else master
        spark = spark_session(master, wheel)
        stack.callback(spark.stop)
        targets = [("hashbroker", hb_uri)]
        if args.rabbitmq_uri:
            targets.append(("rabbitmq", args.rabbitmq_uri))
        runs = measure(spark, targets, args)
    summary = summarise(runs, args, mode)
    summary["runs"] = runs
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2, default=float) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
