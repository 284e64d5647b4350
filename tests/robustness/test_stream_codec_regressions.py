"""Stream-protocol inputs bench/fuzz_stream.py found to raise inside the broker: each must cost
only the connection that sent it (dropped, as RabbitMQ drops a connection its parser crashes on),
log no traceback, and leave the listener serving the next client.

One `Broker` with its stream listener on an ephemeral port; a raw client written with
broker.streamproto.frames' encoders sends the exact bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import logging
import struct
from collections.abc import AsyncIterator

import pytest

from broker.server import Broker
from broker.streamproto import frames as F
from broker.streamproto.constants import Code

STREAM = "robust-codec"


def _record(body: bytes) -> bytes:
    return b"\x00\x53\x75\xa0" + bytes((len(body),)) + body


@contextlib.asynccontextmanager
async def running() -> AsyncIterator[int]:
    broker = Broker(host="127.0.0.1", port=0, data_dir=":memory:", stream_port=0)
    await broker.start()
    assert broker.stream_server is not None
    try:
        yield broker.stream_server.port
    finally:
        await broker.stop()


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.decoder = F.FrameDecoder(1 << 30)

    @classmethod
    async def open(cls, port: int) -> Client:
        c = cls(*await asyncio.open_connection("127.0.0.1", port))
        for cmd in (
            F.PeerProperties(1, {"product": "test"}),
            F.SaslHandshake(2),
            F.SaslAuthenticate(3, "PLAIN", b"\0guest\0guest"),
            F.Tune(1_048_576, 0, answer=True),
            F.Open(4, "/"),
        ):
            c.writer.write(cmd.to_bytes())
        opened = await c.answer(lambda x: isinstance(x, F.OpenResponse))
        assert isinstance(opened, F.OpenResponse) and opened.code == Code.OK
        return c

    async def answer(self, match: object) -> F.Command | None:
        """The first frame `match` accepts; None once the broker closed the connection."""
        while True:
            for body in self.decoder.frames():
                cmd = F.parse(body, from_server=True)
                if match(cmd):  # type: ignore[operator]
                    return cmd
            data = await asyncio.wait_for(self.reader.read(65536), 5)
            if not data:
                return None
            self.decoder.feed(data)

    async def request(self, cmd: F.Request) -> int:
        self.writer.write(cmd.to_bytes())
        got = await self.answer(lambda x: isinstance(x, F.CodeResponse) and x.corr == cmd.corr)
        assert isinstance(got, F.CodeResponse)
        return got.code

    async def publisher(self) -> None:
        assert await self.request(F.CreateStream(5, STREAM, {})) in (Code.OK, Code.STREAM_ALREADY_EXISTS)
        assert await self.request(F.DeclarePublisher(6, 0, "", STREAM)) == Code.OK

    def close(self) -> None:
        self.writer.close()


async def _dropped_for(port: int, entry: F.SubBatch) -> None:
    """A publish of `entry` closes its connection; a new client still publishes and is confirmed."""
    bad = await Client.open(port)
    await bad.publisher()
    bad.writer.write(F.Publish.build(0, [(1, entry)]).to_bytes())
    assert await bad.answer(lambda x: False) is None  # the broker hung up
    bad.close()
    good = await Client.open(port)
    await good.publisher()
    good.writer.write(F.Publish.build(0, [(7, _record(b"fine"))]).to_bytes())
    confirm = await good.answer(lambda x: isinstance(x, F.PublishConfirm))
    assert isinstance(confirm, F.PublishConfirm) and confirm.publishing_ids == (7,)
    good.close()


@pytest.mark.timeout(60)
async def test_corrupt_gzip_sub_entry_drops_the_connection_only(caplog: pytest.LogCaptureFixture) -> None:
    records = b"".join(struct.pack(">I", len(r)) + r for r in (_record(b"a"), _record(b"b")))
    whole = gzip.compress(records)
    caplog.set_level(logging.ERROR)
    async with running() as port:
        for data in (b"not gzip at all", whole[: len(whole) // 2]):
            await _dropped_for(port, F.SubBatch(1, 2, len(records), data))
    assert "Traceback" not in caplog.text and not [r for r in caplog.records if r.exc_info]


@pytest.mark.timeout(60)
async def test_gzip_bomb_is_refused_without_inflating_it(caplog: pytest.LogCaptureFixture) -> None:
    """80 KB that would inflate to 80 MB (past the 64 MB a frame may carry) is not inflated."""
    bomb = gzip.compress(b"\0" * (80 * 1024 * 1024), compresslevel=9)
    assert len(bomb) < 200_000
    caplog.set_level(logging.ERROR)
    async with running() as port:
        await _dropped_for(port, F.SubBatch(1, 1, 2**32 - 1, bomb))
    assert not [r for r in caplog.records if r.exc_info]


@pytest.mark.timeout(60)
async def test_create_stream_argument_that_is_not_utf8(caplog: pytest.LogCaptureFixture) -> None:
    """The argument's bytes are kept as sent (RabbitMQ's binaries): the stream is created, as
    RabbitMQ 3.10.8 answers a max-age of b"1h\\xff" (observed: OK)."""
    caplog.set_level(logging.ERROR)
    async with running() as port:
        c = await Client.open(port)
        args = {"max-age": "1h\udcff", "queue-leader-locator": "client-local"}
        assert await c.request(F.CreateStream(5, "robust-not-utf8", args)) == Code.OK
        assert await c.request(F.CreateStream(6, "robust-not-utf8", args)) == Code.STREAM_ALREADY_EXISTS
        assert await c.request(F.DeleteStream(7, "robust-not-utf8")) == Code.OK
        c.close()
    assert not [r for r in caplog.records if r.exc_info]


@pytest.mark.timeout(60)
async def test_create_stream_named_in_invalid_utf8_drops_the_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """RabbitMQ 3.10.8 drops the connection (observed); no queue the management API could not
    render is created."""
    caplog.set_level(logging.ERROR)
    name = "robust-\udcffx"
    async with running() as port:
        bad = await Client.open(port)
        bad.writer.write(F.CreateStream(5, name, {}).to_bytes())
        assert await bad.answer(lambda x: False) is None
        bad.close()
        good = await Client.open(port)
        good.writer.write(F.Metadata(6, (name,)).to_bytes())
        meta = await good.answer(lambda x: isinstance(x, F.MetadataResponse))
        assert isinstance(meta, F.MetadataResponse)
        assert [m.code for m in meta.streams] == [Code.STREAM_DOES_NOT_EXIST]
        good.close()
    assert not [r for r in caplog.records if r.exc_info]
