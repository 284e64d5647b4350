"""Routing predictions on Spark: where keys would go, and how uniform the distribution is.

Both helpers run `exchanges.predict` (the same routing code hashbroker uses, checked against
RabbitMQ 3.10.8) inside vectorised pandas UDFs, so billions of keys can be checked on a cluster
without any broker. The UDFs receive Arrow batches (10,000 rows by default) and call `predict`
once per batch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from spark_bridge.options import Binding

# Exchange types that deliver a message to at most one destination: their prediction is a string
# column (null when unroutable) rather than an array.
SINGLE_DESTINATION_TYPES = frozenset({"x-consistent-hash", "x-modulus-hash"})


def normalize_bindings(bindings: Iterable[Any]) -> list[tuple[str, str]]:
    """Accept (queue, key) pairs or {queue, weight|key} dicts, as in the sink's `bindings` option."""
    out = []
    for item in bindings:
        binding = Binding.parse(item)
        out.append((binding.queue, binding.key))
    return out


def _predict(
    exchange_type: str,
    bindings: Sequence[tuple[str, str]],
    keys: list[str],
    arguments: Mapping[str, Any] | None,
    headers: list[Any] | None = None,
) -> list[list[str]]:
    import exchanges

    return exchanges.predict(exchange_type, bindings, keys, arguments=arguments, headers=headers)


def predict_queues(
    df: Any,
    exchange_type: str,
    bindings: Iterable[Any],
    arguments: Mapping[str, Any] | None = None,
    routing_key_col: str = "routing_key",
    *,
    output_col: str = "predicted_queue",
    headers_col: str | None = None,
    multi: bool | None = None,
) -> Any:
    """Return `df` with `output_col` = the destination(s) `exchange_type` would route each row to.

    For x-consistent-hash and x-modulus-hash the column is a string (null when unroutable);
    for other types, or with `multi=True`, it is an array of the destination names, sorted
    (routing returns them in no meaningful order, not binding order, so they are sorted to keep
    results deterministic); an unroutable row gets an empty array.
    The bindings are validated on the driver first, so a bad weight fails here, not in a task.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.functions import pandas_udf
    from pyspark.sql.types import ArrayType, StringType

    specs = normalize_bindings(bindings)
    args = dict(arguments or {})
    _predict(exchange_type, specs, [], args)  # raises AmqpError for what RabbitMQ would refuse
    as_array = (exchange_type not in SINGLE_DESTINATION_TYPES) if multi is None else multi
    out_type = ArrayType(StringType()) if as_array else StringType()

    def route(keys: pd.Series, headers: pd.Series | None = None) -> pd.Series:
        key_list = ["" if k is None else str(k) for k in keys.tolist()]
        header_list = None
        if headers is not None:
            header_list = [None if h is None else dict(h) for h in headers.tolist()]
        routes = _predict(exchange_type, specs, key_list, args, header_list)
        if as_array:
            return pd.Series([sorted(r) for r in routes], dtype=object)
        return pd.Series([r[0] if r else None for r in routes], dtype=object)

    key_col = F.col(routing_key_col).cast("string")
    if headers_col is None:

        def route_keys(keys: pd.Series) -> pd.Series:
            return route(keys)

        udf = pandas_udf(route_keys, out_type)  # type: ignore[call-overload]
        return df.withColumn(output_col, udf(key_col))

    def route_with_headers(keys: pd.Series, headers: pd.Series) -> pd.Series:
        return route(keys, headers)

    udf = pandas_udf(route_with_headers, out_type)  # type: ignore[call-overload]
    return df.withColumn(output_col, udf(key_col, F.col(headers_col)))


# -- chi-squared ---------------------------------------------------------------------------------


def _regularized_gamma_p(a: float, x: float) -> float:
    """P(a, x), the regularized lower incomplete gamma function (series / continued fraction)."""
    if x <= 0:
        return 0.0
    log_prefix = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        n = a
        for _ in range(10_000):
            n += 1
            term *= x / n
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return total * math.exp(log_prefix)
    # Lentz's continued fraction for Q(a, x)
    tiny = 1e-300
    b = x + 1 - a
    c = 1 / tiny
    d = 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return 1.0 - math.exp(log_prefix) * h


def chi2_cdf(x: float, dof: int) -> float:
    """CDF of the chi-squared distribution with `dof` degrees of freedom."""
    return _regularized_gamma_p(dof / 2.0, x / 2.0)


def chi2_critical(p_value: float, dof: int) -> float:
    """The statistic above which a fit is rejected at `p_value` (upper-tail quantile).

    Computed, not tabulated, so any bucket count works (scipy is not a dependency).
    """
    target = 1.0 - p_value
    lo, hi = 0.0, max(10.0, dof * 10.0)
    while chi2_cdf(hi, dof) < target:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if chi2_cdf(mid, dof) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def chi_squared(counts: Sequence[int], expected: Sequence[float] | None = None) -> float:
    """Pearson's statistic: sum over buckets of (observed - expected)^2 / expected."""
    total = sum(counts)
    if expected is None:
        expected = [total / len(counts)] * len(counts)
    return sum((o - e) ** 2 / e for o, e in zip(counts, expected, strict=True))


