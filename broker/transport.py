"""asyncio glue: one Protocol per TCP connection, forwarding bytes to the Connection state machine."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from broker.session.connection import Connection

if TYPE_CHECKING:
    from broker.server import Broker


class AmqpProtocol(asyncio.Protocol):
    __slots__ = ("broker", "conn")

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.conn: Connection | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.set_write_buffer_limits(high=4 * 1024 * 1024)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            import socket

            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = Connection(
            self.broker,
            transport,
            asyncio.get_running_loop(),
            handshake_timeout=self.broker.settings.handshake_timeout,
        )
        self.broker.connection_made(self.conn)

    def data_received(self, data: bytes) -> None:
        if self.conn is not None:
            self.conn.data_received(data)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is not None:
            self.conn.connection_lost()

    def pause_writing(self) -> None:
        if self.conn is not None:
            self.conn.pause_writing()

    def resume_writing(self) -> None:
        if self.conn is not None:
            self.conn.resume_writing()
