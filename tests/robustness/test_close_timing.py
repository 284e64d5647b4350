"""rabbit_reader's close timing over real sockets (RabbitMQ 3.10.8, observed on the live broker).

After a refused login RabbitMQ sends connection.close 403 (only to a client with the
`authentication_failure_close` capability) or nothing, stops reading, and resets the socket 3.0 s
later. After a fatal frame error (frame_too_large, a client frame_max of 4096) it sends the 501
close and resets 3.0 s later (rabbit_reader:fatal_frame_error sleeps ?SILENT_CLOSE_DELAY), so a
client still writing reads the reason. While it waits it reads nothing: what a refused client keeps
sending costs the broker no memory.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from pamqp import commands, frame

from broker.embedded import BrokerThread
from tests.differential_support import split_frames
from tests.serve_support import serving_quietly

CAPABILITY = {"capabilities": {"authentication_failure_close": True}}
HELD = 2.5  # RabbitMQ holds 3.0 s; the test allows for a loaded machine's timer lateness


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerThread]:
    b = BrokerThread(port=0, data_dir=":memory:", log_level="CRITICAL").start()
    try:
        yield b
    finally:
        b.stop()


class Raw:
    """A client speaking frames on a socket; `frames` are what it has read so far."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=15)
        self.buf = b""
        self.frames: list[Any] = []

    def send(self, channel: int, method: Any) -> None:
        self.sock.sendall(frame.marshal(method, channel))

    def read_until(self, done: Callable[[Any], bool]) -> Any:
        while True:
            for value in self.frames:
                if done(value):
                    return value
            chunk = self.sock.recv(65536)
            assert chunk, f"closed; read {self.frames}"
            self.buf += chunk
            while self.buf:
                try:
                    used, _channel, value = frame.unmarshal(self.buf)
                except Exception:
                    break
                self.buf = self.buf[used:]
                self.frames.append(value)

    def login(self, password: str, properties: dict[str, Any]) -> None:
        self.sock.sendall(b"AMQP\x00\x00\x09\x01")
        self.read_until(lambda v: isinstance(v, commands.Connection.Start))
        ok = commands.Connection.StartOk(
            client_properties=properties, mechanism="PLAIN", response=f"\0guest\0{password}", locale="en_US"
        )
        self.send(0, ok)

    def open(self, frame_max: int) -> None:
        self.login("guest", {})
        self.read_until(lambda v: isinstance(v, commands.Connection.Tune))
        self.send(0, commands.Connection.TuneOk(channel_max=2047, frame_max=frame_max, heartbeat=0))
        self.send(0, commands.Connection.Open(virtual_host="/"))
        self.read_until(lambda v: isinstance(v, commands.Connection.OpenOk))
        self.send(1, commands.Channel.Open())
        self.read_until(lambda v: isinstance(v, commands.Channel.OpenOk))

    def until_closed(self) -> bytes:
        """Everything read until the broker closes (a reset counts as closed)."""
        data = b""
        try:
            while chunk := self.sock.recv(65536):
                data += chunk
        except ConnectionResetError:
            pass
        return data


def refused_login(port: int, properties: dict[str, Any]) -> tuple[float, bytes]:
    client = Raw(port)
    with client.sock:
        client.login("wrong", properties)
        started = time.monotonic()
        data = client.until_closed()
        return time.monotonic() - started, data


@pytest.mark.parametrize("properties", [CAPABILITY, {}], ids=["with_capability", "without_capability"])
def test_a_refused_login_keeps_the_socket_open_before_closing(
    broker: BrokerThread, properties: dict[str, Any]
) -> None:
    with ThreadPoolExecutor(10) as pool:
        results = list(pool.map(lambda _i: refused_login(broker.port, properties), range(10)))
    for held, data in results:
        assert HELD <= held < 10, [round(h, 3) for h, _d in results]
        if properties:
            _used, _channel, close = frame.unmarshal(data)
            assert isinstance(close, commands.Connection.Close)
            assert close.reply_code == 403
            assert close.reply_text.startswith("ACCESS_REFUSED - Login was refused")
        else:
            assert data == b""


