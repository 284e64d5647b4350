"""`hashbroker serve` picks its event loop at start, says which in its log and in /api/overview, and
serves AMQP on it; uvloop's run is skipped where uvloop is not installed (it is an optional extra)."""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pika
import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_and_probe(loop_env: str | None) -> tuple[str, str, bytes]:
    """Start serve (HASHBROKER_LOOP=`loop_env`), publish and get one message over AMQP, read the
    overview's loop field; returns (overview field, the log, the body got back)."""
    amqp, mgmt = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if k != "HASHBROKER_LOOP"}
    if loop_env is not None:
        env["HASHBROKER_LOOP"] = loop_env
    with tempfile.TemporaryDirectory() as data_dir:
        log_path = Path(data_dir) / "serve.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [
                    *(sys.executable, "-m", "broker.cli.main", "serve", "--host", "127.0.0.1"),
                    *("--port", str(amqp), "--management-port", str(mgmt), "--data-dir", data_dir),
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with urllib.request.urlopen(
                        urllib.request.Request(
                            f"http://127.0.0.1:{mgmt}/api/overview",
                            headers={"authorization": "Basic " + base64.b64encode(b"guest:guest").decode()},
                        ),
                        timeout=5,
                    ) as resp:
                        overview = json.loads(resp.read())
                    break
                except OSError:
                    assert proc.poll() is None, log_path.read_text()
                    assert time.monotonic() < deadline, log_path.read_text()
                    time.sleep(0.1)
            conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", amqp))
            ch = conn.channel()
            ch.queue_declare("evloop.q")
            ch.basic_publish("", "evloop.q", b"over the loop")
            body = b""
            for _ in range(100):
                _method, _props, got = ch.basic_get("evloop.q", auto_ack=True)
                if got is not None:
                    body = got
                    break
                time.sleep(0.02)
            conn.close()
        finally:
            proc.terminate()
            proc.wait(30)
        return overview["hashbroker_event_loop"], log_path.read_text(), body


def test_serve_on_asyncio_when_asked() -> None:
    field, log, body = serve_and_probe("asyncio")
    assert field == "asyncio"
    assert "event loop: asyncio" in log
    assert body == b"over the loop"


def test_serve_on_uvloop_when_installed() -> None:
    pytest.importorskip("uvloop", reason="uvloop is not installed (pip install 'hashbroker[uvloop]')")
    field, log, body = serve_and_probe(None)
    assert field == "uvloop"
    assert "event loop: uvloop" in log
    assert body == b"over the loop"
