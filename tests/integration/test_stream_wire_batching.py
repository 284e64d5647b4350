"""Publish frames that arrive while the store commits the last chunk become one chunk (as osiris's
writer batches its mailbox): a raw client pipelines frames without waiting for confirms, every
record is confirmed once and read back in order at its offset by a stream-protocol subscriber
(each chunk at most 8192 records), also after a restart."""

from __future__ import annotations

import struct
from pathlib import Path

from rstream import AMQPMessage

from broker.runtime.stream_adapter import MAX_CHUNK_RECORDS
from broker.streamproto import chunk as C
from broker.streamproto import frames as F
from broker.streamproto.constants import OffsetType
from tests.integration.test_stream_protocol_amqp import running
from tests.stream_raw import RawStream

FRAMES = 60
PER_FRAME = 300


def _body(n: int) -> bytes:
    return n.to_bytes(4, "big") * 3


def _record(n: int) -> bytes:
    """An AMQP 1.0 message, as a stream client writes one."""
    return bytes(AMQPMessage(body=_body(n)))


async def _publish(port: int) -> list[int]:
    c = await RawStream.open(port)
    await c.request(F.CreateStream(c.next(), "wb", {}))
    await c.request(F.DeclarePublisher(c.next(), 0, "", "wb"))
    for f in range(FRAMES):  # pipelined: no frame waits for a confirm
        c.send(F.Publish.build(0, [(n, _record(n)) for n in range(f * PER_FRAME, (f + 1) * PER_FRAME)]))
    confirmed: list[int] = []
    while len(confirmed) < FRAMES * PER_FRAME:
        cmd = await c.receive()
        if isinstance(cmd, F.PublishConfirm):
            confirmed += cmd.publishing_ids
    await c.close()
    return confirmed


async def _read(port: int) -> tuple[list[tuple[int, bytes]], list[int]]:
    c = await RawStream.open(port)
    await c.request(F.Subscribe(c.next(), 1, "wb", F.OffsetSpec(OffsetType.FIRST), 1000, {}))
    records: list[tuple[int, bytes]] = []
    sizes: list[int] = []
    while len(records) < FRAMES * PER_FRAME:
        cmd = await c.receive()
        if not isinstance(cmd, F.Deliver):
            continue
        sizes.append(struct.unpack_from(">I", cmd.chunk, 4)[0])
        records += C.decode(cmd.chunk).records()
    await c.close()
    return records, sizes


async def test_pipelined_frames_are_batched_into_chunks_and_read_back_in_order(tmp_path: Path) -> None:
    expected = [(n, _record(n)) for n in range(FRAMES * PER_FRAME)]
    async with running(tmp_path) as (_broker, port):
        confirmed = await _publish(port)
        assert sorted(confirmed) == list(range(FRAMES * PER_FRAME))
        records, sizes = await _read(port)
        assert records == expected
        assert max(sizes) <= MAX_CHUNK_RECORDS and sum(sizes) == FRAMES * PER_FRAME
    async with running(tmp_path) as (_broker, port):
        records, _sizes = await _read(port)
        assert records == expected
