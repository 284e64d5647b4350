"""The AMQP 0-9-1 connection handshake as a pure state machine (rabbit_reader's handshake half).

States (`HandshakeState`): awaiting_header -> starting (we sent connection.start) -> tuning
(start-ok authenticated, we sent connection.tune) -> opening (tune-ok negotiated) -> running
(connection.open accepted). RabbitMQ's `securing` state (a SASL challenge round) never occurs:
PLAIN, AMQPLAIN and EXTERNAL answer in start-ok, so a secure-ok is unexpected in every state. Each input
returns a list of actions for the adapter to perform:
`Send` bytes, `Authenticate` the credentials (auth stays in the broker), `OpenVhost`, `Tuned`
(apply the limits, start heartbeats), `ArmTimer` / `CancelTimer` for the handshake timeout, and
`CloseSocket`. The transitions are the `_TRANSITIONS` table; a method without a row is 504
"unexpected method in connection state ...". Errors are raised as `AmqpError`; what the adapter
does with them depends on `state` (RabbitMQ closes silently before tune-ok, see `silent_errors`).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any, ClassVar, NamedTuple

from amqpwire.errors import channel_error, command_invalid, not_allowed, syntax_error
from amqpwire.fields import FieldDecodeError, FieldTable
from broker.protocol.assembler import ProtocolHeader
from broker.protocol.commands import (
    ConnectionOpen,
    ConnectionStartOk,
    ConnectionTuneOk,
)
from broker.protocol.framing import FRAME_MIN_SIZE, PROTOCOL_HEADER
from broker.protocol.methods import close_payload, encode_method, method_frame, simple_payload

HANDSHAKE_TIMEOUT = 10.0  # seconds; RabbitMQ's handshake_timeout default (10000 ms)


class HandshakeState(StrEnum):
    """rabbit_reader's connection_state during the handshake; the value is the atom RabbitMQ
    prints in "unexpected method in connection state ..."."""

    AWAITING_HEADER = "awaiting_header"
    STARTING = "starting"
    TUNING = "tuning"
    OPENING = "opening"
    RUNNING = "running"


SILENT_STATES = frozenset({HandshakeState.STARTING, HandshakeState.TUNING})
"""Where rabbit_reader closes without a word on an error (see `Handshake.silent_errors`)."""


DEFAULT_MECHANISMS = ("PLAIN", "AMQPLAIN")
"""RabbitMQ's auth_mechanisms default, in the order its connection.start lists them."""

EXTERNAL = "EXTERNAL"
"""The SASL mechanism of rabbitmq_auth_mechanism_ssl: the TLS peer certificate names the user."""


class Mechanisms(NamedTuple):
    """The SASL mechanisms of one listener: `offered` in connection.start (rabbit_reader's
    auth_mechanisms: configured, registered and willing on this socket), `known` the registered
    ones (a start-ok naming another is an "unknown", one known but not offered an "invalid"
    authentication mechanism)."""

    offered: tuple[str, ...] = DEFAULT_MECHANISMS
    known: frozenset[str] = frozenset(DEFAULT_MECHANISMS)


PASSWORD_MECHANISMS = Mechanisms()
"""RabbitMQ's default: PLAIN and AMQPLAIN, nothing else registered."""


class PeerLogin(NamedTuple):
    """What the EXTERNAL mechanism makes of a connection's TLS peer certificate: the user it
    names, or RabbitMQ's reason for refusing the login."""

    user: str | None
    refusal: str | None


class Send(NamedTuple):
    data: bytes


class Authenticate(NamedTuple):
    """Check these credentials, then call `Handshake.authenticated`."""

    mechanism: str
    username: str
    password: str


class OpenVhost(NamedTuple):
    """Resolve the vhost and the user's access (raise AmqpError 530), then call `Handshake.opened`."""

    name: str


class Tuned(NamedTuple):
    """Apply the negotiated limits; a non-zero heartbeat starts the heartbeat policy."""

    frame_max: int
    channel_max: int
    heartbeat: int


