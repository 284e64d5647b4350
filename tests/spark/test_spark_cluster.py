"""The sink and the source on a Spark standalone cluster on loopback (a master and a worker JVM
started with pyspark's bin/spark-class, executors in their own JVM), with the bridge shipped to
executors that do not have it: a built hashbroker wheel, renamed .zip, in spark.submit.pyFiles.

The executors' Python is the same interpreter started with -S and the venv's site-packages on its
path: pamqp and pyarrow import, but hashbroker's editable install (a .pth hook) does not, so
`spark_bridge` there can only come from the shipped wheel; the test checks where it came from.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.spark_cluster import build_wheel, spark_cluster  # noqa: E402


@pytest.fixture(scope="module")
def bridge_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """hashbroker built as a wheel (pure Python), as a .zip that --py-files accepts."""
    try:
        return build_wheel(tmp_path_factory.mktemp("wheel"))
    except RuntimeError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def executor_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wrapper = tmp_path_factory.mktemp("python") / "python-without-hashbroker"
    site_packages = sysconfig.get_paths()["purelib"]
    wrapper.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{site_packages}" exec {sys.executable} -S "$@"\n'
    )
    wrapper.chmod(0o755)
    probe = subprocess.run(
        [
            str(wrapper),
            "-c",
            "import pamqp, pyarrow\ntry:\n import spark_bridge\nexcept ImportError: print('absent')",
        ],
        cwd="/",
        env={"PATH": os.environ.get("PATH", "")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.stdout.strip() == "absent", probe.stdout + probe.stderr
    return wrapper


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone master and one worker (2 cores, 1 GiB) on 127.0.0.1."""
    with spark_cluster(tmp_path_factory.mktemp("cluster"), cores=2, memory="1G") as url:
        yield url


DRIVER = textwrap.dedent(
    """
    import json, sys, time
    import pika
    from pyspark.sql import SparkSession
    import spark_bridge
    from broker.embedded import BrokerThread
    from spark_bridge.consumer import AmqpConsumer
    from spark_bridge.wire import AmqpAddress

    master, wheel, python = sys.argv[1:4]
    spark = (
        SparkSession.builder.master(master).appName("spark_bridge cluster test")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.submit.pyFiles", wheel)
        .config("spark.executor.memory", "512m").config("spark.cores.max", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark_bridge.register(spark, ship_code=False)  # the wheel is the only copy the executors get
    out = {}
    out["executor_bridge"] = (
        spark.sparkContext.parallelize([0], 1)
        .map(lambda _: (__import__("spark_bridge").__file__, __import__("socket").gethostname()))
        .collect()[0][0]
    )
    queue = "sb.cluster.q"
    with BrokerThread(host="127.0.0.1", port=0) as broker:
        with pika.BlockingConnection(pika.URLParameters(broker.url)) as conn:
            conn.channel().queue_declare(queue)
        rows = 10_000
        df = spark.range(0, rows, numPartitions=2).selectExpr("cast(id as string) as n")
        df.write.format("amqp").option("uri", broker.url).option("routingKey", queue).mode("append").save()
        with AmqpConsumer(AmqpAddress.parse(broker.url)) as conn:
            out["sink_count"] = conn.message_count(queue)
        read = spark.read.format("amqp").option("uri", broker.url).option("queue", queue).load()
        got = read.selectExpr("cast(body as string) as body").collect()
        out["batch_rows"] = len(got)
        out["batch_distinct"] = len({json.loads(r.body)["n"] for r in got})
        df.write.format("amqp").option("uri", broker.url).option("routingKey", queue).mode("append").save()
        seen = []
        query = (
            spark.readStream.format("amqp").option("uri", broker.url).option("queue", queue)
            .option("maxMessagesPerBatch", "2500").load()
            .writeStream.foreachBatch(lambda b, _: seen.extend(r.body for r in b.select("body").collect()))
            .option("checkpointLocation", sys.argv[4]).start()
        )
        deadline = time.monotonic() + 300
        while len(seen) < rows and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(2)
        query.stop()
        out["stream_rows"] = len(seen)
        out["stream_distinct"] = len({json.loads(b)["n"] for b in seen})
        with AmqpConsumer(AmqpAddress.parse(broker.url)) as conn:
            out["left"] = conn.message_count(queue)
    out["executors"] = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    spark.stop()
    print("RESULT " + json.dumps(out))
    """
)


def test_sink_and_source_on_a_standalone_cluster_with_the_shipped_wheel(
    cluster: str, bridge_wheel: Path, executor_python: Path, tmp_path: Path
) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), SPARK_LOCAL_IP="127.0.0.1")
    env["PYSPARK_PYTHON"] = str(executor_python)  # the driver's own Python keeps the bridge
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            DRIVER,
            cluster,
            str(bridge_wheel),
            str(executor_python),
            str(tmp_path / "ck"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=800,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-5000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    assert bridge_wheel.name in result["executor_bridge"]  # imported from the shipped wheel
    assert result["executors"] >= 1  # not local mode: executors registered with the driver
    assert result["sink_count"] == 10_000
    assert result["batch_rows"] == result["batch_distinct"] == 10_000
    assert result["stream_distinct"] == 10_000 and result["stream_rows"] >= 10_000
    assert result["left"] == 0
