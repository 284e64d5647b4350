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
import shutil
import socket
import subprocess
import sys
import sysconfig
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parent.parent
SPARK_HOME = Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def _wait_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"nothing listens on port {port} after {timeout} s")


@pytest.fixture(scope="module")
def bridge_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """hashbroker built as a wheel (pure Python), as a .zip that --py-files accepts."""
    out = tmp_path_factory.mktemp("wheel")
    source = out / "src"  # a copy: building in place would leave build/ and *.egg-info behind
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__", ".*cache", ".venv"),
    )
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)],
        env=dict(os.environ, HASHBROKER_PURE="1"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    wheels = list(out.glob("hashbroker-*.whl"))
    if build.returncode != 0 or not wheels:
        pytest.skip(f"cannot build the hashbroker wheel here: {build.stderr.strip()[-500:]}")
    shipped = out / (wheels[0].name + ".zip")  # Spark puts only .zip/.egg/.jar py-files on the path
    shutil.copyfile(wheels[0], shipped)
    return shipped


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
    work = tmp_path_factory.mktemp("cluster")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_WORKER_DIR": str(work),
        "SPARK_LOG_DIR": str(work),
        "SPARK_MASTER_WEBUI_PORT": str(_free_port()),
        "SPARK_WORKER_WEBUI_PORT": str(_free_port()),
    }
    if "JAVA_HOME" in os.environ:
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = []
    try:
        master_log = open(work / "master.log", "w")  # noqa: SIM115 - closed in finally
        procs.append(
            subprocess.Popen(
                [
                    spark_class,
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                ],
                env=env,
                stdout=master_log,
                stderr=subprocess.STDOUT,
            )
        )
        _wait_port(port, 120)
        worker_args = ["--host", "127.0.0.1", "--cores", "2", "--memory", "1G", "--work-dir", str(work)]
        worker_log = open(work / "worker.log", "w")  # noqa: SIM115 - closed in finally
        procs.append(
            subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", *worker_args, url],
                env=env,
                stdout=worker_log,
                stderr=subprocess.STDOUT,
            )
        )
        deadline = time.monotonic() + 120
        while "Successfully registered with master" not in (work / "worker.log").read_text():
            if time.monotonic() > deadline:
                pytest.fail("the worker did not register:\n" + (work / "worker.log").read_text()[-3000:])
            time.sleep(0.5)
        yield url
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


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
