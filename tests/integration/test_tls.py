"""TLS as RabbitMQ 3.10.8 configures it: the AMQPS listener (listeners.ssl + ssl_options), the
EXTERNAL mechanism (rabbitmq_auth_mechanism_ssl) and HTTPS management (management.ssl).

The certificates come from a throwaway CA made at test time (tests/tls_support.py). What RabbitMQ
3.10.8 does was observed on a node with `listeners.ssl.default`, `ssl_options.verify = verify_peer`
and `auth_mechanisms.1..3 = PLAIN, AMQPLAIN, EXTERNAL`:
- connection.start on the TLS port offers EXTERNAL (with or without a client certificate);
- EXTERNAL with a certificate of a known user goes on to connection.tune; with an unknown one the
  client is told "ACCESS_REFUSED - Login was refused using authentication mechanism EXTERNAL. For
  details see the broker logfile." (the log says "user 'CN=nobody,O=...' - invalid credentials"),
  without a certificate the log says "connection peer presented no TLS (x.509) certificate";
- with fail_if_no_peer_cert = true a client without a certificate gets no AMQP byte: the TLS
  session ends before the protocol header is answered;
- plain AMQP on the TLS port is answered with a TLS alert and the socket closed;
- a client that never starts the TLS handshake is dropped after ssl_handshake_timeout (5 s).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import socket
import ssl
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import aio_pika
import pika
import pika.credentials
import pika.exceptions
import pytest
from pamqp import commands, frame

from broker.embedded import BrokerThread
from tests.tls_support import Pki, make_pki, subject_dn, tls_settings

TLS_USER = subject_dn("tls-user")
EXTERNAL_REFUSED = (
    "ACCESS_REFUSED - Login was refused using authentication mechanism EXTERNAL. "
    "For details see the broker logfile."
)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def broker(pki: Pki) -> Iterator[BrokerThread]:
    settings = tls_settings(
        pki,
        management_ssl_port=0,
        management_ssl_certfile=str(pki.server.cert),
        management_ssl_keyfile=str(pki.server.key),
        ssl_handshake_timeout=0.5,
    )
    with BrokerThread(**settings) as b:  # type: ignore[arg-type]

        def add_user() -> None:
            b.broker.auth.add_user(TLS_USER, "unused-password")
            b.broker.auth.set_permissions("/", TLS_USER, ".*", ".*", ".*")

        b.call(add_user)
        yield b


def pika_params(b: BrokerThread, pki: Pki, cert: str | None, **kw: object) -> pika.ConnectionParameters:
    ctx = pki.client_context(cert)
    assert b.broker.tls_port is not None
    return pika.ConnectionParameters(
        "127.0.0.1",
        b.broker.tls_port,
        ssl_options=pika.SSLOptions(ctx, "localhost"),
        connection_attempts=1,
        **kw,  # type: ignore[arg-type]
    )


def round_trip(conn: pika.BlockingConnection, name: str) -> bytes:
    ch = conn.channel()
    ch.queue_declare(name, exclusive=True)
    ch.basic_publish("", name, b"over tls " + name.encode())
    for _ in range(50):
        method, _props, body = ch.basic_get(name, auto_ack=True)
        if method is not None:
            return bytes(body)
        time.sleep(0.02)
    raise AssertionError("the message did not come back")


def users_connected(b: BrokerThread) -> set[str]:
    return set(b.call(lambda: {c.user for c in b.broker.connections}))


def test_pika_round_trip_over_tls_with_verify_peer(broker: BrokerThread, pki: Pki) -> None:
    params = pika_params(broker, pki, "guest", credentials=pika.PlainCredentials("guest", "guest"))
    with pika.BlockingConnection(params) as conn:
        assert round_trip(conn, "tls-pika") == b"over tls tls-pika"


async def test_aio_pika_round_trip_over_tls_with_verify_peer(broker: BrokerThread, pki: Pki) -> None:
    conn = await aio_pika.connect(
        host="127.0.0.1",
        port=broker.broker.tls_port,
        login="guest",
        password="guest",
        ssl=True,
        ssl_context=pki.client_context("guest"),
    )
    async with conn:
        ch = await conn.channel()
        q = await ch.declare_queue("tls-aio-pika", exclusive=True)
        await ch.default_exchange.publish(aio_pika.Message(b"over tls"), routing_key=q.name)
        msg = await q.get(timeout=5, fail=True)
        assert msg is not None
        await msg.ack()
        assert msg.body == b"over tls"


def test_external_logs_in_the_certificate_subject(broker: BrokerThread, pki: Pki) -> None:
    params = pika_params(broker, pki, "tls-user", credentials=pika.credentials.ExternalCredentials())
    with pika.BlockingConnection(params) as conn:
        assert TLS_USER in users_connected(broker)
        names = broker.call(lambda: [c.name for c in broker.broker.connections if c.user == TLS_USER])
        # named by the listener it reached
        assert names[0].endswith(f" -> 127.0.0.1:{broker.broker.tls_port}")
        assert round_trip(conn, "tls-external") == b"over tls tls-external"


async def test_aio_pika_external_logs_in_the_certificate_subject(broker: BrokerThread, pki: Pki) -> None:
    url = f"amqps://127.0.0.1:{broker.broker.tls_port}/?auth=external"
    conn = await aio_pika.connect(url, ssl_context=pki.client_context("tls-user"))
    async with conn:
        ch = await conn.channel()
        q = await ch.declare_queue("tls-aio-external", exclusive=True)
        assert TLS_USER in users_connected(broker)
        await ch.default_exchange.publish(aio_pika.Message(b"as the certificate"), routing_key=q.name)
        msg = await q.get(timeout=5, fail=True)
        assert msg is not None and msg.body == b"as the certificate"


def test_external_refuses_an_unknown_user_with_rabbitmqs_text(
    broker: BrokerThread, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    params = pika_params(broker, pki, "nobody", credentials=pika.credentials.ExternalCredentials())
    with (
        caplog.at_level(logging.ERROR, "hashbroker.connection"),
        pytest.raises(pika.exceptions.ProbableAuthenticationError) as refused,
    ):
        pika.BlockingConnection(params)
    assert EXTERNAL_REFUSED in str(refused.value)
    assert f"EXTERNAL login refused: user '{subject_dn('nobody')}' - invalid credentials" in caplog.text


def test_external_without_a_certificate_is_refused_by_name(
    broker: BrokerThread, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    params = pika_params(broker, pki, None, credentials=pika.credentials.ExternalCredentials())
    with (
        caplog.at_level(logging.ERROR, "hashbroker.connection"),
        pytest.raises(pika.exceptions.ProbableAuthenticationError) as refused,
    ):
        pika.BlockingConnection(params)
    assert EXTERNAL_REFUSED in str(refused.value)
    assert "EXTERNAL login refused: connection peer presented no TLS (x.509) certificate" in caplog.text


def start_frame(sock: socket.socket) -> commands.Connection.Start:
    sock.sendall(b"AMQP\x00\x00\x09\x01")
    data = b""
    while True:
        chunk = sock.recv(4096)
        assert chunk, "closed before connection.start"
        data += chunk
        try:
            _, _, method = frame.unmarshal(data)
        except Exception:  # an incomplete frame: read on
            continue
        assert isinstance(method, commands.Connection.Start)
        return method


def tls_socket(b: BrokerThread, pki: Pki, cert: str | None) -> ssl.SSLSocket:
    assert b.broker.tls_port is not None
    raw = socket.create_connection(("127.0.0.1", b.broker.tls_port), timeout=5)
    return pki.client_context(cert).wrap_socket(raw, server_hostname="localhost")


def test_external_is_offered_on_the_tls_listener_only(broker: BrokerThread, pki: Pki) -> None:
    with tls_socket(broker, pki, None) as s:
        assert start_frame(s).mechanisms == "EXTERNAL PLAIN AMQPLAIN"
    with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as s:
        assert start_frame(s).mechanisms == "PLAIN AMQPLAIN"
        # rabbit_reader: a known mechanism this socket does not offer is a command_invalid, which
        # closes the handshake silently (RabbitMQ resets the socket after its silent-close delay)
        ok = commands.Connection.StartOk(mechanism="EXTERNAL", response="", locale="en_US")
        s.sendall(frame.marshal(ok, 0))
        assert read_or_reset(s) == b""


def read_or_reset(sock: socket.socket) -> bytes:
    """What the peer sends before closing; a reset counts as closing."""
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def test_plain_amqp_on_the_tls_port_fails_cleanly(broker: BrokerThread) -> None:
    assert broker.broker.tls_port is not None
    with socket.create_connection(("127.0.0.1", broker.broker.tls_port), timeout=5) as s:
        s.sendall(b"AMQP\x00\x00\x09\x01")
        answer = read_or_reset(s)
    # a TLS alert record (content type 21) or nothing, then the close: never AMQP
    assert answer[:1] in (b"", b"\x15"), answer


def test_a_stalled_tls_handshake_is_dropped_without_stalling_others(broker: BrokerThread, pki: Pki) -> None:
    assert broker.broker.tls_port is not None
    stalled = socket.create_connection(("127.0.0.1", broker.broker.tls_port), timeout=5)
    half = socket.create_connection(("127.0.0.1", broker.broker.tls_port), timeout=5)
    half.sendall(b"\x16\x03\x01\x02\x00\x01")  # the start of a ClientHello, never finished
    try:
        begun = time.monotonic()
        params = pika_params(broker, pki, "guest", credentials=pika.PlainCredentials("guest", "guest"))
        with pika.BlockingConnection(params) as conn:
            assert round_trip(conn, "tls-meanwhile") == b"over tls tls-meanwhile"
        assert time.monotonic() - begun < 0.5  # served while both stalled handshakes were pending
        for sock in (stalled, half):
            assert read_or_reset(sock)[:1] in (b"", b"\x15")  # closed (perhaps after a TLS alert)
        assert time.monotonic() - begun < 3.0  # ssl_handshake_timeout is 0.5 s here
    finally:
        stalled.close()
        half.close()


def https_get(b: BrokerThread, pki: Pki, path: str) -> tuple[int, object]:
    mgmt = b.broker.management
    assert mgmt is not None and mgmt.tls_port
    req = urllib.request.Request(
        f"https://localhost:{mgmt.tls_port}{path}",
        headers={"Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()},
    )
    with urllib.request.urlopen(req, context=pki.client_context(), timeout=5) as resp:
        return resp.status, json.loads(resp.read())


def test_management_answers_over_https(broker: BrokerThread, pki: Pki) -> None:
    status, overview = https_get(broker, pki, "/api/overview")
    assert status == 200 and isinstance(overview, dict)
    assert overview["rabbitmq_version"]
    # RabbitMQ 3.10.8 lists its listeners as "amqp", "amqp/ssl", ..., "https" (observed)
    listed = [(x["protocol"], x["port"]) for x in overview["listeners"]]
    mgmt = broker.broker.management
    assert listed == [("amqp", broker.port), ("amqp/ssl", broker.broker.tls_port), ("https", mgmt.tls_port)]
    assert https_get(broker, pki, "/api/health/checks/protocol-listener/amqps") == (
        200,
        {"status": "ok", "protocol": "amqp/ssl"},
    )
    port_check = f"/api/health/checks/port-listener/{broker.broker.tls_port}"
    assert https_get(broker, pki, port_check) == (200, {"status": "ok", "port": broker.broker.tls_port})


def test_connections_show_their_tls_details_as_rabbitmq_does(broker: BrokerThread, pki: Pki) -> None:
    params = pika_params(broker, pki, "guest", credentials=pika.PlainCredentials("guest", "guest"))
    plain = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", broker.port))
    with pika.BlockingConnection(params), plain:
        status, listed = https_get(broker, pki, "/api/connections")
    assert status == 200 and isinstance(listed, list)
    by_port = {c["port"]: c for c in listed}
    tls_conn = by_port[broker.broker.tls_port]
    # as RabbitMQ 3.10.8 showed a Python client's TLS 1.3 connection with a certificate of this CA
    assert {k: v for k, v in tls_conn.items() if k.startswith(("ssl", "peer_cert"))} == {
        "ssl": True,
        "ssl_protocol": "tlsv1.3",
        "ssl_key_exchange": "any",
        "ssl_cipher": "aes_256_gcm",
        "ssl_hash": "aead",
        "peer_cert_subject": "CN=guest,O=hashbroker tests",
        "peer_cert_issuer": "CN=hashbroker test CA,O=hashbroker tests",
        "peer_cert_validity": tls_conn["peer_cert_validity"],
    }
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ - \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", tls_conn["peer_cert_validity"]
    )
    plain_conn = by_port[broker.port]
    assert plain_conn["ssl"] is False
    assert all(plain_conn[k] is None for k in plain_conn if k.startswith(("ssl_", "peer_cert")))


@pytest.fixture(scope="module")
def strict_broker(pki: Pki) -> Iterator[BrokerThread]:
    with BrokerThread(**tls_settings(pki, ssl_fail_if_no_peer_cert=True)) as b:  # type: ignore[arg-type]
        yield b


def test_fail_if_no_peer_cert_refuses_a_client_without_a_certificate(
    strict_broker: BrokerThread, pki: Pki
) -> None:
    s = tls_socket(
        strict_broker, pki, None
    )  # TLS 1.3: the server's verdict arrives after the client's Finished
    with s, pytest.raises((ssl.SSLError, ConnectionError)) as refused:
        s.sendall(b"AMQP\x00\x00\x09\x01")
        data = s.recv(4096)
        assert data == b"", data  # no AMQP byte either way
        raise ConnectionError("closed")
    if isinstance(refused.value, ssl.SSLError):
        assert "CERTIFICATE_REQUIRED" in str(refused.value).upper()
    params = pika_params(strict_broker, pki, None, credentials=pika.PlainCredentials("guest", "guest"))
    with pytest.raises(pika.exceptions.AMQPConnectionError):
        pika.BlockingConnection(params)
    params = pika_params(strict_broker, pki, "guest", credentials=pika.PlainCredentials("guest", "guest"))
    with pika.BlockingConnection(params) as conn:
        assert round_trip(conn, "tls-strict") == b"over tls tls-strict"


def test_verify_peer_refuses_a_certificate_of_another_ca(broker: BrokerThread, pki: Pki) -> None:
    ctx = pki.client_context()
    ctx.load_cert_chain(str(pki.stranger.cert), str(pki.stranger.key))
    assert broker.broker.tls_port is not None
    raw = socket.create_connection(("127.0.0.1", broker.broker.tls_port), timeout=5)
    with (
        pytest.raises((ssl.SSLError, ConnectionError)),
        ctx.wrap_socket(raw, server_hostname="localhost") as s,
    ):
        s.sendall(b"AMQP\x00\x00\x09\x01")
        assert s.recv(4096) == b""
        raise ConnectionError("closed")


async def test_an_encrypted_key_with_its_password(pki: Pki, tmp_path: Path) -> None:
    from broker.runtime.tls import TlsError
    from broker.server import Broker
    from tests.tls_support import KEY_PASSWORD

    settings = tls_settings(pki, ssl_keyfile=str(pki.encrypted_key), ssl_password=KEY_PASSWORD)
    async with Broker(**settings) as b:
        assert b.tls_port
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", b.tls_port, ssl=pki.client_context("guest"), server_hostname="localhost"
        )
        writer.write(b"AMQP\x00\x00\x09\x01")
        assert (await reader.read(1)) == b"\x01"  # a method frame: connection.start
        writer.close()
    with pytest.raises(TlsError, match="keyfile"):
        await Broker(**{**settings, "ssl_password": "wrong"}).start()
