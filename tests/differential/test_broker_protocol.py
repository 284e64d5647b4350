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


# -- timing and publish refusals, observed side by side on both brokers ------------------------------


def _both(fn: Callable[[int], object], hashbroker: str, rabbitmq_url: str) -> tuple[object, object]:
    """fn(port) on RabbitMQ and on hashbroker at the same time (the observations take seconds)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        expected = pool.submit(fn, _port(rabbitmq_url))
        got = pool.submit(fn, _port(hashbroker))
        return expected.result(), got.result()


def _until_closed(sock: socket.socket, limit: float) -> tuple[list[tuple[float, int]], float, str]:
    """(arrival time, frame type) of every frame until the server closes; when and how it closed."""
    import time

    start = time.monotonic()
    frames: list[tuple[float, int]] = []
    buf = b""
    sock.settimeout(limit)
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return frames, time.monotonic() - start, "reset"
        except TimeoutError:
            return frames, time.monotonic() - start, "open"
        if not chunk:
            return frames, time.monotonic() - start, "eof"
        buf += chunk
        while len(buf) >= 8 and len(buf) >= 8 + struct.unpack_from(">I", buf, 3)[0]:
            size = struct.unpack_from(">I", buf, 3)[0]
            frames.append((time.monotonic() - start, buf[0]))
            buf = buf[8 + size :]


@pytest.mark.slow
@pytest.mark.live
def test_handshake_timeout_matches_rabbitmq(hashbroker: str, rabbitmq_url: str) -> None:
    """A client that sends only the protocol header: connection.start, then after 10 s (RabbitMQ's
    handshake_timeout) the socket is reset without a close frame."""

    def observe(port: int) -> object:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"AMQP\x00\x00\x09\x01")
            frames, after, how = _until_closed(sock, 14)
            return [t for _at, t in frames], after, how

    expected, got = _both(observe, hashbroker, rabbitmq_url)
    for frames, after, how in (expected, got):
        assert (frames, how) == ([1], "reset")
        assert 9.5 <= after <= 11.5  # a loaded machine delays both a little


@pytest.mark.slow
@pytest.mark.live
def test_heartbeat_timing_matches_rabbitmq(hashbroker: str, rabbitmq_url: str) -> None:
    """heartbeat=2 and an idle client: a heartbeat frame every second from ~1 s (half the
    interval), then a reset at ~6 s (two receive checks without data)."""
    from tests.differential_support import RawAmqp

    def observe(port: int) -> object:
        raw = RawAmqp("127.0.0.1", port, heartbeat=2, timeout=10)
        try:
            frames, after, how = _until_closed(raw.sock, 10)
        finally:
            raw.close()
        return [at for at, t in frames if t == 8], after, how

    expected, got = _both(observe, hashbroker, rabbitmq_url)
    for beats, after, how in (expected, got):
        assert how == "reset" and 5.5 <= after <= 7.0
        assert len(beats) == 5 and all(abs(at - n) < 0.5 for n, at in enumerate(beats, 1))


def _publish_refusal(port: int, method: bytes, header: bytes, body: bytes) -> object:
    """Frames the server sends after each part of one publish, sent with pauses between them."""
    from tests.differential_support import RawAmqp, frame_obs

    raw = RawAmqp("127.0.0.1", port)
    try:
        raw.open_channel(1)
        out = []
        for part in (method, header, body):
            raw.send_bytes(part)
            out.append([frame_obs(ch, v) for ch, v in raw.frames_until_quiet(0.4)])
        return out
    finally:
        raw.close()


def _publish_parts(props: bytes, body: bytes = b"x", immediate: bool = False) -> tuple[bytes, bytes, bytes]:
    bits = b"\x02" if immediate else b"\x00"
    method = _method(1, 60, 40, b"\x00\x00" + _ss("") + _ss("nowhere") + bits)
    header = _frame(2, 1, struct.pack(">HHQ", 60, 0, len(body)) + props)
    return method, header, _frame(3, 1, body)


def _headers_props(table: bytes) -> bytes:
    return struct.pack(">H", 1 << 13) + struct.pack(">I", len(table)) + table


@pytest.mark.live
def test_immediate_is_refused_after_the_whole_message(hashbroker: str, rabbitmq_url: str) -> None:
    """540 NOT_IMPLEMENTED - immediate=true, naming basic.publish, only once the body arrived."""
    parts = _publish_parts(b"\x00\x00", immediate=True)
    expected, got = _both(lambda port: _publish_refusal(port, *parts), hashbroker, rabbitmq_url)
    assert expected == [
        [],
        [],
        [[0, "Connection.Close", {"reply_code": 540, "reply_text": "NOT_IMPLEMENTED - immediate=true",
                                  "class_id": 60, "method_id": 40}]],
    ]  # fmt: skip
    assert got == expected


INTERNAL_ERROR_CLOSE = [
    [],
    [],
    [
        [
            0,
            "Connection.Close",
            {"reply_code": 541, "reply_text": "INTERNAL_ERROR", "class_id": 0, "method_id": 0},
        ]
    ],
]

BAD_HEADERS = {
    "broken_inner_length": b"\x01aS" + struct.pack(">I", 100) + b"xyz",
    "nan_nested": b"\x01aF" + struct.pack(">I", 11) + b"\x01bd" + struct.pack(">d", float("nan")),
    "inf": b"\x01ad" + struct.pack(">d", float("inf")),
    "minus_inf_in_array": b"\x01aA" + struct.pack(">I", 11) + b"b\x01d" + struct.pack(">d", float("-inf")),
}


@pytest.mark.live
@pytest.mark.parametrize("case", sorted(BAD_HEADERS))
def test_undecodable_headers_close_with_internal_error(case: str, hashbroker: str, rabbitmq_url: str) -> None:
    """RabbitMQ 3.10.8 cannot decode these headers tables (Erlang has no NaN or infinity; a broken
    length): its channel crashes at publish, so the connection closes with 541 and 0/0."""
    parts = _publish_parts(_headers_props(BAD_HEADERS[case]))
    expected, got = _both(lambda port: _publish_refusal(port, *parts), hashbroker, rabbitmq_url)
    assert expected == INTERNAL_ERROR_CLOSE
    assert got == expected


@pytest.mark.slow
@pytest.mark.live
def test_no_close_ok_resets_after_30s(hashbroker: str, rabbitmq_url: str) -> None:
    """After connection.close the server keeps the socket 30 s for the close-ok, then resets it."""
    from tests.differential_support import RawAmqp

    def observe(port: int) -> object:
        raw = RawAmqp("127.0.0.1", port, timeout=40)
        try:
            raw.send_bytes(_method(5, 60, 10, struct.pack(">IHB", 0, 1, 0)))  # channel 5 is not open
            frames, after, how = _until_closed(raw.sock, 40)
        finally:
            raw.close()
        return [t for _at, t in frames], after, how

    expected, got = _both(observe, hashbroker, rabbitmq_url)
    for frames, after, how in (expected, got):
        assert (frames, how) == ([1], "reset")
        assert 29.0 <= after <= 32.0
