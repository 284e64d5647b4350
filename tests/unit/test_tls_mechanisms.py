"""The TLS pieces without sockets: which SASL mechanisms a listener offers and how the handshake
treats them (rabbit_reader:auth_mechanisms and auth_mechanism_to_module), the EXTERNAL user name
(rabbit_ssl:peer_cert_auth_name over rabbit_cert_info's subject format), the SSL context the
options build, and the rabbitmq.conf keys a config file may use."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest
from pamqp import commands, frame

from amqpwire.errors import AmqpError
from broker.protocol import handshake as H
from broker.protocol.assembler import CommandAssembler, ProtocolHeader
from broker.protocol.framing import PROTOCOL_HEADER
from broker.runtime import tls
from broker.runtime.settings import Settings, SettingsError, read_config_file
from broker.runtime.transport import mechanisms
from broker.session.identity import server_properties
from tests.tls_support import KEY_PASSWORD, make_pki

PLUGIN = "rabbitmq_auth_mechanism_ssl"


def handshake(offer: H.Mechanisms = H.PASSWORD_MECHANISMS) -> tuple[H.Handshake, str]:
    """A handshake past the protocol header; the mechanisms its connection.start lists."""
    hs = H.Handshake(
        server_properties("rabbit@test"), channel_max=2047, frame_max=131072, heartbeat=60, mechanisms=offer
    )
    (start,) = hs.protocol_header(ProtocolHeader(PROTOCOL_HEADER))
    assert isinstance(start, H.Send)
    _, _, method = frame.unmarshal(start.data)
    return hs, str(method.mechanisms)


def start_ok(hs: H.Handshake, mechanism: str, response: str = "") -> list[H.Action]:
    core = CommandAssembler()
    core.receive_data(
        PROTOCOL_HEADER
        + frame.marshal(commands.Connection.StartOk(mechanism=mechanism, response=response), 0)
    )
    events = [e for _, e in core.events() if not isinstance(e, ProtocolHeader)]
    return hs.receive(events[0])


def test_listeners_offer_what_rabbit_reader_would() -> None:
    configured = ["PLAIN", "AMQPLAIN", "EXTERNAL"]
    assert mechanisms(configured, {PLUGIN}, tls=True).offered == ("EXTERNAL", "PLAIN", "AMQPLAIN")
    assert mechanisms(configured, {PLUGIN}, tls=False).offered == ("PLAIN", "AMQPLAIN")  # should_offer: nossl
    assert mechanisms(configured, set(), tls=True).offered == ("PLAIN", "AMQPLAIN")  # not registered
    assert mechanisms(["EXTERNAL"], {PLUGIN}, tls=True).offered == ("EXTERNAL",)
    assert mechanisms(["PLAIN", "AMQPLAIN"], {PLUGIN}, tls=True).offered == ("PLAIN", "AMQPLAIN")
    assert "EXTERNAL" in mechanisms(["PLAIN"], {PLUGIN}, tls=False).known
    assert "EXTERNAL" not in mechanisms(configured, set(), tls=True).known


def test_external_is_answered_in_start_ok_without_reading_the_response() -> None:
    hs, _ = handshake(H.Mechanisms(("EXTERNAL", "PLAIN"), frozenset({"EXTERNAL", "PLAIN", "AMQPLAIN"})))
    assert start_ok(hs, "EXTERNAL", "anything at all") == [H.Authenticate("EXTERNAL", "", "")]
    assert hs.mechanism == "EXTERNAL"


@pytest.mark.parametrize(
    ("offered", "known", "mechanism", "text"),
    [
        (
            ("PLAIN", "AMQPLAIN"),
            {"PLAIN", "AMQPLAIN"},
            "EXTERNAL",
            "unknown authentication mechanism 'EXTERNAL'",
        ),
        (
            ("PLAIN", "AMQPLAIN"),
            {"EXTERNAL", "PLAIN", "AMQPLAIN"},
            "EXTERNAL",
            "invalid authentication mechanism 'EXTERNAL'",
        ),
        (
            ("EXTERNAL",),
            {"EXTERNAL", "PLAIN", "AMQPLAIN"},
            "PLAIN",
            "invalid authentication mechanism 'PLAIN'",
        ),
        (("PLAIN",), {"PLAIN", "AMQPLAIN"}, "CRAM-MD5", "unknown authentication mechanism 'CRAM-MD5'"),
    ],
)
def test_a_mechanism_not_offered_is_command_invalid(
    offered: tuple[str, ...], known: set[str], mechanism: str, text: str
) -> None:
    hs, _ = handshake(H.Mechanisms(offered, frozenset(known)))
    with pytest.raises(AmqpError) as err:
        start_ok(hs, mechanism, "\0guest\0guest")
    assert err.value.reply_code == 503
    assert err.value.reply_text == f"COMMAND_INVALID - {text}"
    assert hs.silent_errors  # rabbit_reader closes a starting connection without a word


def test_connection_start_lists_the_offered_mechanisms() -> None:
    offer = H.Mechanisms(("EXTERNAL", "PLAIN", "AMQPLAIN"), frozenset({"EXTERNAL", "PLAIN", "AMQPLAIN"}))
    assert handshake(offer)[1] == "EXTERNAL PLAIN AMQPLAIN"
    assert handshake()[1] == "PLAIN AMQPLAIN"  # as the reference RabbitMQ lists them


# -- the EXTERNAL user name ---------------------------------------------------------------------------


class FakeSslObject:
    """ssl.SSLObject's two certificate reads, for a given peer certificate (None: none sent)."""

    def __init__(self, subject: Any | None) -> None:
        self.subject = subject

    def getpeercert(self, binary_form: bool = False) -> Any:
        if self.subject is None:
            return None if binary_form else {}
        return b"der" if binary_form else {"subject": self.subject}


