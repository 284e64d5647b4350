"""TLS as RabbitMQ configures it: the one place SSL contexts are built (AMQPS and management's
HTTPS), and the user name a peer certificate logs in with the EXTERNAL mechanism.

`TlsOptions` mirrors RabbitMQ's `ssl_options.*` (and `management.ssl.*`): cacertfile, certfile,
keyfile, password, verify (verify_peer | verify_none), fail_if_no_peer_cert, depth and versions.
Python's ssl module has no knob for the verification depth, so `depth` is accepted and reported
as not enforced (`TlsOptions.unenforced`).

`peer_login` is rabbit_auth_mechanism_ssl's init: the user named by the verified peer
certificate (rabbit_ssl:peer_cert_auth_name), formatted as rabbit_cert_info formats a subject.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from broker.protocol.handshake import PeerLogin
from broker.runtime.settings import TLS_OPTIONS, SettingsError

if TYPE_CHECKING:
    from broker.runtime.settings import Settings

log = logging.getLogger("hashbroker.tls")

Verify = Literal["verify_peer", "verify_none"]
CertLoginFrom = Literal["distinguished_name", "common_name"]

TLS_VERSIONS: dict[str, ssl.TLSVersion] = {
    "tlsv1": ssl.TLSVersion.TLSv1,
    "tlsv1.1": ssl.TLSVersion.TLSv1_1,
    "tlsv1.2": ssl.TLSVersion.TLSv1_2,
    "tlsv1.3": ssl.TLSVersion.TLSv1_3,
}
"""RabbitMQ's `ssl_options.versions.N` values and the TLS versions they name."""

SSL_HANDSHAKE_TIMEOUT = 5.0
"""Seconds a TLS handshake may take (RabbitMQ's ssl_handshake_timeout, 5000 ms): a client that
never finishes it is dropped, as RabbitMQ resets it."""


class TlsError(SettingsError):
    """A TLS option refused at start-up (an unreadable file, a wrong password, an unknown version)."""


@dataclass(frozen=True)
class TlsOptions:
    """One listener's TLS options (RabbitMQ's ssl_options or management.ssl)."""

    certfile: str
    keyfile: str | None = None
    cacertfile: str | None = None
    password: str | None = None
    verify: Verify = "verify_none"
    fail_if_no_peer_cert: bool = False
    depth: int | None = None
    versions: tuple[str, ...] = ()

    @property
    def unenforced(self) -> tuple[str, ...]:
        """Options given that Python's ssl module cannot apply (logged at start-up)."""
        return ("depth",) if self.depth is not None else ()


