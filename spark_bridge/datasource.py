"""The `amqp` Python Data Source: writers that publish rows to an exchange, and the source
(`source.py`) that reads a queue.

Delivery is at least once. A task publishes its partition over one connection with pipelined
publisher confirms and only returns its commit message once every message is confirmed; any nack,
any return under `mandatory`, or a dropped connection fails the task, and Spark runs it again from
the start of the partition. Messages confirmed by the failed attempt are then published a second
time, which is why every message carries a `message_id` derived from (write id or streaming query
id + micro-batch id, partition, row index): the same on every attempt, so consumers can drop
duplicates.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from spark_bridge.environment import require_worker_modules
from spark_bridge.options import SinkOptions

try:  # pyspark >= 4.0
    from pyspark.sql.datasource import DataSourceArrowWriter as _BatchWriterBase
except ImportError:  # pragma: no cover - older 4.0 previews
    _BatchWriterBase = DataSourceWriter  # type: ignore[assignment,misc]
try:  # pyspark >= 4.1
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamWriterBase
except ImportError:  # pragma: no cover - pyspark 4.0 streams Rows
    _StreamWriterBase = DataSourceStreamWriter  # type: ignore[assignment,misc]

_ARROW_BATCH = _BatchWriterBase is not DataSourceWriter
_ARROW_STREAM = _StreamWriterBase is not DataSourceStreamWriter

# Spark sets these local properties on the thread that runs a streaming query's micro-batches;
# they reach Python tasks through TaskContext.
_QUERY_ID_PROPERTY = "sql.streaming.queryId"
_BATCH_ID_PROPERTY = "streaming.sql.batchId"

log = logging.getLogger("spark_bridge")


def _driver_logger() -> logging.Logger:
    """Commit runs in a Python worker on the driver, where nobody configured logging: do it."""
    if not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    return log


def _totals(messages: list[WriterCommitMessage | None]) -> dict[str, Any]:
    done = [m for m in messages if m is not None]
    return {
        "tasks": len(messages),
        "tasks_committed": len(done),
        "published": sum(getattr(m, "published", 0) for m in done),
        "confirmed": sum(getattr(m, "confirmed", 0) for m in done),
        "returned": sum(getattr(m, "returned", 0) for m in done),
        "nacked": sum(getattr(m, "nacked", 0) for m in done),
        "task_seconds": round(sum(getattr(m, "seconds", 0.0) for m in done), 3),
    }


def _report(options: SinkOptions, kind: str, totals: dict[str, Any]) -> None:
    line = {"event": kind, "exchange": options.exchange, "time": time.time(), **totals}
    _driver_logger().info("amqp sink %s: %s", kind, json.dumps(line, sort_keys=True))
    if options.stats_file:
        with open(options.stats_file, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, sort_keys=True) + "\n")


def _prepare(options: SinkOptions, schema: StructType, overwrite: bool) -> None:
    """Driver-side checks: options vs schema, the broker answers, test topology declared once."""
    require_worker_modules()
    if overwrite:
        raise ValueError("the amqp sink can only append: use mode('append') / outputMode('append')")
    options.check_columns(list(schema.fieldNames()))
    from spark_bridge._amqp import AmqpAddress, AmqpConnection
    from spark_bridge.topology import declare_topology

    with AmqpConnection(AmqpAddress.parse(options.uri), connection_name="spark_bridge driver") as conn:
        if options.declare_exchange:
            declare_topology(
                conn,
                options.exchange,
                options.exchange_type,
                options.exchange_arguments,
                options.bindings,
                durable=options.durable,
            )


def stream_message_id_prefix(user_prefix: str | None, query_id: str | None, batch_id: str | None) -> str:
    """`<query id or messageIdPrefix>:<micro-batch id>`, the part of a streamed row's message id
    that makes it unique across micro-batches.

    Without both ids every micro-batch would reuse the same message ids and consumers that drop
    duplicates by message_id would drop real rows, so a missing id refuses the write.
    """
    if not batch_id:
        what = "batch id" if user_prefix else "query/batch id"
        raise RuntimeError(
            f"spark_bridge: Spark did not expose the streaming {what}; refusing to publish with "
            "non-unique message ids"
        )
    scope = user_prefix or query_id
    if not scope:
        raise RuntimeError(
            "spark_bridge: Spark did not expose the streaming query/batch id; refusing to publish "
            "with non-unique message ids (or set option messageIdPrefix)"
        )
    return f"{scope}:{batch_id}"


class AmqpDataSource(DataSource):
    """`format("amqp")`: publish each row as one AMQP message, or read messages as rows."""

    @classmethod
    def name(cls) -> str:
        return "amqp"

    def schema(self) -> str:
        from spark_bridge.source import SCHEMA

        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        from spark_bridge.source import AmqpBatchReader

        return AmqpBatchReader(_checked_source_options(self.options))

    def simpleStreamReader(self, schema: StructType) -> Any:
        from spark_bridge.source import AmqpStreamReader

        return AmqpStreamReader(_checked_source_options(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = SinkOptions.parse(self.options)
        _prepare(options, schema, overwrite)
        prefix = options.message_id_prefix or uuid.uuid4().hex
        return AmqpBatchWriter(options, schema, prefix)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = SinkOptions.parse(self.options)
        _prepare(options, schema, overwrite)
        return AmqpStreamWriter(options, schema)


def _checked_source_options(raw: Any) -> Any:
    """Parse the source's options and make sure the queue exists, on the driver, before any task."""
    from spark_bridge.consumer import AmqpConsumer
    from spark_bridge.source import SourceOptions
    from spark_bridge.wire import AmqpAddress

    require_worker_modules()
    options = SourceOptions.parse(raw)
    with AmqpConsumer(AmqpAddress.parse(options.uri), connection_name="spark_bridge driver") as conn:
        conn.message_count(options.queue)
    return options


