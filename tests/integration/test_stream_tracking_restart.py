"""Server-side offset tracking and publisher deduplication survive a broker restart.

One rstream program in two halves: `before` creates a stream, publishes ids 1-3 as the named
producer "ref", stores consumer offsets (each store answered by a query, so each is its own
tracking chunk on RabbitMQ too) and queries them; `after` queries the offsets and sequences
again (known and unknown references), comes back as "ref" with ids 2-4 (only 4 is new) and reads
the log from the first offset. On hashbroker the broker restarts on the same data directory
between the halves; the answers equal RabbitMQ 3.10.8's, recorded (without a restart: RabbitMQ
keeps both in the stream's log) in tests/data/stream_protocol/tracking_rabbitmq_3.10.8.json by
tests/differential/test_stream_tracking_differential.py, which also checks the recording against
the live broker.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from rstream import AMQPMessage, Producer
from rstream.exceptions import OffsetNotFound

from broker.streamproto import frames as F
from tests.integration.test_stream_protocol_amqp import _stream_read, running
from tests.stream_raw import RawStream
from tests.stream_recording import jsonable, recorded

USER = PASSWORD = "guest"
RECORDED = "tracking_rabbitmq_3.10.8.json"


def _message(body: str, publishing_id: int) -> AMQPMessage:
    m = AMQPMessage(body=body.encode())
    m.publishing_id = publishing_id  # (the constructor does not take it)
    return m


async def _queries(producer: Producer, stream: str) -> dict[str, Any]:
    client = await producer.default_client
    out: dict[str, Any] = {}
    for ref in ("c1", "c2", "nobody"):
        try:
            out[f"offset {ref}"] = await client.query_offset(stream, ref)
        except OffsetNotFound as e:  # RabbitMQ answers NO_OFFSET (19) for an unknown reference
            out[f"offset {ref}"] = type(e).__name__
    for ref in ("ref", "nobody"):
        out[f"sequence {ref}"] = await client.query_publisher_sequence(stream, ref)
    return out


async def _raw_queries(port: int, stream: str) -> dict[str, list[int]]:
    """The responses as sent: (code, value) of query-offset and query-publisher-sequence for a
    known and an unknown reference, and on a stream that does not exist."""
    out: dict[str, list[int]] = {}
    raw = await RawStream.open(port)
    try:
        for ref, name in (("c1", stream), ("nobody", stream), ("c1", f"{stream}-missing")):
            a = await raw.request(F.QueryOffset(raw.next(), ref, name))
            assert isinstance(a, F.QueryOffsetResponse), a
            out[f"query-offset {ref}{'' if name == stream else ' (no stream)'}"] = [a.code, a.offset]
        for ref, name in (("ref", stream), ("nobody", stream), ("ref", f"{stream}-missing")):
            b = await raw.request(F.QueryPublisherSequence(raw.next(), ref, name))
            assert isinstance(b, F.QueryPublisherSequenceResponse), b
            out[f"query-publisher-sequence {ref}{'' if name == stream else ' (no stream)'}"] = [
                b.code,
                b.sequence,
            ]
    finally:
        await raw.close()
    return out


async def before(port: int, stream: str) -> dict[str, Any]:
    async with Producer("127.0.0.1", port=port, username=USER, password=PASSWORD) as producer:
        await producer.create_stream(stream)
        for i in (1, 2, 3):
            await producer.send_wait(stream, _message(f"m{i}", i), publisher_name="ref")
        client = await producer.default_client
        await client.store_offset(stream, "c1", 1)
        first = await client.query_offset(stream, "c1")
        await client.store_offset(stream, "c2", 0)
        await client.query_offset(stream, "c2")
        await client.store_offset(stream, "c1", 2)
        out = await _queries(producer, stream)
        out["c1 first stored"] = first
        return out


async def after(port: int, stream: str) -> dict[str, Any]:
    async with Producer("127.0.0.1", port=port, username=USER, password=PASSWORD) as producer:
        out = {"restarted": await _queries(producer, stream), "raw": await _raw_queries(port, stream)}
        for i in (2, 3, 4):
            await producer.send_wait(stream, _message(f"again{i}", i), publisher_name="ref")
        out["after republish"] = await _queries(producer, stream)
    got = await _stream_read(port, stream, 4)
    out["records"] = [
        (o, bytes(m.body if isinstance(m.body, bytes) else b"".join(m.body)).decode()) for o, m in got
    ]
    return out


async def delete(port: int, stream: str) -> None:
    async with Producer("127.0.0.1", port=port, username=USER, password=PASSWORD) as producer:
        await producer.delete_stream(stream, missing_ok=True)


async def run_hashbroker(data_dir: Path, stream: str, *, restart: bool) -> dict[str, Any]:
    """Both halves on hashbroker, with a restart on `data_dir` between them or without."""
    if restart:
        async with running(data_dir) as (_broker, port):
            first = await before(port, stream)
        async with running(data_dir) as (_broker, port):
            second = await after(port, stream)
    else:
        async with running(data_dir) as (_broker, port):
            first = await before(port, stream)
            second = await after(port, stream)
    return jsonable({"before": first, "after": second})


async def test_tracking_survives_a_restart_as_rabbitmq_keeps_it(tmp_path: Path) -> None:
    ours = await asyncio.wait_for(run_hashbroker(tmp_path / "a", "tracked", restart=True), 60)
    assert ours == recorded(RECORDED)
    assert ours["after"]["restarted"]["offset c1"] == 2
    assert ours["after"]["restarted"]["sequence ref"] == 3


async def test_without_a_restart_the_answers_are_the_same(tmp_path: Path) -> None:
    ours = await asyncio.wait_for(run_hashbroker(tmp_path / "b", "tracked", restart=False), 60)
    assert ours == recorded(RECORDED)


async def test_a_deleted_stream_forgets_its_tracking(tmp_path: Path) -> None:
    """Tracking lives with the stream: deleted and created again, even across a restart, the
    stream knows no offset and no writer."""
    async with running(tmp_path) as (_broker, port):
        await before(port, "gone")
        await delete(port, "gone")
    async with (
        running(tmp_path) as (_broker, port),
        Producer("127.0.0.1", port=port, username=USER, password=PASSWORD) as producer,
    ):
        await producer.create_stream("gone")
        answers = await _queries(producer, "gone")
    assert answers == {
        "offset c1": "OffsetNotFound",
        "offset c2": "OffsetNotFound",
        "offset nobody": "OffsetNotFound",
        "sequence ref": 0,
        "sequence nobody": 0,
    }


async def test_a_publish_the_connection_crashes_on_leaves_the_writer_where_it_was(tmp_path: Path) -> None:
    """A sub-batch whose compression hashbroker lacks drops the connection before anything is
    written: the writer's sequence stays, so the producer's retry is written, not deduplicated."""
    async with running(tmp_path) as (_broker, port):
        async with Producer("127.0.0.1", port=port, username=USER, password=PASSWORD) as producer:
            await producer.create_stream("crash")
        raw = await RawStream.open(port)
        declared = await raw.request(F.DeclarePublisher(raw.next(), 7, "ref", "crash"))
        assert isinstance(declared, F.CodeResponse) and declared.code == 1
        raw.send(F.Publish.build(7, [(1, F.SubBatch(3, 1, 3, b"zzz"))]))  # 3: snappy
        assert await asyncio.wait_for(raw.reader.read(), 5) == b""  # dropped
        await raw.close()
        async with Producer("127.0.0.1", port=port, username=USER, password=PASSWORD) as producer:
            sequence = (await producer.default_client).query_publisher_sequence
            assert await sequence("crash", "ref") == 0
            await producer.send_wait("crash", _message("retry", 1), publisher_name="ref")
            sequence = (await producer.default_client).query_publisher_sequence
            assert await sequence("crash", "ref") == 1
        got = await _stream_read(port, "crash", 1)
        assert [bytes(m.body if isinstance(m.body, bytes) else b"".join(m.body)) for _o, m in got] == [
            b"retry"
        ]