def server_context(options: TlsOptions) -> ssl.SSLContext:
    """The SSL context of a TLS listener. verify_peer asks for a client certificate and checks it
    against `cacertfile` (a certificate that does not verify fails the handshake);
    fail_if_no_peer_cert also fails the handshake of a client that sends none. verify_none asks
    for no certificate at all, as Erlang's ssl server does."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.load_cert_chain(options.certfile, options.keyfile, options.password)
    except FileNotFoundError as exc:
        raise TlsError(f"certfile or keyfile not found: {exc.filename or options.certfile}") from None
    except (OSError, ssl.SSLError) as exc:
        raise TlsError(
            f"cannot load certfile {options.certfile} / keyfile {options.keyfile}: {exc}"
        ) from None
    if options.cacertfile is not None:
        try:
            ctx.load_verify_locations(cafile=options.cacertfile)
        except (OSError, ssl.SSLError) as exc:
            raise TlsError(f"cannot load cacertfile {options.cacertfile}: {exc}") from None
    if options.verify == "verify_peer":
        ctx.verify_mode = ssl.CERT_REQUIRED if options.fail_if_no_peer_cert else ssl.CERT_OPTIONAL
    else:
        ctx.verify_mode = ssl.CERT_NONE
    if options.versions:
        chosen = sorted(TLS_VERSIONS[v] for v in options.versions)
        ctx.minimum_version, ctx.maximum_version = chosen[0], chosen[-1]
    return ctx


def listener_options(settings: Settings, prefix: str, port: int | None) -> TlsOptions | None:
    """A TLS listener's options from the settings named `<prefix>_<option>` ("ssl" for RabbitMQ's
    ssl_options, "management_ssl" for management.ssl); None when its `port` is off."""
    option = {name: getattr(settings, f"{prefix}_{name}") for name in TLS_OPTIONS}
    if port is None or option["certfile"] is None:
        return None
    option["versions"] = tuple(option["versions"] or ())
    return TlsOptions(**option)


def amqp_options(settings: Settings) -> TlsOptions | None:
    """The AMQPS listener's options (RabbitMQ's ssl_options), None when it is off."""
    return listener_options(settings, "ssl", settings.tls_port)


def management_options(settings: Settings) -> TlsOptions | None:
    """The HTTPS management listener's options (RabbitMQ's management.ssl), None when it is off."""
    return listener_options(settings, "management_ssl", settings.management_ssl_port)


def listener_context(options: TlsOptions, what: str) -> ssl.SSLContext:
    """`server_context`, with a start-up log line for any option Python cannot enforce."""
    ctx = server_context(options)
    for name in options.unenforced:
        log.warning(
            "%s: TLS option %s is not enforced (Python's ssl module has no setting for it)", what, name
        )
    return ctx


# -- the EXTERNAL mechanism -------------------------------------------------------------------------

_SHORT_NAMES = {
    "surname": "SN",
    "givenName": "GIVENNAME",
    "initials": "INITIALS",
    "generationQualifier": "GENERATIONQUALIFIER",
    "commonName": "CN",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "title": "TITLE",
    "countryName": "C",
    "serialNumber": "SERIALNUMBER",
    "pseudonym": "PSEUDONYM",
    "domainComponent": "DC",
    "emailAddress": "EMAILADDRESS",
    "userId": "UID",
}
"""OpenSSL's long attribute names (as Python's getpeercert gives them) to the short ones
rabbit_cert_info:format_rdn prints; any other attribute is printed as its dotted OID (streetAddress
too: RabbitMQ 3.10.8 prints it "2.5.4.9=", as observed)."""


def attribute_name(name: str) -> str:
    """How rabbit_cert_info:format_rdn names an attribute Python calls `name`."""
    short = _SHORT_NAMES.get(name)
    if short is not None:
        return short
    try:
        # the ssl module's one way from OpenSSL's object names to OIDs (public since Python 3.4
        # through ssl.Purpose, which is built on it)
        return str(ssl._ASN1Object.fromname(name).oid)  # noqa: SLF001
    except ValueError:  # not an OpenSSL name: Python already gave the dotted OID
        return name


Subject = Sequence[Sequence[tuple[str, str]]]
"""A certificate subject as `SSLSocket.getpeercert()` gives it: RDNs in certificate order, each a
sequence of (attribute, value) pairs."""


def escape_rdn_value(value: str) -> str:
    """rabbit_cert_info:escape_rdn_value: a leading space or #, a trailing space and the
    characters ",+;<>\\ and " are backslash-escaped; every byte of the UTF-8 form below 32 or
    from 126 up is written \\XX (upper-case hex)."""
    raw = value.encode("utf-8")
    out: list[str] = []
    last = len(raw) - 1
    for i, byte in enumerate(raw):
        ch = chr(byte)
        if i == 0 and ch in " #":
            out.append("\\" + ch)
        elif i == last and ch == " ":
            out.append("\\ ")
        elif ch in '"+,;<>\\':
            out.append("\\" + ch)
        elif byte < 32 or byte >= 126:
            out.append(f"\\{byte:02X}")
        else:
            out.append(ch)
    return "".join(out)


def format_subject(subject: Subject) -> str:
    """rabbit_cert_info:subject: the RDNs last first, joined with ",", a multi-valued RDN's
    attributes joined with "+" (as `openssl x509 -nameopt RFC2253 -subject` prints it)."""
    rdns = ["+".join(f"{attribute_name(k)}={escape_rdn_value(v)}" for k, v in rdn) for rdn in subject]
    return ",".join(reversed(rdns))


def common_names(subject: Subject) -> list[str]:
    return [v for rdn in subject for k, v in rdn if k == "commonName"]


def peer_login(ssl_object: Any, *, verify: Verify, login_from: CertLoginFrom) -> PeerLogin:
    """rabbit_auth_mechanism_ssl:init for the TLS connection `ssl_object` (an ssl.SSLObject):
    the user the peer certificate names, or RabbitMQ's reason for refusing the login."""
    if ssl_object is None:
        return PeerLogin(None, "not a TLS-enabled connection")
    if ssl_object.getpeercert(binary_form=True) is None:
        return PeerLogin(None, "connection peer presented no TLS (x.509) certificate")
    if verify != "verify_peer":
        return PeerLogin(None, "TLS configuration is unsafe")
    subject: Subject = ssl_object.getpeercert().get("subject", ())
    if login_from == "common_name":
        names = common_names(subject)
        if not names:
            return PeerLogin(None, "no name found")
        return PeerLogin(",".join(names), None)
    return PeerLogin(format_subject(subject), None)


