"""predict_queues against real routing, and the README's chi-squared uniformity method."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F

import spark_bridge
from spark_bridge.predict import chi2_critical, chi_squared
from tests.spark_support import drain, fresh_topology

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

SEED = Path(__file__).resolve().parent / "data" / "rabbitmq_consistent_hash_exchange_README.txt"

# Upper-tail chi-squared critical values (p = 0.05, p = 0.01) by degrees of freedom, from standard
# statistical tables (two decimals): independent of `chi2_critical`, which they check.
STANDARD_CHI2 = {
    1: (3.84, 6.63),
    4: (9.49, 13.28),
    17: (27.59, 33.41),
    18: (28.87, 34.81),
    19: (30.14, 36.19),
    20: (31.41, 37.57),
}
# Rows (bucket counts) of the seed README's table whose critical values are wrong, not just
# rounded differently in the last digit: 3.49 for 9.49 at 5 buckets, and rows 18-20 carry the
# values of one more degree of freedom.
SEED_WRONG_ROWS = (5, 18, 19, 20)


def test_predict_queues_matches_recorded_rabbitmq_routing_for_every_key(
    spark: Any, reference: dict[str, Any]
) -> None:
    ref = reference["big"]["chx_weights_1_1_2_2"]
    bindings = [(b["queue"], b["binding_key"]) for b in ref["bindings_in_order"]]
    df = spark.range(0, 100_000, numPartitions=2).select(
        F.col("id"), F.col("id").cast("string").alias("routing_key")
    )
    predicted = spark_bridge.predict_queues(df, "x-consistent-hash", bindings)
    rows = predicted.orderBy("id").select("predicted_queue").collect()
    index = {queue: str(i) for i, (queue, _) in enumerate(bindings)}
    assert "".join(index[r["predicted_queue"]] for r in rows) == ref["per_key_queue_index"]


def test_predict_queues_equals_actual_routing_for_every_row(spark: Any, broker_url: str) -> None:
    """Publish 20,000 keys into a consistent-hash exchange and read back where each one landed."""
    queues = [f"sb.pred.q{i}" for i in range(5)]
    weights = [3, 1, 2, 1, 5]
    exchange = "sb.pred.x"
    fresh_topology(broker_url, exchange, queues)
    keys = spark.range(0, 20_000, numPartitions=2).select(
        F.sha2(F.col("id").cast("string"), 256).alias("routing_key")
    )
    bindings = [{"queue": q, "weight": w} for q, w in zip(queues, weights, strict=True)]
    (
        keys.write.format("amqp")
        .option("uri", broker_url)
        .option("exchange", exchange)
        .option("routingKeyColumn", "routing_key")
        .option("bodyColumn", "routing_key")
        .option("declareExchange", "true")
        .option("exchangeType", "x-consistent-hash")
        .option("bindings", json.dumps(bindings))
        .mode("append")
        .save()
    )
    actual: dict[str, str] = {}
    for queue in queues:
        for message in drain(broker_url, queue):  # everything confirmed into the queue
            actual[message.body.decode()] = queue
    predicted = spark_bridge.predict_queues(keys, "x-consistent-hash", bindings).collect()
    assert len(actual) == 20_000
    assert {r["routing_key"]: r["predicted_queue"] for r in predicted} == actual
    fresh_topology(broker_url, exchange, queues)


def test_predict_queues_array_for_multi_destination_types(spark: Any) -> None:
    df = spark.createDataFrame([("a.b",), ("a.c",), ("z",)], "routing_key string")
    bindings = [("q3", "*.b"), ("q2", "#"), ("q1", "a.*")]  # not in name order: output is sorted
    out = spark_bridge.predict_queues(df, "topic", bindings).collect()
    assert {r["routing_key"]: r["predicted_queue"] for r in out} == {
        "a.b": ["q1", "q2", "q3"],
        "a.c": ["q1", "q2"],
        "z": ["q2"],
    }


def _seed_table() -> list[tuple[int, float, int, float, float]]:
    text = SEED.read_text(encoding="utf-8")
    rows = re.findall(r"^\|(\d+)\|([\d.]+)\|(\d+)\|([\d.]+)\|([\d.]+)\|$", text, flags=re.M)
    return [(int(n), float(s), int(d), float(a), float(b)) for n, s, d, a, b in rows]


def test_uniformity_reproduces_the_readme_method(spark: Any, reference: dict[str, Any]) -> None:
    keys = spark.range(0, 100_000, numPartitions=2).select(F.col("id").cast("string").alias("routing_key"))
    table = {r["buckets"]: r for r in spark_bridge.uniformity(keys).collect()}
    assert sorted(table) == list(range(2, 21))
    seed = {n: (d, a, b) for n, _, d, a, b in _seed_table()}
    assert sorted(seed) == list(range(2, 21))
    # The README's columns: degrees of freedom N - 1 and the 0.05 / 0.01 critical values. Its table
    # has typos that the computed values correct: 3.49 for 4 d.o.f. (9.49), rounding in the last
    # digit (6.63, 11.34, ...), and rows 18-20 carry the critical values of one more degree of
    # freedom. Where a standard-table value is known it is the reference, never the seed.
    for n, row in table.items():
        dof = n - 1
        assert row["rows"] == 100_000
        assert row["degrees_of_freedom"] == dof == seed[n][0]
        assert row["p_0_05"] == pytest.approx(chi2_critical(0.05, dof), abs=0.006)
        assert row["p_0_01"] == pytest.approx(chi2_critical(0.01, dof), abs=0.006)
        if dof in STANDARD_CHI2:
            assert (row["p_0_05"], row["p_0_01"]) == pytest.approx(STANDARD_CHI2[dof], abs=0.001)
        if n not in SEED_WRONG_ROWS:
            assert row["p_0_05"] == pytest.approx(seed[n][1], abs=0.011)
            assert row["p_0_01"] == pytest.approx(seed[n][2], abs=0.011)
        # The README's conclusion for its keys holds for these keys too: uniform at p = 0.01.
        assert row["chi_squared"] < row["p_0_01"]
    assert sorted(n for n in table if n - 1 in STANDARD_CHI2) == [2, 5, 18, 19, 20]
    # The seed's wrong rows, checked against the standard values (not against the code under test).
    assert seed[5][1] == 3.49 != STANDARD_CHI2[4][0]
    assert seed[5][2] == pytest.approx(STANDARD_CHI2[4][1], abs=0.001)
    for n in (18, 19, 20):
        assert (seed[n][1], seed[n][2]) == pytest.approx(STANDARD_CHI2[n], abs=0.001)
        assert abs(seed[n][1] - STANDARD_CHI2[n - 1][0]) > 1
        assert abs(table[n]["p_0_05"] - seed[n][1]) > 1
    # With 4 buckets the statistic is exactly the one of RabbitMQ's recorded per-queue counts.
    recorded = reference["big"]["chx_weights_1_1_1_1"]["counts_list_in_binding_order"]
    assert table[4]["chi_squared"] == pytest.approx(chi_squared(recorded))


def test_chi2_critical_values_match_standard_tables() -> None:
    assert round(chi2_critical(0.05, 1), 2) == 3.84
    assert round(chi2_critical(0.01, 1), 2) == 6.63
    assert round(chi2_critical(0.05, 4), 2) == 9.49
    assert round(chi2_critical(0.01, 19), 2) == 36.19
    for dof, (p05, p01) in STANDARD_CHI2.items():
        assert (round(chi2_critical(0.05, dof), 2), round(chi2_critical(0.01, dof), 2)) == (p05, p01)
    assert chi_squared([25, 25, 25, 25]) == 0.0
