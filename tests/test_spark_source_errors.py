"""Spark's Python workers running an interpreter without the bridge's dependencies: `register`
and the first data-source call say which interpreter it is and what to set, instead of failing
deep inside a task with a bare ModuleNotFoundError."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parent.parent

# A driver of its own: the interpreter of a SparkContext's workers is fixed when it starts.
DRIVER = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession
    spark = (
        SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    import spark_bridge
    try:
        spark_bridge.register(spark)
        print("REGISTER OK")
    except spark_bridge.WorkerEnvironmentError as exc:
        print("REGISTER ERROR:", exc)
    spark_bridge.register(spark, check_workers=False)
    from broker.embedded import BrokerThread
    with BrokerThread(port=0) as broker:
        try:
            spark.range(3).write.format("amqp").option("uri", broker.url).mode("append").save()
            print("TASK OK")
        except Exception as exc:
            print("TASK ERROR:", " ".join(str(exc).split()))
    spark.stop()
    """
)


def test_workers_without_the_dependencies_get_a_clear_error(tmp_path: Path) -> None:
    bare = tmp_path / "bare-python"  # the same interpreter without site-packages: no pamqp, no pyarrow
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    bare.chmod(0o755)
    check = subprocess.run([str(bare), "-c", "import pamqp"], capture_output=True, timeout=60)
    assert check.returncode != 0
    env = dict(os.environ, PYSPARK_PYTHON=str(bare), SPARK_LOCAL_IP="127.0.0.1", PYTHONPATH=str(ROOT))
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    out = subprocess.run(
        [sys.executable, "-c", DRIVER], cwd=ROOT, env=env, capture_output=True, text=True, timeout=500
    )
    lines = {line.split(":", 1)[0]: line for line in out.stdout.splitlines() if ":" in line}
    register = lines.get("REGISTER ERROR", "")
    # the wrapper execs the interpreter, so the worker reports its path; the configured one is the wrapper
    assert f"Python that Spark runs tasks in ({sys.executable}; configured: {bare})" in register, (
        out.stdout + out.stderr[-3000:]
    )
    assert "cannot import pamqp, pyarrow" in register
    assert f"set PYSPARK_PYTHON={sys.executable}" in register
    assert "spark.pyspark.python" in register and "spark.submit.pyFiles" in register
    task = lines.get("TASK ERROR", "")
    assert "WorkerEnvironmentError" in task, out.stdout + out.stderr[-3000:]
    assert f"({sys.executable}) cannot import pamqp, pyarrow" in task
    assert "set PYSPARK_PYTHON=" in task
    assert "No module named" not in task
