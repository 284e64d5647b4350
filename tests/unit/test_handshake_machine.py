"""The handshake state machine driven with bytes and a fake clock (no socket, no broker)."""

from __future__ import annotations

from typing import Any

import pytest
from pamqp import commands, frame

from amqpwire.errors import AmqpError
from broker.protocol import handshake as H
from broker.protocol.assembler import CommandAssembler
from broker.protocol.framing import PROTOCOL_HEADER
from broker.session.identity import server_properties


class Driver:
    """Plays the adapter: feeds bytes through the assembler into the machine, performs actions
    with a fake clock, and records what would be written and whether the socket closed."""

    def __init__(self, timeout: float = H.HANDSHAKE_TIMEOUT, password: str = "guest") -> None:
        self.core = CommandAssembler()
        self.hs = H.Handshake(
            server_properties("rabbit@test"),
            channel_max=2047,
            frame_max=131072,
            heartbeat=60,
            timeout=timeout,
        )
        self.now = 0.0
        self.deadline: float | None = None
        self.sent: list[bytes] = []
        self.closed: H.CloseSocket | None = None
        self.tuned: H.Tuned | None = None
        self.password = password
        self.run(self.hs.begin())

    def run(self, actions: list[H.Action]) -> None:
        for action in actions:
            if isinstance(action, H.Send):
                self.sent.append(action.data)
            elif isinstance(action, H.ArmTimer):
                self.deadline = self.now + action.seconds
            elif isinstance(action, H.CancelTimer):
                self.deadline = None
            elif isinstance(action, H.CloseSocket):
                self.closed = action
            elif isinstance(action, H.Authenticate):
                ok = (action.username, action.password) == ("guest", self.password)
                self.run(self.hs.authenticated(None if ok else "invalid credentials"))
            elif isinstance(action, H.Tuned):
                self.tuned = action
                self.core.tuned(action.frame_max, action.channel_max)
            elif isinstance(action, H.OpenVhost):
                if action.name != "/":
                    raise AmqpError(530, f"vhost {action.name} not found")
                self.run(self.hs.opened())
                self.core.opened(self.hs.frame_max, self.hs.channel_max)

    def feed(self, data: bytes) -> None:
        self.core.receive_data(data)
        for _channel, event in self.core.events():
            if isinstance(event, H.ProtocolHeader):
                self.run(self.hs.protocol_header(event))
            else:
                self.run(self.hs.receive(event))

    def advance(self, seconds: float) -> None:
        self.now += seconds
        if self.deadline is not None and self.now >= self.deadline:
            self.deadline = None
            self.run(self.hs.timed_out())

    def sent_methods(self) -> list[Any]:
        out = []
        for data in self.sent:
            _used, _channel, value = frame.unmarshal(data)
            out.append(value)
        return out


def m(method: Any) -> bytes:
    return frame.marshal(method, 0)


START_OK = m(commands.Connection.StartOk(response="\0guest\0guest"))
TUNE_OK = m(commands.Connection.TuneOk(channel_max=100, frame_max=8192, heartbeat=2))
OPEN = m(commands.Connection.Open(virtual_host="/"))


def test_full_handshake_in_one_read() -> None:
    d = Driver()
    d.feed(PROTOCOL_HEADER + START_OK + TUNE_OK + OPEN)
    kinds = [type(v).__name__ for v in d.sent_methods()]
    assert kinds == ["Start", "Tune", "OpenOk"]
    assert d.hs.state == "running" and d.hs.done
    assert d.tuned == H.Tuned(8192, 100, 2)
    assert d.deadline is None and d.closed is None
    assert d.core.frame_max == 8192 and d.core.running


def test_states_in_order_byte_by_byte() -> None:
    d = Driver()
    states = []
    for b in PROTOCOL_HEADER + START_OK + TUNE_OK + OPEN:
        d.feed(bytes((b,)))
        if not states or states[-1] != d.hs.state:
            states.append(d.hs.state)
    assert states == ["awaiting_header", "starting", "tuning", "opening", "running"]


def test_timeout_without_start_ok_resets_the_socket_silently() -> None:
    d = Driver()
    d.feed(PROTOCOL_HEADER)
    d.advance(9.9)
    assert d.closed is None
    d.advance(0.2)
    assert d.closed == H.CloseSocket("handshake timeout", reset=True)
    assert len(d.sent) == 1  # connection.start only: RabbitMQ sends nothing on the timeout