class ArmTimer(NamedTuple):
    """Call `Handshake.timed_out` after this many seconds (unless cancelled)."""

    seconds: float


class CancelTimer(NamedTuple):
    pass


class CloseSocket(NamedTuple):
    """Close the connection's socket; `reset` aborts it (RST) as RabbitMQ's exiting reader does."""

    reason: str
    reset: bool = False


Action = Send | Authenticate | OpenVhost | Tuned | ArmTimer | CancelTimer | CloseSocket
Step = Callable[["Handshake", Any], list[Action]]
"""A transition: the handler of one method in one state."""


class Handshake:
    """One connection's handshake (see the module docstring)."""

    def __init__(
        self,
        server_properties: dict[str, Any],
        *,
        channel_max: int,
        frame_max: int,
        heartbeat: int,
        timeout: float = HANDSHAKE_TIMEOUT,
        mechanisms: Mechanisms = PASSWORD_MECHANISMS,
    ) -> None:
        self.server_properties = server_properties
        self.mechanisms = mechanisms
        self.server_limits = (channel_max, frame_max, heartbeat)
        self.timeout = timeout
        self.state = HandshakeState.AWAITING_HEADER
        self.client_properties = FieldTable()
        self.capabilities = FieldTable()
        self.mechanism = ""
        self.username = ""
        self.frame_max = FRAME_MIN_SIZE
        self.channel_max = channel_max
        self.heartbeat = 0
        self.vhost = ""

    @property
    def done(self) -> bool:
        return self.state is HandshakeState.RUNNING

    @property
    def silent_errors(self) -> bool:
        """rabbit_reader closes silently (after a delay) on errors before connection.open: every
        handshake error but a refused login and a refused connection.open. A failed tune
        negotiation is raised with the method already set, so it misses the tuning clause too."""
        return self.state in SILENT_STATES

    def capability(self, name: str) -> bool:
        value = self.capabilities.get(name)
        return value is not None and value.type == "bool" and bool(value.value)

    # -- inputs -----------------------------------------------------------------------------------

    def begin(self) -> list[Action]:
        """The socket is connected: the handshake must complete within `timeout`."""
        return [ArmTimer(self.timeout)] if self.timeout else []

    def protocol_header(self, header: ProtocolHeader) -> list[Action]:
        """Our connection.start for an accepted header; ours in reply to any other, then close
        (rabbit_reader:refuse_connection)."""
        if not header.accepted:
            return [Send(PROTOCOL_HEADER), CloseSocket("bad protocol header")]
        from pamqp import commands

        start = commands.Connection.Start(
            version_major=0,
            version_minor=9,
            server_properties=self.server_properties,
            mechanisms=" ".join(self.mechanisms.offered),
            locales="en_US",
        )
        self.state = HandshakeState.STARTING
        return [Send(encode_method(0, start))]

    def receive(self, command: Any) -> list[Action]:
        """A channel-0 method during the handshake."""
        step = self._TRANSITIONS.get((self.state, type(command)))
        if step is None:
            raise channel_error(f"unexpected method in connection state {self.state}")
        return step(self, command)

    def authenticated(self, refusal: str | None) -> list[Action]:
        """The broker's answer to `Authenticate`: None, or why the login is refused."""
        if refusal is not None:
            out: list[Action] = []
            if self.capability("authentication_failure_close"):
                text = (
                    f"ACCESS_REFUSED - Login was refused using authentication mechanism {self.mechanism}. "
                    "For details see the broker logfile."
                )
                out.append(Send(method_frame(0, close_payload(10, 403, text, 0, 0))))
            out.append(CloseSocket("authentication failure"))
            return out
        from pamqp import commands

        channel_max, frame_max, heartbeat = self.server_limits
        self.state = HandshakeState.TUNING
        tune = commands.Connection.Tune(channel_max=channel_max, frame_max=frame_max, heartbeat=heartbeat)
        return [Send(encode_method(0, tune))]

    def opened(self) -> list[Action]:
        """The broker granted the vhost: connection.open-ok, the handshake is over."""
        self.state = HandshakeState.RUNNING
        return [Send(method_frame(0, simple_payload(10, 41, b"\x00"))), CancelTimer()]

    def timed_out(self) -> list[Action]:
        """The handshake timer fired. RabbitMQ 3.10.8 (observed with a client that sends only the
        protocol header, or stops after start-ok) says nothing and resets the socket after 10 s."""
        if self.done:
            return []
        return [CloseSocket("handshake timeout", reset=True)]

    # -- transitions ------------------------------------------------------------------------------

    def _start_ok(self, command: ConnectionStartOk) -> list[Action]:
        props = command.client_properties
        self.client_properties = props
        caps = props.get("capabilities")
        if caps is not None and caps.type == "table":
            self.capabilities = caps.value
        self.mechanism = mech = command.mechanism
        response = command.response
        if mech not in self.mechanisms.known:
            raise command_invalid(f"unknown authentication mechanism '{mech}'")
        if mech not in self.mechanisms.offered:
            raise command_invalid(f"invalid authentication mechanism '{mech}'")
        if mech == EXTERNAL:
            # rabbit_auth_mechanism_ssl ignores the response: the certificate names the user
            return [Authenticate(mech, "", "")]
        if mech == "PLAIN":
            # rabbit_auth_mechanism_plain takes "\0user\0password" only: an authorization
            # identity (even the user's own name) is a syntax error, as is a third NUL
            parts = response.split(b"\x00")
            if len(parts) != 3 or parts[0]:
                raise syntax_error(f"response {response!r} invalid")
            user, password = parts[1], parts[2]
        elif mech == "AMQPLAIN":
            try:
                table = FieldTable.decode(response)
            except FieldDecodeError:
                raise syntax_error("AMQPLAIN response invalid") from None
            lf, pf = table.get("LOGIN"), table.get("PASSWORD")
            if lf is None or pf is None or lf.type != "longstr" or pf.type != "longstr":
                raise syntax_error("AMQPLAIN auth info invalid")
            user, password = lf.value, pf.value
        else:
            raise command_invalid(f"unknown authentication mechanism '{mech}'")
        self.username = user.decode("utf-8", errors="replace")
        return [Authenticate(mech, self.username, password.decode("utf-8", errors="replace"))]

    def _tune_ok(self, command: ConnectionTuneOk) -> list[Action]:
        channel_max, frame_max, _heartbeat = self.server_limits
        _negotiate("frame_max", FRAME_MIN_SIZE, frame_max, command.frame_max)
        _negotiate("channel_max", 1, channel_max, command.channel_max)
        self.frame_max = command.frame_max or frame_max
        self.channel_max = command.channel_max or channel_max
        self.heartbeat = command.heartbeat
        self.state = HandshakeState.OPENING
        return [Tuned(self.frame_max, self.channel_max, self.heartbeat)]

    def _open(self, command: ConnectionOpen) -> list[Action]:
        self.vhost = command.virtual_host
        return [OpenVhost(command.virtual_host)]

    _TRANSITIONS: ClassVar[dict[tuple[HandshakeState, type[Any]], Step]] = {
        (HandshakeState.STARTING, ConnectionStartOk): _start_ok,
        (HandshakeState.TUNING, ConnectionTuneOk): _tune_ok,
        (HandshakeState.OPENING, ConnectionOpen): _open,
    }


def _negotiate(field: str, minimum: int, server: int, client: int) -> None:
    detail = " (no limit)" if client == 0 and field == "channel_max" else ""
    if client != 0 and client < minimum:
        raise not_allowed(
            f"negotiated {field} = {client}{detail} is lower than the minimum allowed value ({minimum})"
        )
    if server != 0 and (client == 0 or client > server):
        raise not_allowed(
            f"negotiated {field} = {client}{detail} is higher than the maximum allowed value ({server})"
        )