def test_a_refused_login_answered_with_close_ok_is_closed_at_once(broker: BrokerThread) -> None:
    """RabbitMQ 3.10.8 (observed): the 403 answered with close-ok resets at once; the 3 s hold is
    for clients that do not answer."""
    client = Raw(broker.port)
    with client.sock:
        client.login("wrong", CAPABILITY)
        close = client.read_until(lambda v: isinstance(v, commands.Connection.Close))
        assert close.reply_code == 403
        client.send(0, commands.Connection.CloseOk())
        started = time.monotonic()
        client.until_closed()
        assert time.monotonic() - started < 1.0


def frame_too_large(port: int) -> tuple[float, bytes]:
    """A client with frame_max 4096 sends a 1 MiB body frame and keeps writing: it must still read
    the broker's 501 connection.close, and the socket is reset only after the delay."""
    client = Raw(port)
    with client.sock:
        client.open(4096)
        body = b"x" * (1 << 20)
        stop = threading.Event()

        def keep_writing() -> None:
            junk = struct.pack(">BHI", 3, 1, 4000) + b"y" * 4000 + b"\xce"
            try:
                client.sock.sendall(struct.pack(">BHI", 3, 1, len(body)) + body + b"\xce")
                while not stop.is_set():
                    client.sock.sendall(junk)
            except OSError:
                pass

        writer = threading.Thread(target=keep_writing, daemon=True)
        started = time.monotonic()
        writer.start()
        try:
            data = client.until_closed()
            return time.monotonic() - started, data
        finally:
            stop.set()
            writer.join(timeout=15)


@pytest.mark.slow
def test_a_fatal_frame_error_reaches_a_client_still_writing(broker: BrokerThread) -> None:
    with ThreadPoolExecutor(10) as pool:
        results = list(pool.map(lambda _i: frame_too_large(broker.port), range(20)))
    expected = "FRAME_ERROR - type 3, all octets = <<>>: {frame_too_large,1048576,4088}"
    read = []
    assert all(HELD <= held < 10 for held, _d in results), [round(h, 3) for h, _d in results]
    for _held, data in results:
        frames, _rest = split_frames(data)
        closes = [value for _channel, value in frames if isinstance(value, commands.Connection.Close)]
        close = closes[-1] if closes else None
        read.append(close is not None and close.reply_code == 501 and close.reply_text == expected)
    assert all(read), f"{read.count(True)} of 20 read the 501 close"


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_refused_clients_that_keep_sending_cost_no_memory(tmp_path: Path) -> None:
    """200 wrong-password connections each send 1 MiB after their refusal, while the broker holds
    them: nothing they send is read, so the broker's resident memory stays put."""
    with serving_quietly("--data-dir", ":memory:", log_level="CRITICAL") as (proc, port):
        refused_login(port, CAPABILITY)  # warm up the code paths before measuring
        before = rss_kib(proc.pid)

        def flood(_i: int) -> None:
            client = Raw(port)
            with client.sock:
                client.login("wrong", CAPABILITY)
                client.sock.settimeout(0.5)
                junk = b"z" * 65536
                try:
                    for _ in range(16):
                        client.sock.sendall(junk)
                except OSError:  # the broker's socket buffer is full: it is not reading
                    pass

        with ThreadPoolExecutor(20) as pool:
            list(pool.map(flood, range(200)))
        grown = rss_kib(proc.pid) - before
        assert grown < 30 * 1024, f"RSS grew by {grown} KiB"


def socket_after_close_ok(port: int) -> str:
    """Open a connection, close it, read close-ok, then see what the socket does for 1.5 s."""
    client = Raw(port)
    with client.sock:
        client.open(131072)
        client.send(0, commands.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0))
        client.read_until(lambda v: isinstance(v, commands.Connection.CloseOk))
        client.sock.settimeout(1.5)
        try:
            return "eof" if client.sock.recv(1) == b"" else "data"
        except TimeoutError:
            return "open"
        except ConnectionResetError:
            return "reset"


def test_after_close_ok_the_socket_is_the_clients_to_close(broker: BrokerThread, rabbitmq_url: str) -> None:
    """RabbitMQ 3.10.8 answers a client's connection.close and leaves the socket open (reset after
    30 s if the client keeps it): a client with separate reader and writer tasks closes it itself."""
    rabbit_port = int(rabbitmq_url.rsplit(":", 1)[1].split("/", 1)[0])
    assert socket_after_close_ok(rabbit_port) == socket_after_close_ok(broker.port) == "open"
