"""Publishing one Spark partition (a stream of Arrow record batches) with pipelined confirms.

This module is imported on executors. It turns Arrow columns into Python lists column by column
(one C-level conversion per column and batch instead of one Row object per row) and hands the
encoded frames to `AmqpConnection.publish`, which only touches the socket when 64 KiB are buffered.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import struct
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import WriterCommitMessage

from spark_bridge._amqp import (
    FLAG_MESSAGE_ID,
    AmqpAddress,
    AmqpBridgeError,
    AmqpConnection,
    ChannelClosedError,
    ConnectionLostError,
    PublishFailedError,
    encode_properties,
    shortstr,
)
from spark_bridge.options import PROPERTY_COLUMNS, SinkOptions


@dataclass
class AmqpCommitMessage(WriterCommitMessage):
    """What one task reports to the driver's commit: the counts of its final, successful attempt."""

    partition: int
    attempt: int
    published: int
    confirmed: int
    returned: int
    nacked: int
    seconds: float


#: An AMQP message_id is a short string.
_MAX_MESSAGE_ID_BYTES = 255

# Encoding problems of one row's values (too long, out of range, unsupported header type).
_ROW_VALUE_ERRORS = (ValueError, TypeError, OverflowError, struct.error)


@dataclass(frozen=True)
class TaskScope:
    """Identifies the rows of one task so that message ids are the same on every retry."""

    prefix: str
    partition: int
    attempt: int

    def message_ids(self, start: int, count: int) -> Iterator[bytes]:
        """The generated message ids of rows `start` .. `start + count - 1` of the partition.

        This is the only place that builds them: `<prefix>:<partition>:<row index>`, UTF-8. An id
        longer than AMQP's 255 bytes raises PublishFailedError naming the first such row, before
        any of the ids is handed out (the options check keeps user prefixes far from that).
        """
        head = f"{self.prefix}:{self.partition}:".encode()
        if count > 0 and len(head) + len(str(start + count - 1)) > _MAX_MESSAGE_ID_BYTES:
            room = _MAX_MESSAGE_ID_BYTES - len(head)
            first_bad = start if room < 1 else max(start, 10**room)
            size = len(head) + len(str(first_bad))
            raise PublishFailedError(
                f"row {first_bad}: its generated message id would be {size} bytes, AMQP allows at "
                f"most {_MAX_MESSAGE_ID_BYTES}; use a shorter messageIdPrefix"
            )
        return (head + str(row).encode() for row in range(start, start + count))

    def message_id(self, row_index: int) -> str:
        """The generated message id of one row (see `message_ids`)."""
        return next(self.message_ids(row_index, 1)).decode()


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def _as_bytes_list(column: pa.Array | pa.ChunkedArray) -> list[bytes | None]:
    """Strings become their UTF-8 bytes, binaries stay as they are, anything else its string form."""
    col_type = column.type
    if pa.types.is_binary(col_type) or pa.types.is_large_binary(col_type):
        return column.to_pylist()
    if not (pa.types.is_string(col_type) or pa.types.is_large_string(col_type)):
        column = pc.cast(column, pa.string())
    return pc.cast(column, pa.binary()).to_pylist()


def _timestamps(column: pa.Array | pa.ChunkedArray) -> list[int | None]:
    """AMQP timestamps are whole seconds since the epoch."""
    if pa.types.is_timestamp(column.type):
        seconds = pc.cast(column, pa.timestamp("s", tz=column.type.tz), safe=False)
        return pc.cast(seconds, pa.int64()).to_pylist()
    if pa.types.is_date(column.type):
        seconds = pc.cast(pc.cast(column, pa.timestamp("s")), pa.int64())
        return seconds.to_pylist()
    return pc.cast(column, pa.int64()).to_pylist()


def _strings(column: pa.Array | pa.ChunkedArray) -> list[str | None]:
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        column = pc.cast(column, pa.string())
    return column.to_pylist()


