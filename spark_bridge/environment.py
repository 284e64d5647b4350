"""Checking that the Python Spark runs the bridge in can import what the bridge needs.

PySpark starts its Python workers with the interpreter named by PYSPARK_PYTHON when the driver
started (spark-submit sets it from `spark.pyspark.python`), else `python3` from the PATH: not with
the driver's own interpreter. When that
interpreter lacks pamqp or pyarrow the failure would otherwise surface deep inside a task as a bare
ModuleNotFoundError; these checks say which interpreter it was and what to set instead.

Only the standard library is imported here: the probe runs where the dependencies may be missing.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

from spark_bridge.errors import WorkerEnvironmentError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: What a task of the `amqp` data source imports (pyspark itself comes with Spark's worker path).
WORKER_MODULES: tuple[str, ...] = ("pamqp", "pyarrow")


def missing_modules(modules: tuple[str, ...] = WORKER_MODULES) -> list[str]:
    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def _advice(interpreter: str, missing: list[str], where: str, driver: str | None) -> str:
    """`driver` is the driver's interpreter when known (on the driver), None inside a task."""
    target = driver or "a Python that has them, such as the driver's"
    return (
        f"spark_bridge: the Python that Spark runs {where} ({interpreter}) cannot import "
        f"{', '.join(missing)}. Spark's Python workers do not use the driver's interpreter"
        f"{f' ({driver})' if driver else ''} unless told to: set PYSPARK_PYTHON={target} in the driver's "
        f"environment before the SparkSession starts (with spark-submit: --conf spark.pyspark.python=...), "
        f"or install the bridge's "
        f"dependencies for that interpreter (pip install 'hashbroker[spark]'), or ship them to the "
        f"executors (a built hashbroker wheel through spark.submit.pyFiles / --py-files, or a packed "
        f"venv through spark.archives)."
    )


def require_worker_modules() -> None:
    """Called at the start of every task: fail with the advice instead of a bare import error."""
    missing = missing_modules()
    if missing:
        raise WorkerEnvironmentError(_advice(sys.executable, missing, "this task in", None))


def probe(_: Any) -> list[tuple[str, str, list[str]]]:
    """Run in a Spark task: (interpreter, version, missing modules) of that worker."""
    return [(sys.executable, sys.version.split()[0], missing_modules())]


def configured_python(spark: SparkSession) -> str:
    """The interpreter PySpark starts its workers with: PYSPARK_PYTHON as the driver read it at
    start-up (spark-submit sets it from spark.pyspark.python), else `python3` from the PATH."""
    executable = getattr(spark.sparkContext, "pythonExec", None)
    return str(executable) if executable else os.environ.get("PYSPARK_PYTHON", "python3")


def check_workers(spark: SparkSession) -> None:
    """One tiny job that imports the bridge's dependencies in a worker, as the data source will."""
    context = spark.sparkContext
    try:
        results = context.parallelize([0], 1).mapPartitions(probe).collect()
    except Exception as exc:
        raise WorkerEnvironmentError(
            f"spark_bridge: a Spark task could not run the bridge's environment check in the "
            f"worker Python ({configured_python(spark)}): {str(exc).splitlines()[0][:500]}"
        ) from exc
    for interpreter, _version, missing in results:
        if missing:
            raise WorkerEnvironmentError(
                _advice(
                    f"{interpreter}; configured: {configured_python(spark)}",
                    missing,
                    "tasks in",
                    sys.executable,
                )
            )