def uniformity(
    df: Any,
    key_col: str = "routing_key",
    buckets: Iterable[int] = range(2, 21),
    exchange_type: str = "x-consistent-hash",
    arguments: Mapping[str, Any] | None = None,
) -> Any:
    """The consistent-hash README's chi-squared table for the keys in `df[key_col]`.

    The README's method: for each number of buckets N (2..20), bind N queues with equal weight 1,
    route every key, and compare the per-queue counts with the uniform expectation total/N using
    Pearson's chi-squared statistic with N - 1 degrees of freedom, next to the critical values at
    p = 0.05 and p = 0.01 (the distribution is uniform enough when the statistic is below them).
    Returns a DataFrame (buckets, chi_squared, degrees_of_freedom, p_0_05, p_0_01, rows).
    """
    from pyspark.sql import functions as F
    from pyspark.sql.functions import pandas_udf
    from pyspark.sql.types import ArrayType, IntegerType

    sizes = sorted({int(n) for n in buckets})
    if not sizes or sizes[0] < 1:
        raise ValueError("bucket counts must be positive integers")
    args = dict(arguments or {})
    topologies = {n: [(f"b{j}", "1") for j in range(n)] for n in sizes}

    def bucket_indices(keys: pd.Series) -> pd.Series:
        key_list = ["" if k is None else str(k) for k in keys.tolist()]
        per_size = []
        for n in sizes:
            routes = _predict(exchange_type, topologies[n], key_list, args)
            per_size.append([int(r[0][1:]) if r else -1 for r in routes])
        return pd.Series([list(row) for row in zip(*per_size, strict=True)], dtype=object)

    udf = pandas_udf(bucket_indices, ArrayType(IntegerType()))  # type: ignore[call-overload]
    exploded = df.select(F.posexplode(udf(F.col(key_col).cast("string"))).alias("size_index", "bucket"))
    counted = exploded.groupBy("size_index", "bucket").count().collect()

    per_size_counts: dict[int, list[int]] = {n: [0] * n for n in sizes}
    for row in counted:
        n = sizes[row["size_index"]]
        if row["bucket"] >= 0:
            per_size_counts[n][row["bucket"]] += int(row["count"])
    table = []
    for n in sizes:
        counts = per_size_counts[n]
        dof = n - 1
        stat = chi_squared(counts) if sum(counts) else float("nan")
        table.append(
            (
                n,
                float(stat),
                dof,
                round(chi2_critical(0.05, dof), 2) if dof else float("nan"),
                round(chi2_critical(0.01, dof), 2) if dof else float("nan"),
                int(sum(counts)),
            )
        )
    spark = df.sparkSession
    schema = (
        "buckets int, chi_squared double, degrees_of_freedom int, p_0_05 double, p_0_01 double, rows long"
    )
    return spark.createDataFrame(table, schema)