SUBJECT = (
    (("organizationName", "Acme, Inc."),),
    (("commonName", "alice"), ("organizationalUnitName", "ops")),
)


def test_the_distinguished_name_is_rabbit_cert_infos() -> None:
    assert tls.format_subject(SUBJECT) == "CN=alice+OU=ops,O=Acme\\, Inc."
    login = tls.peer_login(FakeSslObject(SUBJECT), verify="verify_peer", login_from="distinguished_name")
    assert login == H.PeerLogin("CN=alice+OU=ops,O=Acme\\, Inc.", None)


def test_common_name_mode_joins_the_cns_in_certificate_order() -> None:
    two = ((("commonName", "one"),), (("commonName", "two"),))
    assert (
        tls.peer_login(FakeSslObject(two), verify="verify_peer", login_from="common_name").user == "one,two"
    )
    none = ((("organizationName", "Acme"),),)
    assert tls.peer_login(FakeSslObject(none), verify="verify_peer", login_from="common_name") == H.PeerLogin(
        None, "no name found"
    )


def test_refusals_are_rabbit_auth_mechanism_ssls() -> None:
    dn: tls.CertLoginFrom = "distinguished_name"
    assert tls.peer_login(None, verify="verify_peer", login_from=dn).refusal == "not a TLS-enabled connection"
    assert (
        tls.peer_login(FakeSslObject(None), verify="verify_peer", login_from=dn).refusal
        == "connection peer presented no TLS (x.509) certificate"
    )
    assert (
        tls.peer_login(FakeSslObject(SUBJECT), verify="verify_none", login_from=dn).refusal
        == "TLS configuration is unsafe"
    )


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        ("plain", "plain"),
        (" lead", "\\ lead"),
        ("#hash", "\\#hash"),
        ("mid#dle", "mid#dle"),
        ("trail ", "trail\\ "),
        ('a"b+c,d;e<f>g\\h', 'a\\"b\\+c\\,d\\;e\\<f\\>g\\\\h'),
        ("tilde~", "tilde\\7E"),
        ("tab\t", "tab\\09"),
        ("é", "\\C3\\A9"),
    ],
)
def test_rdn_values_are_escaped_as_rabbitmq_does(value: str, escaped: str) -> None:
    assert tls.escape_rdn_value(value) == escaped


