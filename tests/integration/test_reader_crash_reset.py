"""Input that crashes RabbitMQ's reader (a method id no class has) resets the socket at once, as
RabbitMQ 3.10.8 does (observed on the live broker: the client's next read fails with a reset
after 0.0 s, not a clean end of stream)."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest
from pamqp import commands, frame

from broker.embedded import BrokerThread
from tests.differential_support import split_frames


@pytest.fixture
def broker() -> Iterator[BrokerThread]:
    b = BrokerThread(port=0, data_dir=":memory:").start()
    try:
        yield b
    finally:
        b.stop()


def read_frames_until(sock: socket.socket, kind: type) -> None:
    buf = b""
    while True:
        chunk = sock.recv(65536)
        assert chunk, "closed during the handshake"
        frames, buf = split_frames(buf + chunk)
        if any(isinstance(value, kind) for _channel, value in frames):
            return


def test_an_unknown_method_id_resets_the_socket(broker: BrokerThread) -> None:
    sock = socket.create_connection((broker.host, broker.port), timeout=5)
    with sock:
        sock.sendall(b"AMQP\x00\x00\x09\x01")
        read_frames_until(sock, commands.Connection.Start)
        start_ok = commands.Connection.StartOk(
            client_properties={}, mechanism="PLAIN", response="\0guest\0guest", locale="en_US"
        )
        sock.sendall(frame.marshal(start_ok, 0))
        read_frames_until(sock, commands.Connection.Tune)
        sock.sendall(
            frame.marshal(commands.Connection.TuneOk(channel_max=2047, frame_max=131072, heartbeat=0), 0)
        )
        sock.sendall(frame.marshal(commands.Connection.Open(virtual_host="/"), 0))
        read_frames_until(sock, commands.Connection.OpenOk)
        sock.sendall(frame.marshal(commands.Channel.Open(), 1))
        read_frames_until(sock, commands.Channel.OpenOk)
        payload = struct.pack(">HH", 60, 999)
        sock.sendall(struct.pack(">BHI", 1, 1, len(payload)) + payload + b"\xce")
        with pytest.raises(ConnectionResetError):
            sock.recv(100)
