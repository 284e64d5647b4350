"""A persistent sink's rows survive a broker restart: the topology it declares is durable by default."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F

from broker.embedded import BrokerThread
from spark_bridge.topology import passive_counts

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def test_persistent_rows_in_a_declared_topology_survive_a_restart(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    queues = ["orders.eu", "orders.us"]
    bindings = json.dumps([{"queue": q, "key": q.split(".")[1]} for q in queues])
    with BrokerThread(port=0, data_dir=str(data)) as broker:
        df = spark.range(0, 1000, numPartitions=2).select(
            F.when(F.col("id") % 4 == 0, "us").otherwise("eu").alias("region"), F.col("id")
        )
        (
            df.write.format("amqp")
            .option("uri", broker.url)
            .option("exchange", "orders")
            .option("routingKeyColumn", "region")
            .option("declareExchange", "true")
            .option("bindings", bindings)
            .mode("append")
            .save()
        )
    with BrokerThread(port=0, data_dir=str(data)) as broker:
        counts = {c.queue: c.messages_ready for c in passive_counts(broker.url, queues)}
    assert counts == {"orders.eu": 750, "orders.us": 250}
