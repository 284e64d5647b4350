"""Spark bridge for hashbroker and RabbitMQ.

* `register(spark)` makes `format("amqp")` available for `df.write` / `df.writeStream` and for
  `spark.read` / `spark.readStream`;
* `queue_counts(spark, uri, queues)` reads queue depths into a DataFrame;
* `predict_queues(df, ...)` computes where each row's routing key would go, without a broker;
* `uniformity(df, ...)` is the chi-squared table of the consistent-hash README.

Only the standard library, pamqp (a core dependency) and the `spark` extra (pyspark, pyarrow,
pandas) are needed; heavy imports happen inside the functions so that `import spark_bridge`
stays cheap on machines without Spark.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_bridge.errors import (
    AmqpBridgeError,
    BrokerUnavailableError,
    ChannelClosedError,
    ConnectionLostError,
    PublishFailedError,
    WorkerEnvironmentError,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "AmqpBridgeError",
    "BrokerUnavailableError",
    "ChannelClosedError",
    "ConnectionLostError",
    "PublishFailedError",
    "WorkerEnvironmentError",
    "chi2_critical",
    "predict_queues",
    "queue_counts",
    "register",
    "uniformity",
]

_SHIPPED_PACKAGES = ("spark_bridge", "exchanges")
# Set on a SparkContext object once the zip was added to it. An attribute of the context itself,
# not its id(): ids are reused once a stopped context is garbage collected, and a new context must
# ship the code again.
_SHIPPED_MARK = "_spark_bridge_shipped"


def _package_zip() -> str:
    """Zip spark_bridge (and the exchanges library the UDFs call) for `addPyFile`.

    Executors' Python workers do not see the driver's sys.path, so code the data source and the
    UDFs import must be shipped unless hashbroker is installed on every node; shipping always is
    harmless (the zip holds the same code) and keeps local[*] and clusters alike.
    """
    root = Path(__file__).resolve().parent.parent
    tmp_dir = tempfile.mkdtemp(prefix="spark_bridge_")
    # On a cluster Spark's file server reads this file whenever an executor (also one that joins
    # later) fetches it, so it must outlive the call: it is removed when the interpreter exits.
    atexit.register(shutil.rmtree, tmp_dir, True)
    target = Path(tmp_dir) / "hashbroker_spark_bridge.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in _SHIPPED_PACKAGES:
            pkg_dir = root / package
            if not pkg_dir.is_dir():
                continue
            for path in sorted(pkg_dir.rglob("*.py")):
                zf.write(path, path.relative_to(root).as_posix())
    return os.fspath(target)


def register(spark: SparkSession, check_workers: bool = True, ship_code: bool = True) -> None:
    """Register the `amqp` data source on `spark` and ship the bridge's code to its executors.

    `ship_code=False` leaves shipping to the deployment (hashbroker installed on every node, or its
    wheel in spark.submit.pyFiles / --py-files).

    With `check_workers` (once per SparkContext) a one-task job imports the bridge's dependencies
    in a Python worker and raises `WorkerEnvironmentError`, naming the interpreter Spark uses and
    what to set, when they are missing there.
    """
    from spark_bridge.datasource import AmqpDataSource

    context = spark.sparkContext
    if not getattr(context, _SHIPPED_MARK, False):
        if ship_code:
            context.addPyFile(_package_zip())
        if check_workers:
            from spark_bridge.environment import check_workers as check

            check(spark)
        setattr(context, _SHIPPED_MARK, True)
    spark.dataSource.register(AmqpDataSource)


def __getattr__(name: str) -> Any:
    """Lazy access to the Spark-heavy helpers (they import pyspark and pandas)."""
    if name == "queue_counts":
        from spark_bridge.counts import queue_counts

        return queue_counts
    if name in ("predict_queues", "uniformity", "chi2_critical"):
        from spark_bridge import predict

        return getattr(predict, name)
    raise AttributeError(f"module 'spark_bridge' has no attribute {name!r}")