# -- contexts and settings ------------------------------------------------------------------------------


def test_server_context_applies_verify_and_versions(tmp_path: Path) -> None:
    pki = make_pki(tmp_path, clients=())
    base = tls.TlsOptions(str(pki.server.cert), str(pki.server.key), str(pki.ca))
    assert tls.server_context(base).verify_mode == ssl.CERT_NONE
    peer = tls.TlsOptions(str(pki.server.cert), str(pki.server.key), str(pki.ca), verify="verify_peer")
    assert tls.server_context(peer).verify_mode == ssl.CERT_OPTIONAL
    strict = tls.TlsOptions(
        str(pki.server.cert),
        str(pki.server.key),
        str(pki.ca),
        verify="verify_peer",
        fail_if_no_peer_cert=True,
    )
    assert tls.server_context(strict).verify_mode == ssl.CERT_REQUIRED
    versions = tls.TlsOptions(str(pki.server.cert), str(pki.server.key), versions=("tlsv1.3", "tlsv1.2"))
    ctx = tls.server_context(versions)
    assert (ctx.minimum_version, ctx.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)
    encrypted = tls.TlsOptions(str(pki.server.cert), str(pki.encrypted_key), password=KEY_PASSWORD)
    tls.server_context(encrypted)
    with pytest.raises(tls.TlsError, match="keyfile"):
        tls.server_context(tls.TlsOptions(str(pki.server.cert), str(pki.encrypted_key), password="wrong"))
    with pytest.raises(tls.TlsError, match="not found"):
        tls.server_context(tls.TlsOptions(str(tmp_path / "missing.pem")))
    assert tls.TlsOptions("c", depth=3).unenforced == ("depth",)


def test_a_config_file_may_use_rabbitmq_conf_keys(tmp_path: Path) -> None:
    config = tmp_path / "hashbroker.toml"
    config.write_text(
        "\n".join(
            [
                "auth_mechanisms.1 = 'EXTERNAL'",
                "auth_mechanisms.2 = 'PLAIN'",
                "listeners.ssl.default = 5671",
                "[ssl_options]",
                "certfile = '/etc/server.pem'",
                "verify = 'verify_peer'",
                "fail_if_no_peer_cert = true",
                "versions.2 = 'tlsv1.2'",
                "versions.1 = 'TLSv1.3'",
                "[management.ssl]",
                "port = 15671",
                "certfile = '/etc/mgmt.pem'",
            ]
        )
    )
    s = Settings(**read_config_file(config))
    assert s.auth_mechanisms == ["EXTERNAL", "PLAIN"]
    assert (s.tls_port, s.ssl_certfile, s.ssl_verify, s.ssl_fail_if_no_peer_cert) == (
        5671,
        "/etc/server.pem",
        "verify_peer",
        True,
    )
    assert s.ssl_versions == ["tlsv1.3", "tlsv1.2"]
    assert (s.management_ssl_port, s.management_ssl_certfile) == (15671, "/etc/mgmt.pem")


def test_a_tls_port_without_a_certificate_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HASHBROKER_SSL_CERTFILE", "HASHBROKER_MANAGEMENT_SSL_CERTFILE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SettingsError, match="tls_port needs ssl_certfile"):
        Settings.load(tls_port=5671)
    with pytest.raises(SettingsError, match="management_ssl_port needs management_ssl_certfile"):
        Settings.load(management_ssl_port=15671)
    monkeypatch.setenv("HASHBROKER_SSL_VERSIONS", "TLSv1.3, tlsv1.2")
    monkeypatch.setenv("HASHBROKER_AUTH_MECHANISMS", "PLAIN,EXTERNAL")
    s = Settings.load()
    assert s.ssl_versions == ["tlsv1.3", "tlsv1.2"] and s.auth_mechanisms == ["PLAIN", "EXTERNAL"]
    monkeypatch.setenv("HASHBROKER_SSL_VERSIONS", "sslv3")
    with pytest.raises(SettingsError, match="HASHBROKER_SSL_VERSIONS"):
        Settings.load()
