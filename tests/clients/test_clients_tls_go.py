"""Go's amqp091 client (github.com/rabbitmq/amqp091-go) over AMQPS with verify_peer: a publish and
consume round trip with PLAIN and with EXTERNAL, and the refusals RabbitMQ gives it.

The program (tests/clients/go_tls/main.go) is built offline at test time from the Debian package's
GOPATH tree (about 4 s on a cold build cache); skipped with the install command as the reason where
Go or the package is missing.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.embedded import BrokerThread
from tests.tls_support import Pki, make_pki, subject_dn, tls_settings

pytestmark = [pytest.mark.slow]

GOPATH = Path("/usr/share/gocode")
AMQP091 = GOPATH / "src" / "github.com" / "rabbitmq" / "amqp091-go"
INSTALL = "apt-get install golang-go golang-github-rabbitmq-amqp091-go-dev"
SOURCE = Path(__file__).resolve().parent / "go_tls" / "main.go"
TLS_USER = subject_dn("tls-user")


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go")
    if go is None or not AMQP091.is_dir():
        pytest.skip(f"Go or amqp091-go missing: {INSTALL}")
    root = tmp_path_factory.mktemp("go")
    package = root / "src" / "tlsprobe"
    package.mkdir(parents=True)
    shutil.copy(SOURCE, package / "main.go")
    binary = root / "tlsprobe"
    env = {
        **os.environ,
        "GOPATH": f"{root}{os.pathsep}{GOPATH}",
        "GO111MODULE": "off",
        "GOFLAGS": "-mod=mod",
        "GOCACHE": os.environ.get("GOCACHE", str(Path.home() / ".cache" / "go-build")),
    }
    built = subprocess.run(
        [go, "build", "-o", str(binary), "."],
        cwd=package,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert built.returncode == 0, built.stderr
    return binary


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def broker(pki: Pki) -> Iterator[BrokerThread]:
    with BrokerThread(**tls_settings(pki)) as b:  # type: ignore[arg-type]

        def add_user() -> None:
            b.broker.auth.add_user(TLS_USER, "unused-password")
            b.broker.auth.set_permissions("/", TLS_USER, ".*", ".*", ".*")

        b.call(add_user)
        yield b


def run(program: Path, b: BrokerThread, pki: Pki, cert: str | None, mode: str, user: str = "") -> str:
    pair = pki.clients[cert] if cert is not None else None
    url = (
        f"amqps://{user}@127.0.0.1:{b.broker.tls_port}/"
        if user
        else f"amqps://127.0.0.1:{b.broker.tls_port}/"
    )
    args = [
        str(program),
        url,
        str(pki.ca),
        str(pair.cert) if pair else "-",
        str(pair.key) if pair else "-",
        mode,
    ]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    return done.stdout.strip() or done.stderr.strip()


def test_go_round_trip_over_tls_with_verify_peer(program: Path, broker: BrokerThread, pki: Pki) -> None:
    assert run(program, broker, pki, "guest", "plain", "guest:guest") == "got over tls from go"


def test_go_external_logs_in_the_certificate_user(
    program: Path, broker: BrokerThread, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, "hashbroker.connection"):
        assert run(program, broker, pki, "tls-user", "external") == "got over tls from go"
    assert f"user '{TLS_USER}' authenticated and granted access to vhost '/'" in caplog.text


def test_go_external_unknown_user_is_refused(program: Path, broker: BrokerThread, pki: Pki) -> None:
    # amqp091-go reports a 403 at start-ok as its ErrCredentials, as against RabbitMQ 3.10.8
    out = run(program, broker, pki, "nobody", "external")
    assert out == 'error dial: Exception (403) Reason: "username or password not allowed"'


def test_go_without_a_certificate_is_refused_when_fail_if_no_peer_cert(program: Path, pki: Pki) -> None:
    with BrokerThread(**tls_settings(pki, ssl_fail_if_no_peer_cert=True)) as strict:  # type: ignore[arg-type]
        out = run(program, strict, pki, None, "plain", "guest:guest")
        assert out.startswith("error dial:"), out
        assert "got" not in out
        assert run(program, strict, pki, "guest", "plain", "guest:guest") == "got over tls from go"
