"""asyncio glue: one Protocol per TCP connection, forwarding bytes to the Connection state machine,
and the listener's file-descriptor housekeeping (open-files limit, accept failures, fd counts)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
from collections.abc import Collection, Container, Mapping
from typing import Any, Protocol, cast

from broker.protocol.handshake import DEFAULT_MECHANISMS, EXTERNAL, PASSWORD_MECHANISMS, Mechanisms, PeerLogin
from broker.session.connection import Connection
from broker.session.ports import Server, ServerSettings

log = logging.getLogger("hashbroker.server")
ACCEPT_LOG_INTERVAL = 10.0
"""Seconds between two log lines about accept() failing for lack of file descriptors."""
_ACCEPT_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def raise_open_files_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit (as RabbitMQ's start-up scripts ask for
    a high ulimit), so a default 1,024 does not cap the connections; returns (soft, hard)."""
    try:
        import resource
    except ImportError:  # not a Unix
        return (-1, -1)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    return soft, hard


def fd_usage() -> tuple[int, int]:
    """(file descriptors open, soft limit) of this process, as /api/nodes fd_used/fd_total."""
    try:
        import resource

        total = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except ImportError:
        total = -1
    try:
        used = len(os.listdir("/proc/self/fd")) - 1  # minus the descriptor listdir itself held
    except OSError:
        used = -1
    return used, total


class AcceptFailureLog:
    """The loop's exception handler, with accept() failures for lack of descriptors turned into
    one log line per interval. asyncio itself stops accepting for a second and retries (its
    ACCEPT_RETRY_DELAY back-off), but logs a traceback each time; every other context goes on to
    the handler that was there before."""

    def __init__(self, loop: asyncio.AbstractEventLoop, interval: float = ACCEPT_LOG_INTERVAL) -> None:
        self.previous = loop.get_exception_handler()
        self.interval = interval
        self.suppressed = 0
        self.last = float("-inf")

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.set_exception_handler(self)

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if (
            isinstance(exc, OSError)
            and exc.errno in _ACCEPT_ERRNOS
            and "accept" in context.get("message", "")
        ):
            now = loop.time()
            if now - self.last < self.interval:
                self.suppressed += 1
                return
            used, total = fd_usage()
            used = total if used < 0 else used  # listing /proc/self/fd needs a descriptor too
            log.error(
                "accept() failed: %s (%d of %d file descriptors in use); retrying every second%s",
                *(os.strerror(exc.errno or 0), used, total, self._suppressed_note()),
            )
            self.last = now
            return
        if self.previous is not None:
            self.previous(loop, context)
        else:
            loop.default_exception_handler(context)

    def _suppressed_note(self) -> str:
        note = f" ({self.suppressed} more in the last {self.interval:g} s)" if self.suppressed else ""
        self.suppressed = 0
        return note


class ListenerSettings(ServerSettings, Protocol):
    @property
    def handshake_timeout(self) -> float:
        """Seconds a connection may take to reach connection.open."""
        ...


class Listener(Server, Protocol):
    """The broker as its listening socket sees it: the server of every connection, which it
    registers as they are accepted."""

    @property
    def settings(self) -> ListenerSettings: ...

    def connection_made(self, conn: Connection) -> None: ...


AUTH_MECHANISM_PLUGIN = "rabbitmq_auth_mechanism_ssl"
"""The plugin that registers the EXTERNAL mechanism."""


def mechanisms(configured: Collection[str], plugins: Container[str], *, tls: bool) -> Mechanisms:
    """rabbit_reader:auth_mechanisms for one listener: the registered mechanisms (EXTERNAL when
    its plugin is on) that `configured` (auth_mechanisms) names and that offer themselves on this
    socket (EXTERNAL on TLS only, certificate or not: a missing one is then refused by name)."""
    known = (EXTERNAL, *DEFAULT_MECHANISMS) if AUTH_MECHANISM_PLUGIN in plugins else DEFAULT_MECHANISMS
    offered = tuple(m for m in known if m in configured and (tls or m != EXTERNAL))
    return Mechanisms(offered, frozenset(known))


class TlsPeers(Protocol):
    """What a TLS listener makes of a connection's ssl.SSLObject (broker.runtime.tls.PeerCertificates)."""

    def login(self, ssl_object: Any) -> PeerLogin:
        """The EXTERNAL user the peer certificate names, or why none."""
        ...

    def describe(self, ssl_object: Any) -> Mapping[str, str | None]:
        """The connection's TLS details, as /api/connections shows them."""
        ...


class AmqpProtocol(asyncio.Protocol):
    __slots__ = ("broker", "conn", "mechanisms", "tls")

    def __init__(
        self,
        broker: Listener,
        mechanisms: Mechanisms = PASSWORD_MECHANISMS,
        tls: TlsPeers | None = None,
    ) -> None:
        self.broker = broker
        self.conn: Connection | None = None
        self.mechanisms = mechanisms
        self.tls = tls

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's transports subclass none of asyncio's
        transport.set_write_buffer_limits(high=4 * 1024 * 1024)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            import socket

            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        login = info = None
        if self.tls is not None:
            ssl_object = transport.get_extra_info("ssl_object")
            info = self.tls.describe(ssl_object)
            if EXTERNAL in self.mechanisms.offered:
                login = self.tls.login(ssl_object)
        self.conn = Connection(
            self.broker,
            transport,
            asyncio.get_running_loop(),
            handshake_timeout=self.broker.settings.handshake_timeout,
            mechanisms=self.mechanisms,
            peer_login=login,
            tls_info=info,
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
