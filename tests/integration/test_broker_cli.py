"""CLI: `hashbroker serve` (start-up, port-taken error) and `hashbroker demo`."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.cli.main import main
from broker.runtime.settings import Settings

PY = sys.executable


def test_serve_reports_port_taken(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        rc = main(["serve", "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(tmp_path / "d")])
    err = capsys.readouterr().err.strip()
    assert rc != 0
    assert err == f"hashbroker: cannot listen on 127.0.0.1:{port}: address already in use"


def test_serve_starts_quickly_and_accepts_amqp(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = tmp_path / "hb.toml"
    cfg.write_text(f'port = {port}\nlog_level = "WARNING"\n')
    env = {**os.environ, "HASHBROKER_HOST": "127.0.0.1", "HASHBROKER_DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.Popen([PY, "-m", "broker.cli.main", "serve", "--config", str(cfg)], env=env)
    try:
        deadline = time.time() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as c:
                    c.sendall(b"AMQP\x00\x00\x09\x01")
                    assert c.recv(7)[:1] == b"\x01"  # connection.start method frame
                    break
            except ConnectionRefusedError:
                if time.time() > deadline:
                    raise
                time.sleep(0.02)
    finally:
        proc.terminate()
        proc.wait(5)


def test_serve_reports_store_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "store.sqlite3").write_bytes(b"not a database at all" * 10)
    rc = main(["serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", str(data)])
    err = capsys.readouterr().err.strip()
    assert rc == 1
    assert err.startswith(f"hashbroker: {data / 'store.sqlite3'}: not a SQLite database"), err
    assert "\n" not in err


def test_settings_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "hb.json"
    cfg.write_text('{"port": 1111, "heartbeat": 5, "frame_max": 8192}')
    monkeypatch.setenv("HASHBROKER_HEARTBEAT", "7")
    s = Settings.load(cfg, frame_max=None, port=2222)
    assert (s.port, s.heartbeat, s.frame_max) == (2222, 7, 8192)


@pytest.mark.slow
def test_demo_runs() -> None:
    proc = subprocess.run([PY, "-m", "broker.cli.main", "demo"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "IDENTICAL to RabbitMQ 3.10.8" in proc.stdout
    assert "chi-squared" in proc.stdout
