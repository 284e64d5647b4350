"""A throwaway certificate authority for the TLS tests, made with `cryptography` at test time.

`make_pki(directory)` writes a CA, a server certificate for localhost / 127.0.0.1 and client
certificates, all PEM, and returns their paths. Keys are P-256 (fast to make; every client under
test speaks ECDSA). Nothing is cached between sessions: the files live in a pytest tmp directory.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pair:
    """A certificate and its key (PEM files)."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    ca: Path
    ca_key: Path
    server: Pair
    clients: dict[str, Pair]
    """Client certificates by the common name in their subject."""
    encrypted_key: Path
    """The server key again, encrypted with `KEY_PASSWORD`."""
    stranger: Pair
    """A client certificate signed by another CA (verify_peer refuses it)."""

    def client_context(self, name: str | None = None) -> ssl.SSLContext:
        """An SSL context that verifies the server against the CA and, when `name` is given,
        presents that client's certificate."""
        ctx = ssl.create_default_context(cafile=str(self.ca))
        if name is not None:
            pair = self.clients[name]
            ctx.load_cert_chain(str(pair.cert), str(pair.key))
        return ctx


KEY_PASSWORD = "s3cret"

ORGANISATION = "hashbroker tests"
"""O= of every client certificate's subject (RabbitMQ's distinguished name puts it after CN)."""


def subject_dn(common_name: str) -> str:
    """The user name RabbitMQ's EXTERNAL mechanism derives (ssl_cert_login_from =
    distinguished_name) from a client certificate `make_pki` issued to `common_name`."""
    return f"CN={common_name},O={ORGANISATION}"


def tls_settings(pki: Pki, **extra: object) -> dict[str, object]:
    """Broker settings for an AMQPS listener on an ephemeral port with verify_peer against the
    test CA, and EXTERNAL offered (its plugin on, auth_mechanisms naming it)."""
    return {
        "port": 0,
        "tls_port": 0,
        "ssl_cacertfile": str(pki.ca),
        "ssl_certfile": str(pki.server.cert),
        "ssl_keyfile": str(pki.server.key),
        "ssl_verify": "verify_peer",
        "plugins": ["rabbitmq_management", "rabbitmq_auth_mechanism_ssl"],
        "auth_mechanisms": ["PLAIN", "AMQPLAIN", "EXTERNAL"],
        "silent_close_delay": 0.2,
        **extra,
    }


def _name(common_name: str, organisation: str | None = None) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organisation is not None:
        parts.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organisation))
    return x509.Name(parts)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey, password: str | None = None) -> Path:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password is not None
        else serialization.NoEncryption()
    )
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, encryption
        )
    )
    return path


def _write_cert(path: Path, cert: x509.Certificate) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def _issue(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    server: bool = False,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        ).add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False).add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False
        )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def make_pki(directory: Path, clients: tuple[str, ...] = ("guest", "tls-user", "nobody")) -> Pki:
    """A CA, a server certificate and one client certificate per name in `clients`, under `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _new_key()
    ca_name = _name("hashbroker test CA", ORGANISATION)
    ca_cert = _issue(ca_name, ca_key, ca_name, ca_key, ca=True)
    ca = _write_cert(directory / "ca.pem", ca_cert)
    ca_key_path = _write_key(directory / "ca.key", ca_key)
    server_key = _new_key()
    server_cert = _issue(_name("localhost", ORGANISATION), server_key, ca_name, ca_key, server=True)
    server = Pair(
        _write_cert(directory / "server.pem", server_cert), _write_key(directory / "server.key", server_key)
    )
    encrypted = _write_key(directory / "server-encrypted.key", server_key, KEY_PASSWORD)
    issued: dict[str, Pair] = {}
    for name in clients:
        key = _new_key()
        cert = _issue(_name(name, ORGANISATION), key, ca_name, ca_key)
        issued[name] = Pair(
            _write_cert(directory / f"client-{name}.pem", cert),
            _write_key(directory / f"client-{name}.key", key),
        )
    other_key = _new_key()
    other_name = _name("another CA")
    stranger_key = _new_key()
    stranger_cert = _issue(_name("guest", ORGANISATION), stranger_key, other_name, other_key)
    stranger = Pair(
        _write_cert(directory / "stranger.pem", stranger_cert),
        _write_key(directory / "stranger.key", stranger_key),
    )
    return Pki(ca, ca_key_path, server, issued, encrypted, stranger)


def issue_client(pki: Pki, file_stem: str, subject: x509.Name) -> Pair:
    """A client certificate with this exact `subject`, signed by the test CA."""
    ca_cert = x509.load_pem_x509_certificate(pki.ca.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = _new_key()
    cert = _issue(subject, key, ca_cert.subject, ca_key)
    directory = pki.ca.parent
    return Pair(
        _write_cert(directory / f"{file_stem}.pem", cert), _write_key(directory / f"{file_stem}.key", key)
    )