# -- what /api/connections shows of a TLS connection ---------------------------------------------------

TLS_FIELDS = (
    "ssl_protocol",
    "ssl_key_exchange",
    "ssl_cipher",
    "ssl_hash",
    "peer_cert_subject",
    "peer_cert_issuer",
    "peer_cert_validity",
)
"""rabbit_reader's TLS info items, null on a connection without TLS (or without a peer certificate)."""


def suite_names(ctx: ssl.SSLContext) -> dict[str, tuple[str, str, str]]:
    """The context's cipher suites by OpenSSL name, as Erlang's ssl names their parts:
    (key_exchange, cipher, mac), e.g. ("any", "aes_256_gcm", "aead") for TLS 1.3's
    TLS_AES_256_GCM_SHA384, ("ecdhe_rsa", "aes_128_cbc", "sha256") for ECDHE-RSA-AES128-SHA256."""
    out: dict[str, tuple[str, str, str]] = {}
    for suite in ctx.get_ciphers():
        kea = str(suite.get("kea") or "").removeprefix("kx-")
        auth = str(suite.get("auth") or "").removeprefix("auth-")
        exchange = kea if kea in ("any", "rsa", "psk") or auth in ("any", "null", "") else f"{kea}_{auth}"
        digest = "sha" if suite.get("digest") == "sha1" else str(suite.get("digest") or "")
        mac = "aead" if suite.get("aead") else digest
        out[str(suite["name"])] = (exchange, str(suite.get("symmetric") or "").replace("-", "_"), mac)
    return out


def validity(cert: dict[str, Any]) -> str:
    """rabbit_cert_info:validity: "2026-11-27T22:27:23Z - 2026-11-29T22:32:23Z"."""

    def iso(text: str) -> str:
        import time

        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ssl.cert_time_to_seconds(text)))

    return f"{iso(cert['notBefore'])} - {iso(cert['notAfter'])}"


@dataclass
class PeerCertificates:
    """What a TLS listener makes of its connections' peers: the EXTERNAL user (`login`) and the
    connection's TLS details for the management API (`describe`)."""

    verify: Verify
    login_from: CertLoginFrom
    _suites: dict[str, tuple[str, str, str]] | None = None

    def login(self, ssl_object: Any) -> PeerLogin:
        return peer_login(ssl_object, verify=self.verify, login_from=self.login_from)

    def describe(self, ssl_object: Any) -> dict[str, str | None]:
        """rabbit_reader's ssl_protocol, ssl_key_exchange, ssl_cipher, ssl_hash and peer_cert_*
        items of the connection (None where there is nothing to say)."""
        info: dict[str, str | None] = dict.fromkeys(TLS_FIELDS)
        if ssl_object is None:
            return info
        if self._suites is None:
            self._suites = suite_names(ssl_object.context)
        version = ssl_object.version()
        info["ssl_protocol"] = version.lower() if version else None
        cipher = ssl_object.cipher()
        if cipher is not None and cipher[0] in self._suites:
            info["ssl_key_exchange"], info["ssl_cipher"], info["ssl_hash"] = self._suites[cipher[0]]
        cert = ssl_object.getpeercert()
        if cert:
            info["peer_cert_subject"] = format_subject(cert.get("subject", ()))
            info["peer_cert_issuer"] = format_subject(cert.get("issuer", ()))
            info["peer_cert_validity"] = validity(cert)
        return info
