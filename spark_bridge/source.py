"""The `amqp` source: `spark.readStream.format("amqp")` and `spark.read.format("amqp")`.

Streaming reads run on the driver, in the long-lived Python process that Spark keeps for a Python
stream source (a simple stream reader): it holds one consumer for the whole query, so the
deliveries of a micro-batch stay unacknowledged on that connection until Spark has committed the
batch, and are acked then, in one cumulative `basic.ack`. A query that stops or dies closes the
connection, and the broker requeues whatever was not acked and redelivers it (`redelivered` true)
to the next consumer: at least once, with no state the checkpoint cannot rebuild.

Offsets: for classic and quorum queues the offset is a count of messages taken by the query
(`{"taken": n}`); it only orders micro-batches, since a queue cannot be re-read. A batch that Spark
replays after a restart (planned, never committed) is therefore read as empty: its messages were
never acked and come back as redeliveries in the next batches. For stream queues (`queueType`
stream) the offset is the stream offset (`{"stream": next}`), and a replayed batch is re-read from
the stream exactly, so a restart yields the same rows with no gap and no duplicate.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition, SimpleDataSourceStreamReader

from spark_bridge.environment import require_worker_modules
from spark_bridge.options import _bool, _int

SCHEMA = (
    "body binary, routing_key string, exchange string, redelivered boolean, message_id string, "
    "correlation_id string, timestamp timestamp, content_type string, headers map<string,string>, "
    "offset bigint"
)
_STREAM_OFFSET_HEADER = "x-stream-offset"
_STREAM_STARTS = ("first", "last", "next")


@dataclass(frozen=True)
class SourceOptions:
    """The source's options, checked on the driver before the query starts."""

    uri: str
    queue: str
    prefetch: int = 10_000
    max_messages_per_batch: int = 10_000
    max_messages: int | None = None
    consume: bool = True
    queue_type: str = "classic"
    starting_offset: str | int = "first"
    wait_seconds: float = 0.5

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        uri = options.get("uri")
        if not uri:
            raise ValueError("option 'uri' is required, e.g. amqp://guest:guest@127.0.0.1:5672/%2F")
        queue = options.get("queue")
        if not queue:
            raise ValueError("option 'queue' is required: the queue to read from")
        queue_type = str(options.get("queueType", "classic")).strip().lower()
        if queue_type not in ("classic", "quorum", "stream"):
            raise ValueError(f"option 'queueType' must be classic, quorum or stream, got {queue_type!r}")
        raw_start = str(options.get("startingOffset", "first")).strip().lower()
        starting: str | int = raw_start
        if raw_start not in _STREAM_STARTS:
            try:
                starting = int(raw_start)
            except ValueError:
                raise ValueError(
                    f"option 'startingOffset' must be first, last, next or a stream offset, got {raw_start!r}"
                ) from None
        prefetch = _int(options, "prefetch", 10_000)
        if prefetch > 65535:
            raise ValueError(f"option 'prefetch' is an AMQP prefetch count, at most 65535, got {prefetch}")
        max_batch = _int(options, "maxMessagesPerBatch", prefetch)
        max_messages = _int(options, "maxMessages", 1) if options.get("maxMessages") is not None else None
        return cls(
            uri=str(uri),
            queue=str(queue),
            prefetch=prefetch,
            max_messages_per_batch=max_batch,
            max_messages=max_messages,
            consume=_bool(options, "consume", True),
            queue_type=queue_type,
            starting_offset=starting,
            wait_seconds=_int(options, "waitMillis", 500, minimum=0) / 1000.0,
        )


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def _header_text(value: Any) -> str | None:
    """Header values become strings: text as is, tables and arrays as JSON."""
    if isinstance(value, dict | list):
        return json.dumps(value, default=_text, sort_keys=True)
    return _text(value)


def to_row(delivery: Any, offset: int | None) -> tuple[Any, ...]:
    """One delivery as a row of `SCHEMA`."""
    props = delivery.properties
    headers = props.headers if props is not None else None
    timestamp = props.timestamp if props is not None else None
    if isinstance(timestamp, dt.datetime) and timestamp.tzinfo is not None:
        timestamp = timestamp.astimezone(dt.UTC).replace(tzinfo=None)
    return (
        delivery.body,
        delivery.routing_key,
        delivery.exchange,
        delivery.redelivered,
        _text(props.message_id) if props is not None else None,
        _text(props.correlation_id) if props is not None else None,
        timestamp,
        _text(props.content_type) if props is not None else None,
        {str(k): _header_text(v) for k, v in headers.items()} if headers else None,
        offset,
    )


def stream_offset(delivery: Any) -> int:
    headers = delivery.properties.headers if delivery.properties is not None else None
    if not headers or _STREAM_OFFSET_HEADER not in headers:
        raise ValueError(
            f"a delivery from the stream carries no {_STREAM_OFFSET_HEADER} header: is the queue a stream?"
        )
    return int(headers[_STREAM_OFFSET_HEADER])