def test_timeout_is_configurable_and_stops_at_open() -> None:
    d = Driver(timeout=2.0)
    d.feed(PROTOCOL_HEADER + START_OK)
    d.advance(1.0)
    d.feed(TUNE_OK + OPEN)
    d.advance(5.0)
    assert d.closed is None and d.hs.done
    assert (
        H.Handshake(server_properties("x"), channel_max=1, frame_max=4096, heartbeat=0, timeout=0).begin()
        == []
    )


def test_bad_header_answers_ours_and_closes() -> None:
    d = Driver()
    d.feed(b"AMQP\x00\x00\x08\x00")
    assert d.sent == [PROTOCOL_HEADER]
    assert d.closed is not None and d.closed.reason == "bad protocol header"


def test_wrong_password_closes_with_403_when_the_client_asks_for_it() -> None:
    caps = {"capabilities": {"authentication_failure_close": True}}
    start_ok = m(commands.Connection.StartOk(client_properties=caps, response="\0guest\0nope"))
    d = Driver()
    d.feed(PROTOCOL_HEADER + start_ok)
    close = d.sent_methods()[-1]
    assert isinstance(close, commands.Connection.Close) and close.reply_code == 403
    assert "Login was refused using authentication mechanism PLAIN" in close.reply_text
    assert d.closed is not None
    plain = Driver()
    plain.feed(PROTOCOL_HEADER + m(commands.Connection.StartOk(response="\0guest\0nope")))
    assert len(plain.sent) == 1 and plain.closed is not None  # no close frame without the capability


def test_amqplain_and_bad_responses() -> None:
    from amqpwire.fields import FieldTable

    table = FieldTable.from_python({"LOGIN": "guest", "PASSWORD": "guest"}).encode()
    d = Driver()
    d.feed(
        PROTOCOL_HEADER + m(commands.Connection.StartOk(mechanism="AMQPLAIN", response=table.decode("ascii")))
    )
    assert d.hs.state == "tuning" and d.hs.mechanism == "AMQPLAIN"
    d = Driver()
    with pytest.raises(AmqpError) as err:
        d.feed(PROTOCOL_HEADER + m(commands.Connection.StartOk(response="guest")))
    assert err.value.reply_code == 502 and d.hs.silent_errors
    d = Driver()
    with pytest.raises(AmqpError) as err:
        d.feed(PROTOCOL_HEADER + m(commands.Connection.StartOk(mechanism="EXTERNAL", response="x")))
    assert err.value.reply_text == "COMMAND_INVALID - unknown authentication mechanism 'EXTERNAL'"


@pytest.mark.parametrize(
    ("frame_max", "channel_max", "text"),
    [
        (1000, 10, "negotiated frame_max = 1000 is lower than the minimum allowed value (4096)"),
        (0, 10, "negotiated frame_max = 0 is higher than the maximum allowed value (131072)"),
        (8192, 0, "negotiated channel_max = 0 (no limit) is higher than the maximum allowed value (2047)"),
    ],
)
def test_tune_ok_negotiation(frame_max: int, channel_max: int, text: str) -> None:
    d = Driver()
    d.feed(PROTOCOL_HEADER + START_OK)
    tune_ok = m(commands.Connection.TuneOk(channel_max=channel_max, frame_max=frame_max, heartbeat=0))
    with pytest.raises(AmqpError) as err:
        d.feed(tune_ok)
    assert err.value.reply_code == 530 and err.value.reply_text == f"NOT_ALLOWED - {text}"
    assert d.hs.silent_errors  # still tuning: RabbitMQ closes without a word


def test_unexpected_method_and_refused_vhost() -> None:
    d = Driver()
    d.feed(PROTOCOL_HEADER)
    with pytest.raises(AmqpError) as err:
        d.feed(OPEN)
    assert err.value.reply_text == "CHANNEL_ERROR - unexpected method in connection state starting"
    d = Driver()
    d.feed(PROTOCOL_HEADER + START_OK + TUNE_OK)
    with pytest.raises(AmqpError) as err:
        d.feed(m(commands.Connection.Open(virtual_host="nope")))
    assert err.value.reply_code == 530 and not d.hs.silent_errors  # opening: a close frame is sent


def test_client_identity_is_kept() -> None:
    props = {
        "connection_name": "worker-7",
        "product": "tests",
        "capabilities": {"consumer_cancel_notify": True},
    }
    d = Driver()
    d.feed(
        PROTOCOL_HEADER + m(commands.Connection.StartOk(client_properties=props, response="\0guest\0guest"))
    )
    assert d.hs.client_properties.to_python()["connection_name"] == "worker-7"
    assert d.hs.capability("consumer_cancel_notify") and not d.hs.capability("authentication_failure_close")
    assert d.hs.username == "guest"
