"""The stream-protocol listener: one `StreamConnection` per accepted socket, on the event loop.

The connection is sans-I/O; this module moves its bytes. Reading pauses while the connection is
blocked (no publishing credits left, or the resource alarm), and deliveries stop while the socket's
write buffer is above its high-water mark, so neither a fast publisher nor a slow consumer makes
the broker buffer without bound. One timer per listener runs every connection's timers once a
second (handshake step timeouts, heartbeats).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import cast

from broker.streamproto.connection import BIG_BUFFER, Config, StreamConnection
from broker.streamproto.ports import StreamBroker

log = logging.getLogger(__name__)

#: Deliveries stop above this many unsent bytes in a socket's buffer, and go on below the low mark.
WRITE_HIGH = 4 * 1024 * 1024
WRITE_LOW = 1024 * 1024
TICK = 1.0


class _StreamProtocol(asyncio.Protocol):
    def __init__(self, server: StreamServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.conn: StreamConnection | None = None
        self._paused = False
        self._flush_scheduled = False
        self._unwatch: Callable[[], None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's transports subclass none of asyncio's
        self.transport = transport
        transport.set_write_buffer_limits(high=WRITE_HIGH, low=WRITE_LOW)
        peer = transport.get_extra_info("peername")
        local = transport.get_extra_info("sockname")
        host, port = (peer[0], peer[1]) if isinstance(peer, tuple) else ("127.0.0.1", 0)
        here, here_port = (local[0], local[1]) if isinstance(local, tuple) else ("127.0.0.1", 0)
        self.conn = StreamConnection(
            self.server.broker,
            peer_host=host,
            peer_port=port,
            host=here,
            port=here_port,
            connected_at=int(time.time() * 1000),
            config=self.server.config,
        )
        self.conn.on_output = self.schedule_flush
        self.conn.on_chunk = self.write_out
        self._unwatch = self.server.broker.watch_alarm(self._alarm)
        self.server.connections.add(self)

    def _alarm(self, on: bool) -> None:
        if self.conn is not None:
            self.conn.set_resource_alarm(on)
            self.flush()

    def data_received(self, data: bytes) -> None:
        if self.conn is None:
            return
        try:
            self.conn.receive_data(data)
        except Exception:  # a bug must cost this connection only
            log.exception("stream connection failed")
            self.conn.connection_lost()
        self.flush()

    def schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def write_out(self) -> None:
        """Write what the connection has queued (a chunk at once: the transport calls
        `pause_writing` as it fills, which stops the connection's sending). A chunk's section
        goes as a memoryview: asyncio's transport slices off what the socket took before it
        buffers the rest, and a memoryview's slice copies nothing where a bytes' slice copies
        the rest once more."""
        conn, transport = self.conn, self.transport
        if conn is None or transport is None or transport.is_closing():
            return
        for buf in conn.buffers_to_send():
            transport.write(memoryview(buf) if len(buf) >= BIG_BUFFER else buf)

    def flush(self) -> None:
        self._flush_scheduled = False
        self.write_out()
        conn, transport = self.conn, self.transport
        if conn is None or transport is None or transport.is_closing():
            return
        if conn.closed:
            transport.close()
            return
        if conn.reading_paused != self._paused:
            self._paused = conn.reading_paused
            if self._paused:
                transport.pause_reading()
            else:
                transport.resume_reading()

    def pause_writing(self) -> None:
        if self.conn is not None:
            self.conn.set_writable(False)

    def resume_writing(self) -> None:
        if self.conn is not None:
            self.conn.set_writable(True)
            self.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is not None and not self.conn.closed:
            self.conn.connection_lost()
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        self.server.connections.discard(self)

    def tick(self) -> None:
        if self.conn is not None and not self.conn.closed:
            self.conn.tick()
            self.flush()


class StreamServer:
    """Listens on `host:port` (port 0: an ephemeral port, see `port` once started)."""

    def __init__(
        self, broker: StreamBroker, *, host: str = "0.0.0.0", port: int = 5552, config: Config | None = None
    ) -> None:
        self.broker = broker
        self.host = host
        self.port = port
        self.config = config or Config()
        self.connections: set[_StreamProtocol] = set()
        self._server: asyncio.Server | None = None
        self._ticker: asyncio.Task[None] | None = None

    def open_connections(self) -> list[StreamConnection]:
        """The connections past their handshake (what the management API lists)."""
        return [p.conn for p in self.connections if p.conn is not None and p.conn.is_open]

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _StreamProtocol(self), self.host, self.port)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        self._ticker = loop.create_task(self._tick())

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK)
            for proto in list(self.connections):
                proto.tick()

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
            self._ticker = None
        if self._server is not None:
            self._server.close()
            for proto in list(self.connections):
                if proto.transport is not None:
                    proto.transport.close()
            await self._server.wait_closed()
            self._server = None
