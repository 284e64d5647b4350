"""The handshake's states are an enum whose values are the atoms RabbitMQ prints; a secure-ok, which
only a SASL challenge round would make expected, is refused in every state."""

from __future__ import annotations

import pytest

from amqpwire.errors import AmqpError
from amqpwire.fields import FieldTable
from broker.protocol import handshake as H
from broker.protocol.assembler import ProtocolHeader
from broker.protocol.commands import ConnectionOpen, ConnectionSecureOk, ConnectionStartOk, ConnectionTuneOk
from broker.protocol.framing import PROTOCOL_HEADER


def _machine() -> H.Handshake:
    return H.Handshake({}, channel_max=2047, frame_max=131072, heartbeat=60, timeout=0)


def _in_state(state: H.HandshakeState) -> H.Handshake:
    hs = _machine()
    steps = [
        lambda: hs.protocol_header(ProtocolHeader(PROTOCOL_HEADER)),
        lambda: (
            hs.receive(ConnectionStartOk(FieldTable(), "PLAIN", b"\0guest\0guest", "en_US"))
            + hs.authenticated(None)
        ),
        lambda: hs.receive(ConnectionTuneOk(2047, 131072, 0)),
        lambda: hs.receive(ConnectionOpen("/", "", False)) + hs.opened(),
    ]
    for step in steps:
        if hs.state is state:
            break
        step()
    assert hs.state is state
    return hs


def test_states_are_rabbit_reader_atoms() -> None:
    assert [s.value for s in H.HandshakeState] == [
        "awaiting_header",
        "starting",
        "tuning",
        "opening",
        "running",
    ]
    assert "securing" not in set(H.HandshakeState)
    assert _machine().state == "awaiting_header"


@pytest.mark.parametrize(
    "state", [H.HandshakeState.STARTING, H.HandshakeState.TUNING, H.HandshakeState.OPENING]
)
def test_secure_ok_is_unexpected_in_every_state(state: H.HandshakeState) -> None:
    hs = _in_state(state)
    with pytest.raises(AmqpError) as err:
        hs.receive(ConnectionSecureOk(b"x"))
    assert err.value.reply_text == f"CHANNEL_ERROR - unexpected method in connection state {state.value}"
    assert hs.state is state
