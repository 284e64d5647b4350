"""Graceful shutdown of `hashbroker serve`: SIGTERM/SIGINT close every client with 320, commit the
store, exit 0 (RabbitMQ's rabbit_networking:close_all_connections on node stop)."""

from __future__ import annotations

import signal
import socket
import subprocess
from pathlib import Path

import pika
import pika.exceptions
import pytest

from tests.serve_support import free_port, start_serve

SHUTDOWN_TEXT = "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'"


def start_broker(tmp_path: Path, port: int) -> subprocess.Popen[bytes]:
    """`hashbroker serve` with its output piped: the tests read what it printed after it exited."""
    args = ("--data-dir", str(tmp_path / "data"))
    pipe = subprocess.PIPE
    env = {"HASHBROKER_LOG_LEVEL": "WARNING"}
    return start_serve(*args, port=port, env=env, stdout=pipe, stderr=pipe, wait=15)[0]


def connect(port: int) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port, heartbeat=0))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_closes_clients_with_320_and_keeps_confirmed(tmp_path: Path, signum: int) -> None:
    port = free_port()
    proc = start_broker(tmp_path, port)
    try:
        conn = connect(port)
        ch = conn.channel()
        ch.queue_declare("keep", durable=True)
        ch.confirm_delivery()
        ch.basic_publish("", "keep", b"confirmed", pika.BasicProperties(delivery_mode=2))
        # a raw client, mid-handshake-free: it only reads what the broker sends it
        raw = socket.create_connection(("127.0.0.1", port))
        raw.sendall(b"AMQP\x00\x00\x09\x01")
        raw.settimeout(5)
        assert raw.recv(7)[:1] == b"\x01"
        raw.recv(65536)  # the rest of connection.start
        proc.send_signal(signum)
        with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as info:
            conn.process_data_events(time_limit=5)
            conn.process_data_events(time_limit=5)
        assert (info.value.reply_code, info.value.reply_text) == (320, SHUTDOWN_TEXT)
        assert proc.wait(15) == 0
        raw.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert b"Traceback" not in proc.stderr.read()  # type: ignore[union-attr]
    proc = start_broker(tmp_path, port)
    try:
        conn = connect(port)
        _method, _props, body = conn.channel().basic_get("keep", auto_ack=True)
        assert body == b"confirmed"
        conn.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0


def test_raw_client_reads_320_close_frame(tmp_path: Path) -> None:
    """The close frame itself, as bytes: channel 0, connection.close, 320, RabbitMQ's text, 0/0."""
    from pamqp import commands, frame

    port = free_port()
    proc = start_broker(tmp_path, port)
    try:
        conn = connect(port)  # pika only to get an open connection quickly
        sock = conn._impl._transport._sock  # type: ignore[attr-defined]
        sock.setblocking(True)
        sock.settimeout(5)
        proc.send_signal(signal.SIGTERM)
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            try:
                _, _, close = frame.unmarshal(data)
                break
            except Exception:  # not a whole frame yet
                continue
        assert isinstance(close, commands.Connection.Close)
        assert (close.reply_code, close.reply_text, close.class_id, close.method_id) == (
            320,
            SHUTDOWN_TEXT,
            0,
            0,
        )
        sock.sendall(frame.marshal(commands.Connection.CloseOk(), 0))
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