def read_stream_range(options: SourceOptions, start: int, end: int) -> Iterator[tuple[Any, ...]]:
    """Re-read the stream entries with offsets in [start, end) on a connection of its own."""
    from spark_bridge.consumer import AmqpConsumer
    from spark_bridge.wire import AmqpAddress

    if end <= start:
        return
    with AmqpConsumer(AmqpAddress.parse(options.uri), connection_name="spark_bridge replay") as conn:
        conn.consume(options.queue, options.prefetch, {_STREAM_OFFSET_HEADER: start})
        while True:
            batch = conn.take(options.prefetch, wait=max(options.wait_seconds, 30.0))
            if not batch:
                raise TimeoutError(f"stream {options.queue!r} did not deliver offsets {start}..{end - 1}")
            conn.ack(batch[-1].delivery_tag)
            for delivery in batch:
                offset = stream_offset(delivery)
                if offset >= end:
                    return
                if offset >= start:
                    yield to_row(delivery, offset)
            if stream_offset(batch[-1]) >= end - 1:
                return


def read_queue(options: SourceOptions) -> Iterator[tuple[Any, ...]]:
    """A batch read: up to `maxMessages` (default: what the queue holds when the read starts),
    acked once all were read, or requeued with consume=false."""
    from spark_bridge.consumer import AmqpConsumer
    from spark_bridge.wire import AmqpAddress

    with AmqpConsumer(AmqpAddress.parse(options.uri), connection_name="spark_bridge read") as conn:
        available = conn.message_count(options.queue)
        wanted = available if options.max_messages is None else min(options.max_messages, available)
        if wanted <= 0:
            return
        # prefetch is a 16-bit count; 0 (unlimited) beyond that
        conn.consume(options.queue, wanted if wanted <= 65535 else 0)
        rows: list[tuple[Any, ...]] = []
        last_tag = 0
        while len(rows) < wanted:
            batch = conn.take(wanted - len(rows), wait=max(options.wait_seconds, 5.0))
            if not batch:
                break
            last_tag = batch[-1].delivery_tag
            rows.extend(to_row(d, None) for d in batch)
        yield from rows
        if last_tag:
            if options.consume:
                conn.ack(last_tag)
            else:
                conn.nack(last_tag, requeue=True)


class AmqpBatchReader(DataSourceReader):
    """`spark.read.format("amqp")`: one partition, one connection."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        require_worker_modules()
        return read_queue(self.options)


class AmqpStreamReader(SimpleDataSourceStreamReader):
    """`spark.readStream.format("amqp")`, run on the driver for the whole query (see the module)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._conn: Any = None
        self._taken: int | None = None  # the offset (messages taken) the consumer has reached
        self._unacked: deque[tuple[int, int]] = deque()  # (offset, delivery tag), in order
        self._stream_next: int | None = None

    def initialOffset(self) -> dict[str, Any]:
        if self.options.queue_type == "stream":
            return {"stream": self.options.starting_offset}
        return {"taken": 0}

    def _consumer(self, arguments: Mapping[str, Any] | None = None) -> Any:
        if self._conn is None:
            from spark_bridge.consumer import AmqpConsumer
            from spark_bridge.wire import AmqpAddress

            conn = AmqpConsumer(AmqpAddress.parse(self.options.uri), connection_name="spark_bridge source")
            conn.connect()
            conn.consume(self.options.queue, self.options.prefetch, arguments)
            self._conn = conn
        return self._conn

    def read(self, start: dict[str, Any]) -> tuple[Iterator[tuple[Any, ...]], dict[str, Any]]:
        if "stream" in start:
            return self._read_stream(start["stream"])
        taken = int(start["taken"])
        # Spark asks for data after `start` only once the batch ending there has committed.
        self._ack_upto(taken)
        conn = self._consumer()
        if self._taken is None:
            self._taken = taken
        limit = self.options.max_messages_per_batch
        deliveries = conn.take(limit, wait=self.options.wait_seconds)
        rows = []
        for delivery in deliveries:
            self._taken += 1
            self._unacked.append((self._taken, delivery.delivery_tag))
            rows.append(to_row(delivery, None))
        return iter(rows), {"taken": self._taken}

    def _read_stream(self, position: str | int) -> tuple[Iterator[tuple[Any, ...]], dict[str, Any]]:
        if self._conn is not None and self._stream_next != position:
            self.stop()
        conn = self._consumer({_STREAM_OFFSET_HEADER: position})
        deliveries = conn.take(self.options.max_messages_per_batch, wait=self.options.wait_seconds)
        if not deliveries:
            return iter(()), {"stream": position}
        conn.ack(deliveries[-1].delivery_tag)  # stream acks only return credit
        rows = [to_row(d, stream_offset(d)) for d in deliveries]
        self._stream_next = stream_offset(deliveries[-1]) + 1
        return iter(rows), {"stream": self._stream_next}

    def readBetweenOffsets(self, start: dict[str, Any], end: dict[str, Any]) -> Iterator[tuple[Any, ...]]:
        """A batch replayed after a restart (runs in an executor, not in this reader's process)."""
        if "stream" in start and isinstance(start["stream"], int):
            return read_stream_range(self.options, start["stream"], int(end["stream"]))
        if "stream" in start:
            raise ValueError(f"cannot replay a stream batch from the symbolic offset {start['stream']!r}")
        return iter(())

    def commit(self, end: dict[str, Any]) -> None:
        if "taken" in end:
            self._ack_upto(int(end["taken"]))

    def _ack_upto(self, taken: int) -> None:
        last_tag = 0
        while self._unacked and self._unacked[0][0] <= taken:
            last_tag = self._unacked.popleft()[1]
        if last_tag and self._conn is not None:
            self._conn.ack(last_tag)

    def stop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
