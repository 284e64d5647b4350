"""The user name EXTERNAL derives from a client certificate, against RabbitMQ 3.10.8 recorded.

The shared reference RabbitMQ has no TLS listener (and may not be reconfigured), so these were
recorded on a private RabbitMQ 3.10.8 node with `listeners.ssl.default`, `ssl_options.verify =
verify_peer`, `auth_mechanisms.3 = EXTERNAL` and rabbitmq_auth_mechanism_ssl on: a client
certificate with each subject below logged in with EXTERNAL, and the node's log line
"EXTERNAL login refused: user '<name>' - invalid credentials" gave the name it derived
(ssl_cert_login_from = distinguished_name, the default). hashbroker must log the same line.

Recorded again with `ssl_cert_login_from = common_name` and `auth_mechanisms.1 = EXTERNAL` alone:
the common names in certificate order, joined with "," and not escaped; connection.start offers
no mechanism at all on the plain listener and "EXTERNAL" on the TLS one, and PLAIN on the plain
listener is "invalid authentication mechanism 'PLAIN'" (a silent close, reset after 3 s).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
from collections.abc import Iterator

import pytest
from cryptography import x509
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID, ObjectIdentifier
from pamqp import commands, frame

from broker.embedded import BrokerThread
from tests.tls_support import Pki, issue_client, make_pki, tls_settings

A = x509.NameAttribute
RDN = x509.RelativeDistinguishedName

RECORDED: dict[str, tuple[x509.Name, str]] = {
    "escapes": (
        x509.Name([A(NameOID.COMMON_NAME, '#a,b+c;d<e>f"g\\h ~i ')]),
        'CN=\\#a\\,b\\+c\\;d\\<e\\>f\\"g\\\\h \\7Ei\\ ',
    ),
    "leading_space": (x509.Name([A(NameOID.COMMON_NAME, " lead")]), "CN=\\ lead"),
    "unicode": (x509.Name([A(NameOID.COMMON_NAME, "caf\u00e9 \u2713")]), "CN=caf\\C3\\A9 \\E2\\9C\\93"),
    "every_named_attribute": (
        x509.Name(
            [
                A(NameOID.COUNTRY_NAME, "GB"),
                A(NameOID.STATE_OR_PROVINCE_NAME, "Essex"),
                A(NameOID.LOCALITY_NAME, "Town"),
                A(NameOID.ORGANIZATION_NAME, "Org"),
                A(NameOID.ORGANIZATIONAL_UNIT_NAME, "Unit"),
                A(NameOID.COMMON_NAME, "many"),
                A(NameOID.EMAIL_ADDRESS, "a@b.example"),
                A(NameOID.DOMAIN_COMPONENT, "example"),
                A(NameOID.USER_ID, "uid1"),
                A(NameOID.SERIAL_NUMBER, "1234"),
                A(NameOID.TITLE, "Dr"),
                A(NameOID.SURNAME, "Sur"),
                A(NameOID.GIVEN_NAME, "Giv"),
                A(NameOID.INITIALS, "GS"),
                A(NameOID.GENERATION_QUALIFIER, "III"),
                A(NameOID.PSEUDONYM, "ps"),
                A(NameOID.STREET_ADDRESS, "1 Road"),
            ]
        ),
        "2.5.4.9=1 Road,PSEUDONYM=ps,GENERATIONQUALIFIER=III,INITIALS=GS,GIVENNAME=Giv,SN=Sur,TITLE=Dr,"
        "SERIALNUMBER=1234,UID=uid1,DC=example,EMAILADDRESS=a@b.example,CN=many,OU=Unit,O=Org,L=Town,"
        "ST=Essex,C=GB",
    ),
    "multi_valued_rdn": (
        x509.Name(
            [
                RDN([A(NameOID.COMMON_NAME, "x"), A(NameOID.ORGANIZATIONAL_UNIT_NAME, "y")]),
                RDN([A(NameOID.ORGANIZATION_NAME, "z")]),
            ]
        ),
        "O=z,CN=x+OU=y",
    ),
    "unnamed_attribute": (
        x509.Name([A(ObjectIdentifier("2.5.4.15"), "biz"), A(NameOID.COMMON_NAME, "unk")]),
        "CN=unk,2.5.4.15=biz",
    ),
    "two_common_names": (
        x509.Name([A(NameOID.COMMON_NAME, "one"), A(NameOID.COMMON_NAME, "two")]),
        "CN=two,CN=one",
    ),
    "printable_string": (
        x509.Name([A(NameOID.COMMON_NAME, "prt", _type=_ASN1Type.PrintableString)]),
        "CN=prt",
    ),
}


COMMON_NAMES: dict[str, str] = {
    "two_common_names": "one,two",
    "every_named_attribute": "many",
    "multi_valued_rdn": "x",
    "escapes": '#a,b+c;d<e>f"g\\h ~i ',
}
"""What RabbitMQ 3.10.8 logged for the same certificates with ssl_cert_login_from = common_name."""


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), clients=())


@pytest.fixture(scope="module")
def broker(pki: Pki) -> Iterator[BrokerThread]:
    with BrokerThread(**tls_settings(pki)) as b:  # type: ignore[arg-type]
        yield b


def external_login(b: BrokerThread, pki: Pki, stem: str, subject: x509.Name) -> None:
    """connection.start-ok with EXTERNAL from a client presenting a certificate for `subject`;
    returns once the broker has answered (the refusal's connection.close) or closed."""
    pair = issue_client(pki, stem, subject)
    ctx = pki.client_context()
    ctx.load_cert_chain(str(pair.cert), str(pair.key))
    assert b.broker.tls_port is not None
    raw = socket.create_connection(("127.0.0.1", b.broker.tls_port), timeout=5)
    with ctx.wrap_socket(raw, server_hostname="localhost") as s:
        s.sendall(b"AMQP\x00\x00\x09\x01")
        s.recv(4096)
        caps = {"capabilities": {"authentication_failure_close": True}}
        ok = commands.Connection.StartOk(
            client_properties=caps, mechanism="EXTERNAL", response="", locale="en_US"
        )
        s.sendall(frame.marshal(ok, 0))
        with contextlib.suppress(ssl.SSLError, ConnectionError):
            s.recv(4096)


@pytest.mark.parametrize("case", sorted(RECORDED))
def test_external_user_name_is_rabbitmqs(
    case: str, broker: BrokerThread, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    subject, rabbitmq_name = RECORDED[case]
    with caplog.at_level(logging.ERROR, "hashbroker.connection"):
        external_login(broker, pki, f"dn-{case}", subject)
    assert f"EXTERNAL login refused: user '{rabbitmq_name}' - invalid credentials" in caplog.text


@pytest.fixture(scope="module")
def cn_broker(pki: Pki) -> Iterator[BrokerThread]:
    settings = tls_settings(pki, ssl_cert_login_from="common_name", auth_mechanisms=["EXTERNAL"])
    with BrokerThread(**settings) as b:  # type: ignore[arg-type]
        yield b


@pytest.mark.parametrize("case", sorted(COMMON_NAMES))
def test_common_name_mode_is_rabbitmqs(
    case: str, cn_broker: BrokerThread, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, "hashbroker.connection"):
        external_login(cn_broker, pki, f"cn-{case}", RECORDED[case][0])
    assert f"EXTERNAL login refused: user '{COMMON_NAMES[case]}' - invalid credentials" in caplog.text


def start_mechanisms(sock: socket.socket) -> str:
    sock.sendall(b"AMQP\x00\x00\x09\x01")
    _, _, start = frame.unmarshal(sock.recv(4096))
    return str(start.mechanisms)


def test_external_alone_offers_nothing_on_the_plain_listener(
    cn_broker: BrokerThread, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    assert cn_broker.broker.tls_port is not None
    raw = socket.create_connection(("127.0.0.1", cn_broker.broker.tls_port), timeout=5)
    with pki.client_context().wrap_socket(raw, server_hostname="localhost") as s:
        assert start_mechanisms(s) == "EXTERNAL"
    with socket.create_connection(("127.0.0.1", cn_broker.port), timeout=5) as s:
        assert start_mechanisms(s) == ""
        with caplog.at_level(logging.ERROR, "hashbroker.connection"):
            ok = commands.Connection.StartOk(mechanism="PLAIN", response="\0guest\0guest", locale="en_US")
            s.sendall(frame.marshal(ok, 0))
            with contextlib.suppress(ConnectionResetError):
                assert s.recv(4096) == b""  # nothing is said: the socket closes
    assert "503 COMMAND_INVALID - invalid authentication mechanism 'PLAIN'" in caplog.text
