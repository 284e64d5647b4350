"""File descriptors: the soft open-files limit raised to the hard one at start, accept() failures
for lack of descriptors logged once per interval (no traceback per retry) with accepting resumed
by itself, and fd_used/fd_total in /api/nodes."""

from __future__ import annotations

import json
import resource
import socket
import time
import urllib.request
from base64 import b64encode
from pathlib import Path

from broker.embedded import BrokerThread
from tests.serve_support import start_serve, stop_serve

LIMIT = 48


def low_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


def amqp_start(port: int, timeout: float) -> bool:
    """Whether a fresh client gets connection.start within `timeout` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as c:
                c.settimeout(max(0.1, deadline - time.time()))
                c.sendall(b"AMQP\x00\x00\x09\x01")
                if c.recv(7)[:1] == b"\x01":
                    return True
        except OSError:
            time.sleep(0.1)
    return False


def test_out_of_descriptors_logs_little_and_recovers(tmp_path: Path) -> None:
    env = {"HASHBROKER_HANDSHAKE_TIMEOUT": "60"}
    err = (tmp_path / "err.log").open("wb")
    proc, port = start_serve("--data-dir", ":memory:", env=env, stderr=err, preexec_fn=low_limit, wait=15)
    held: list[socket.socket] = []
    try:
        assert amqp_start(port, 15)
        for _ in range(LIMIT + 20):  # more than the broker can hold: some stay in the backlog
            held.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        time.sleep(4)  # asyncio retries accept() every second: several failures
        assert proc.poll() is None
        text = (tmp_path / "err.log").read_text()
        lines = [ln for ln in text.splitlines() if "accept() failed" in ln]
        print(lines)
        assert 1 <= len(lines) <= 2, text[-2000:]
        assert "Too many open files" in lines[0]
        assert "Traceback" not in text and "out of system resource" not in text
        assert len(text) < 20_000  # not a log flood
        for s in held:
            s.close()
        held.clear()
        assert amqp_start(port, 10)  # accepting resumed by itself
    finally:
        for s in held:
            s.close()
        stop_serve(proc, 10)
        err.close()


def test_nodes_report_descriptors() -> None:
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        assert soft == hard  # raised at start
        extra = [socket.create_connection(("127.0.0.1", b.port)) for _ in range(10)]
        time.sleep(0.3)
        req = urllib.request.Request(f"http://127.0.0.1:{b.broker.management.port}/api/nodes")
        req.add_header("Authorization", "Basic " + b64encode(b"guest:guest").decode())
        with urllib.request.urlopen(req, timeout=5) as resp:
            node = json.load(resp)[0]
        for s in extra:
            s.close()
        assert node["fd_total"] == soft
        assert 20 <= node["fd_used"] < soft
