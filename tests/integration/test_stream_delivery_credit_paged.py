"""Over a real socket, a subscriber of a stream larger than what a stream keeps in memory (its
oldest chunks come back from the store) gets the subscribe response first, then exactly as many
chunks as its credit allows, each whole and in order, and the rest as credit comes; also after a
restart, when every chunk comes from the store."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.entities.queues.stream.queue import RESIDENT_BYTES
from broker.streamproto import chunk as C
from broker.streamproto import frames as F
from broker.streamproto.constants import OffsetType
from tests.integration.test_stream_protocol_amqp import running
from tests.stream_raw import RawStream

PER_FRAME = 100
FRAMES = RESIDENT_BYTES // (PER_FRAME * 1024) + 40  # past what stays in memory


def _record(n: int) -> bytes:
    return n.to_bytes(4, "big") * 256


async def _publish(port: int) -> None:
    c = await RawStream.open(port)
    await c.request(F.CreateStream(c.next(), "dp", {}))
    await c.request(F.DeclarePublisher(c.next(), 0, "", "dp"))
    confirmed = 0
    for f in range(FRAMES):
        c.send(F.Publish.build(0, [(n, _record(n)) for n in range(f * PER_FRAME, (f + 1) * PER_FRAME)]))
        if f % 20 == 19:  # a bounded window of unconfirmed frames
            while confirmed < (f - 10) * PER_FRAME:
                cmd = await asyncio.wait_for(c.receive(), 10)
                if isinstance(cmd, F.PublishConfirm):
                    confirmed += len(cmd.publishing_ids)
    while confirmed < FRAMES * PER_FRAME:
        cmd = await asyncio.wait_for(c.receive(), 10)
        if isinstance(cmd, F.PublishConfirm):
            confirmed += len(cmd.publishing_ids)
    await c.close()


async def _read_with_credit(port: int) -> None:
    c = await RawStream.open(port)
    c.send(F.Subscribe(c.next(), 1, "dp", F.OffsetSpec(OffsetType.FIRST), 2, {}))
    first = await asyncio.wait_for(c.receive(), 5)
    assert isinstance(first, F.CodeResponse) and first.code == 1
    chunks = [await asyncio.wait_for(c.receive(), 5) for _ in range(2)]
    assert all(isinstance(d, F.Deliver) for d in chunks)
    try:  # no credit left: nothing more comes
        extra = await asyncio.wait_for(c.receive(), 0.5)
        raise AssertionError(f"sent without credit: {extra!r}")
    except TimeoutError:
        pass
    c.send(F.Credit(1, 10_000))
    records: list[tuple[int, bytes]] = []
    for d in chunks:
        assert isinstance(d, F.Deliver)
        records += C.decode(d.chunk).records()
    while len(records) < FRAMES * PER_FRAME:
        cmd = await asyncio.wait_for(c.receive(), 5)
        if isinstance(cmd, F.Deliver):
            decoded = C.decode(cmd.chunk)
            assert decoded.first_offset == len(records)
            records += decoded.records()
    assert records == [(n, _record(n)) for n in range(FRAMES * PER_FRAME)]
    await c.close()


async def test_credit_bounds_the_chunks_of_a_stream_read_back_from_the_store(tmp_path: Path) -> None:
    async with running(tmp_path) as (_broker, port):
        await _publish(port)
        await _read_with_credit(port)
    async with running(tmp_path) as (_broker, port):
        await _read_with_credit(port)
