"""Malformed input on raw sockets: same close code as RabbitMQ 3.10.8, broker keeps serving others."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable

import pika
import pytest

from amqpwire.fields import FieldTable


def _frame(ftype: int, ch: int, payload: bytes) -> bytes:
    return struct.pack(">BHI", ftype, ch, len(payload)) + payload + b"\xce"


def _method(ch: int, cls: int, mid: int, fields: bytes = b"") -> bytes:
    return _frame(1, ch, struct.pack(">HH", cls, mid) + fields)


def _ss(s: str) -> bytes:
    return bytes((len(s),)) + s.encode()


def _read_frame(sock: socket.socket) -> tuple[int, int, bytes] | None:
    head = b""
    while len(head) < 7:
        chunk = sock.recv(7 - len(head))
        if not chunk:
            return None
        head += chunk
    ftype, ch, size = struct.unpack(">BHI", head)
    body = b""
    while len(body) < size + 1:
        chunk = sock.recv(size + 1 - len(body))
        if not chunk:
            return None
        body += chunk
    return ftype, ch, body[:-1]


def open_connection(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"AMQP\x00\x00\x09\x01")
    _read_frame(sock)  # start
    caps = FieldTable.from_python({"capabilities": {"authentication_failure_close": True}}).encode()
    sock.sendall(
        _method(
            0,
            10,
            11,
            struct.pack(">I", len(caps))
            + caps
            + _ss("PLAIN")
            + struct.pack(">I", 12)
            + b"\x00guest\x00guest"
            + _ss("en_US"),
        )
    )
    _read_frame(sock)  # tune
    sock.sendall(_method(0, 10, 31, struct.pack(">HIH", 2047, 131072, 0)))
    sock.sendall(_method(0, 10, 40, _ss("/") + _ss("") + b"\x00"))
    _read_frame(sock)  # open-ok
    return sock


def close_code(port: int, attack: bytes, open_channel: bool = True) -> int:
    """Send `attack` on an open connection; return the connection.close reply code (0: none)."""
    sock = open_connection(port)
    try:
        if open_channel:
            sock.sendall(_method(1, 20, 10, _ss("")))
            _read_frame(sock)
        sock.sendall(attack)
        while True:
            frame = _read_frame(sock)
            if frame is None:
                return 0
            ftype, _ch, payload = frame
            if ftype == 1 and payload[:4] == b"\x00\x0a\x00\x32":
                return int(struct.unpack(">H", payload[4:6])[0])
    except (ConnectionResetError, TimeoutError):
        return 0
    finally:
        sock.close()


ATTACKS: dict[str, Callable[[], bytes]] = {
    "bad_frame_end": lambda: struct.pack(">BHI", 1, 1, 4) + b"\x00\x3c\x00\x46" + b"\x00",
    "oversized_frame": lambda: struct.pack(">BHI", 3, 1, 200000) + b"x" * 10,
    "method_on_unopened_channel": lambda: _method(5, 50, 10, b"\x00\x00" + _ss("q") + b"\x00" + b"\x00" * 4),
    "body_without_publish": lambda: _frame(3, 1, b"data"),
    "header_without_publish": lambda: _frame(2, 1, struct.pack(">HHQH", 60, 0, 0, 0)),
    "method_instead_of_header": lambda: (
        _method(1, 60, 40, b"\x00\x00" + _ss("") + _ss("k") + b"\x00")
        + _method(1, 60, 70, b"\x00\x00" + _ss("q") + b"\x00")
    ),
    "truncated_method": lambda: _frame(1, 1, b"\x00\x32\x00\x0a\x00"),
    "second_channel_open": lambda: _method(1, 20, 10, _ss("")),
    "heartbeat_on_channel": lambda: _frame(8, 1, b""),
    "unknown_frame_type": lambda: _frame(9, 0, b"abc"),
}


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


@pytest.mark.live
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_protocol_error_code_matches_rabbitmq(attack: str, hashbroker: str, rabbitmq_url: str) -> None:
    payload = ATTACKS[attack]()
    expected = close_code(_port(rabbitmq_url), payload)
    got = close_code(_port(hashbroker), payload)
    assert got == expected
    # the broker still serves other clients
    conn = pika.BlockingConnection(pika.URLParameters(hashbroker))
    conn.channel().queue_declare("", exclusive=True)
    conn.close()


def test_bad_protocol_header_gets_our_header(hashbroker: str) -> None:
    with socket.create_connection(("127.0.0.1", _port(hashbroker)), timeout=5) as sock:
        sock.sendall(b"HTTP/1.1")
        assert sock.recv(8) == b"AMQP\x00\x00\x09\x01"
        assert sock.recv(1) == b""


def test_wrong_password_is_access_refused(hashbroker: str) -> None:
    url = hashbroker.replace("guest:guest", "guest:wrong")
    with pytest.raises(pika.exceptions.ProbableAuthenticationError) as info:
        pika.BlockingConnection(pika.URLParameters(url))
    assert "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN" in str(info.value)
