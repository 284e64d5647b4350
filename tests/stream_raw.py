"""A stream-protocol client over hashbroker's own frame codec, for answers the client libraries
do not show (codes and values of a response as sent) or cannot decode (3.10.8's route and
partitions responses, which rstream 1.1.1 fails on)."""

from __future__ import annotations

import asyncio

from broker.streamproto import frames as F

USER = PASSWORD = "guest"


class RawStream:
    """One connection, opened on vhost / as guest; one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.corr = 0

    @classmethod
    async def open(cls, port: int) -> RawStream:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        c = cls(reader, writer)
        await c.request(F.PeerProperties(c.next(), {"product": "hashbroker-test"}))
        await c.request(F.SaslHandshake(c.next()))
        await c.request(F.SaslAuthenticate(c.next(), "PLAIN", f"\0{USER}\0{PASSWORD}".encode()))
        tune = await c.receive()
        assert isinstance(tune, F.Tune)
        c.send(F.Tune(tune.frame_max, 0, answer=True))
        opened = await c.request(F.Open(c.next(), "/"))
        assert isinstance(opened, F.OpenResponse) and opened.code == 1
        return c

    def next(self) -> int:
        self.corr += 1
        return self.corr

    def send(self, cmd: F.Command) -> None:
        self.writer.write(cmd.to_bytes())

    async def receive(self) -> F.Command:
        size = int.from_bytes(await self.reader.readexactly(4), "big")
        return F.parse(await self.reader.readexactly(size), from_server=True)

    async def request(self, cmd: F.Request) -> F.Command:
        self.send(cmd)
        while True:
            answer = await asyncio.wait_for(self.receive(), 5)
            if getattr(answer, "corr", None) == cmd.corr:
                return answer

    async def streams(self, cmd: F.Request) -> tuple[int, list[str]]:
        answer = await self.request(cmd)
        assert isinstance(answer, F.StreamsResponse), answer
        return answer.code, list(answer.streams)

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()