class PartitionPublisher:
    """Publishes the rows of one task over one connection; raises on any unconfirmed outcome."""

    def __init__(self, options: SinkOptions, scope: TaskScope) -> None:
        self.options = options
        self.scope = scope
        self.address = AmqpAddress.parse(options.uri)
        self.conn = AmqpConnection(
            self.address,
            connection_name=f"spark_bridge {scope.prefix} p{scope.partition} a{scope.attempt}",
        )
        self.rows = 0

    def run(self, batches: Iterable[pa.RecordBatch]) -> AmqpCommitMessage:
        started = time.monotonic()
        opts = self.options
        try:
            self.conn.connect()
            if opts.confirm:
                self.conn.select_confirms()
            for batch in batches:
                self._publish_batch(batch)
            if opts.confirm:
                self.conn.flush_and_wait(opts.confirm_timeout)
            else:
                self.conn.flush()
        except ConnectionLostError as exc:
            raise ConnectionLostError(self._describe_loss(str(exc))) from exc
        except AmqpBridgeError as exc:
            message = f"{self._where()}: {exc}"
            if self.conn.published:
                message += f" {self._counts()}"
            if isinstance(exc, ChannelClosedError):
                raise ChannelClosedError(exc.reply_code, exc.reply_text, message) from exc
            raise type(exc)(message) from exc
        finally:
            self.conn.close()
        conn = self.conn
        if conn.nacked:
            raise PublishFailedError(
                f"{self._where()}: the broker nacked {conn.nacked} of {conn.published} messages "
                f"({conn.acked} acked); the task fails so that Spark retries it"
            )
        if opts.mandatory and conn.returned:
            raise PublishFailedError(
                f"{self._where()}: {conn.returned} of {conn.published} messages were returned as "
                f"unroutable under mandatory=true; first return: {conn.first_return}"
            )
        return AmqpCommitMessage(
            partition=self.scope.partition,
            attempt=self.scope.attempt,
            published=conn.published,
            confirmed=conn.acked if opts.confirm else 0,
            returned=conn.returned,
            nacked=conn.nacked,
            seconds=time.monotonic() - started,
        )

    def _where(self) -> str:
        return (
            f"amqp sink, partition {self.scope.partition} attempt {self.scope.attempt} "
            f"({self.address.display()}, exchange {self.options.exchange!r})"
        )

    def _counts(self) -> str:
        c = self.conn
        return f"[{c.published} published, {c.acked} confirmed, {c.unconfirmed()} unconfirmed]"

    def _describe_loss(self, why: str) -> str:
        c = self.conn
        if c.published == 0:
            return f"{self._where()}: {why}"
        return (
            f"{self._where()}: {why} after {c.published} messages published and {c.acked} confirmed; "
            f"{c.unconfirmed()} unconfirmed; Spark's retry of this task publishes the whole partition "
            "again - duplicates of the confirmed messages carry the same message_id"
        )

    def _publish_batch(self, batch: pa.RecordBatch) -> None:
        opts = self.options
        n = batch.num_rows
        if n == 0:
            return
        names = batch.schema.names
        conn = self.conn
        exchange_prefix = conn.encode_publish_prefix(opts.exchange)
        mandatory = opts.mandatory

        if opts.routing_key_column is not None:
            keys: list[bytes | None] = _as_bytes_list(batch.column(opts.routing_key_column))
        else:
            constant_key = shortstr(opts.routing_key)[1:]
            keys = [constant_key] * n

        content_type: str | None = None
        if opts.body_column is not None:
            bodies = _as_bytes_list(batch.column(opts.body_column))
        else:
            dumps = json.JSONEncoder(default=_json_default, separators=(",", ":"), ensure_ascii=False).encode
            bodies = [dumps(row).encode("utf-8") for row in batch.to_pylist()]
            content_type = "application/json"

        headers = None
        if opts.headers_column is not None:
            headers = batch.column(opts.headers_column).to_pylist()

        prop_cols: dict[str, list[Any]] = {}
        for name in PROPERTY_COLUMNS:
            if name in names:
                column = batch.column(name)
                if name == "timestamp":
                    prop_cols[name] = _timestamps(column)
                elif name == "priority":
                    prop_cols[name] = pc.cast(column, pa.int64()).to_pylist()
                else:
                    prop_cols[name] = _strings(column)

        base = self.rows
        row_properties = _row_properties(
            self.scope.message_ids(base, n), content_type, opts.delivery_mode, headers, prop_cols
        )
        for i in range(n):
            try:
                flags, props = next(row_properties)
                conn.publish(exchange_prefix, keys[i] or b"", mandatory, flags, props, bodies[i] or b"")
            except _ROW_VALUE_ERRORS as exc:  # raised before anything of the row was buffered
                raise PublishFailedError(f"row {base + i}: {exc}") from exc
            if opts.confirm and conn.published - conn.acked - conn.nacked > opts.max_in_flight:
                conn.wait_in_flight(opts.max_in_flight // 2, opts.confirm_timeout)
            self.rows += 1


def _row_properties(
    message_ids: Iterable[bytes],
    content_type: str | None,
    delivery_mode: int | None,
    headers: list[Any] | None,
    prop_cols: dict[str, list[Any]],
) -> Iterator[tuple[int, bytes]]:
    """Each row's (property flags, encoded properties), in row order.

    In the common case only message_id varies and it is the last property written, so everything
    before it is encoded once and each row only appends its id.
    """
    if headers is None and not prop_cols:
        const_flags, const_props = encode_properties(content_type=content_type, delivery_mode=delivery_mode)
        flags = const_flags | FLAG_MESSAGE_ID
        for mid in message_ids:
            yield flags, const_props + bytes((len(mid),)) + mid
        return
    for i, generated_id in enumerate(message_ids):
        row_headers = None
        if headers is not None and headers[i] is not None:
            raw = headers[i]
            row_headers = dict(raw) if isinstance(raw, list) else raw
        get = {name: values[i] for name, values in prop_cols.items()}
        expiration = get.get("expiration")
        yield encode_properties(
            content_type=get.get("content_type") or content_type,
            headers=row_headers,
            delivery_mode=delivery_mode,
            priority=get.get("priority"),
            correlation_id=get.get("correlation_id"),
            expiration=str(expiration) if expiration is not None else None,
            message_id=get.get("message_id") or generated_id,
            timestamp=get.get("timestamp"),
            type_=get.get("type"),
            app_id=get.get("app_id"),
        )


def rows_to_batches(rows: Iterator[Any], schema: Any, chunk: int = 4096) -> Iterator[pa.RecordBatch]:
    """Fallback for Spark versions whose sink API yields Rows: regroup them into Arrow batches."""
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(schema)
    buffer: list[dict[str, Any]] = []
    for row in rows:
        buffer.append(row.asDict(recursive=True))
        if len(buffer) >= chunk:
            yield pa.RecordBatch.from_pylist(buffer, schema=arrow_schema)
            buffer = []
    if buffer:
        yield pa.RecordBatch.from_pylist(buffer, schema=arrow_schema)