def _publish(
    options: SinkOptions, schema: StructType, prefix: str, iterator: Iterator[Any], arrow: bool
) -> Any:
    require_worker_modules()
    from spark_bridge.writer import PartitionPublisher, TaskScope, rows_to_batches

    ctx = TaskContext.get()
    partition = ctx.partitionId() if ctx is not None else 0
    attempt = ctx.attemptNumber() if ctx is not None else 0
    batches = iterator if arrow else rows_to_batches(iterator, schema)
    return PartitionPublisher(options, TaskScope(prefix, partition, attempt)).run(batches)


class AmqpBatchWriter(_BatchWriterBase):
    """Batch writer: `prefix` is fixed on the driver, so every attempt of a task reuses it."""

    def __init__(self, options: SinkOptions, schema: StructType, prefix: str) -> None:
        self.options = options
        self.schema = schema
        self.prefix = prefix

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return _publish(self.options, self.schema, self.prefix, iterator, _ARROW_BATCH)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _report(self.options, "commit", {"write_id": self.prefix, **_totals(messages)})

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _report(self.options, "abort", {"write_id": self.prefix, **_totals(messages)})


class AmqpStreamWriter(_StreamWriterBase):
    """Streaming writer: ids come from the query id (kept in the checkpoint) and micro-batch id,
    so a batch replayed after a restart republishes the same message ids."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        ctx = TaskContext.get()
        query_id = ctx.getLocalProperty(_QUERY_ID_PROPERTY) if ctx is not None else None
        batch_id = ctx.getLocalProperty(_BATCH_ID_PROPERTY) if ctx is not None else None
        prefix = stream_message_id_prefix(self.options.message_id_prefix, query_id, batch_id)
        return _publish(self.options, self.schema, prefix, iterator, _ARROW_STREAM)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _report(self.options, "commit", {"batch_id": batchId, **_totals(messages)})

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _report(self.options, "abort", {"batch_id": batchId, **_totals(messages)})
