"""`hashbroker serve --tls-*`: the TLS flags end to end, and TLS settings refused in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pika
import pytest

from tests.serve_support import REPO, free_port, start_serve, stop_serve
from tests.tls_support import Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), clients=("guest",))


def serve(*args: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HASHBROKER_")}
    return subprocess.run(
        [sys.executable, "-m", "broker.cli.main", "serve", "--data-dir", ":memory:", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=environ,
        cwd=REPO,
    )


def test_a_tls_port_without_a_certificate_is_a_usage_error() -> None:
    result = serve("--tls-port", "0")
    assert result.returncode == 64
    assert result.stderr.strip() == (
        "hashbroker: --tls-port 0: tls_port needs ssl_certfile (and ssl_keyfile unless the key is in it)"
    )


def test_a_certificate_that_cannot_be_loaded_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "missing.pem"
    result = serve("--tls-port", "0", "--ssl-certfile", str(missing))
    assert result.returncode == 78
    assert result.stderr.strip() == f"hashbroker: certfile or keyfile not found: {missing}"


def test_serve_with_the_tls_flags_takes_a_verified_pika_client(pki: Pki) -> None:
    tls_port = free_port()
    proc, _port = start_serve(
        "--data-dir",
        ":memory:",
        "--tls-port",
        str(tls_port),
        "--ssl-certfile",
        str(pki.server.cert),
        "--ssl-keyfile",
        str(pki.server.key),
        "--ssl-cacertfile",
        str(pki.ca),
        "--ssl-verify",
        "verify_peer",
        "--ssl-fail-if-no-peer-cert",
        "true",
        "--ssl-versions",
        "tlsv1.3",
        stderr=subprocess.DEVNULL,
    )
    try:
        params = pika.ConnectionParameters(
            "127.0.0.1",
            tls_port,
            ssl_options=pika.SSLOptions(pki.client_context("guest"), "localhost"),
            connection_attempts=10,
            retry_delay=0.1,
        )
        with pika.BlockingConnection(params) as conn:
            ssl_version = conn._impl._transport._sock.version()  # type: ignore[union-attr]
            ch = conn.channel()
            ch.queue_declare("tls-cli", exclusive=True)
            ch.basic_publish("", "tls-cli", b"via serve")
            method, _, body = ch.basic_get("tls-cli", auto_ack=True)
        assert method is not None and body == b"via serve"
        assert ssl_version == "TLSv1.3"
        without = pika.ConnectionParameters(
            "127.0.0.1",
            tls_port,
            ssl_options=pika.SSLOptions(pki.client_context(None), "localhost"),
            connection_attempts=1,
        )
        with pytest.raises(pika.exceptions.AMQPConnectionError):
            pika.BlockingConnection(without)
    finally:
        assert stop_serve(proc) == 0
