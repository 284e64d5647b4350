"""The frame reader and command assembler driven with bytes alone (no socket, no broker)."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from pamqp import commands

from broker.protocol import commands as C
from broker.protocol.assembler import PUBLISH, CommandAssembler, Crash, FrameFailure, ProtocolHeader
from broker.protocol.framing import PROTOCOL_HEADER
from tests.sansio_support import m, publish, random_pieces

HEARTBEAT = b"\x08\x00\x00\x00\x00\x00\x00\xce"


def running(*channels: int, channel_max: int = 2047) -> CommandAssembler:
    """An assembler past the handshake with `channels` open."""
    core = CommandAssembler()
    core.receive_data(PROTOCOL_HEADER)
    assert list(core.events()) == [(0, ProtocolHeader(PROTOCOL_HEADER))]
    core.opened(4096, channel_max)
    for ch in channels:
        core.receive_data(m(ch, commands.Channel.Open()))
        assert list(core.events()) == [(ch, C.ChannelOpen("0"))]
    return core


def feed(core: CommandAssembler, *pieces: bytes) -> list[tuple[int, Any]]:
    out: list[tuple[int, Any]] = []
    for piece in pieces:
        core.receive_data(piece)
        out.extend(core.events())
    return out


def stream() -> bytes:
    props = commands.Basic.Properties(content_type="text/plain", headers={"a": 1, "b": "two"}, priority=3)
    out = m(1, commands.Queue.Declare(queue="q", durable=True, arguments={"x-max-length": 3}))
    out += publish(1, b"small", routing_key="q")
    out += publish(2, b"with props", exchange="ex", routing_key="k", props=props, mandatory=True)
    out += publish(1, b"", routing_key="empty")
    out += publish(1, b"x" * 10000, routing_key="big")  # three body frames
    out += publish(2, b"hb", heartbeat_inside=True)
    out += publish(1, b"imm", immediate=True)
    out += m(2, commands.Basic.Ack(delivery_tag=7, multiple=True))
    return out


def test_typed_commands_and_publishes() -> None:
    events = feed(running(1, 2), stream())
    declare = events[0][1]
    assert isinstance(declare, C.QueueDeclare)
    assert (declare.queue, declare.durable, declare.passive, declare.nowait) == ("q", True, False, False)
    limit = declare.arguments.get("x-max-length")
    assert limit is not None and limit.value == 3
    pubs = [(ch, e) for ch, e in events if type(e) is PUBLISH]
    assert [
        (ch, rk, body[:5], len(body), mandatory, immediate)
        for ch, (_x, rk, mandatory, immediate, _p, body) in pubs
    ] == [
        (1, "q", b"small", 5, False, False),
        (2, "k", b"with ", 10, True, False),
        (1, "empty", b"", 0, False, False),
        (1, "big", b"xxxxx", 10000, False, False),
        (2, "q.plain", b"hb", 2, False, False),
        (1, "q.plain", b"imm", 3, False, True),
    ]
    assert pubs[1][1][0] == "ex" and pubs[1][1][4][:2] == b"\xa8\x00"  # type, headers, priority
    assert events[-1] == (2, C.BasicAck(7, True))


def test_fast_path_yields_the_same_commands_as_frame_by_frame() -> None:
    fast = running(1, 2)
    slow = running(1, 2)
    slow.fast = False
    data = stream()
    assert feed(fast, data) == feed(slow, data)
    assert fast.frames_in == slow.frames_in


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_any_read_boundaries_give_the_same_commands(seed: int) -> None:
    data = stream()
    whole = feed(running(1, 2), data)
    pieces = random_pieces(data, seed, (1, 2, 7, 8, 13, 100, 4096))
    assert feed(running(1, 2), *pieces) == whole


def test_next_event_is_the_pull_interface() -> None:
    core = running(1)
    core.receive_data(m(1, commands.Basic.Qos(prefetch_count=5)) + m(1, commands.Tx.Select()))
    assert core.next_event() == (1, C.BasicQos(0, 5, False))
    assert core.next_event() == (1, C.TxSelect())
    assert core.next_event() is None


def failure(events: list[tuple[int, Any]]) -> FrameFailure:
    assert len(events) == 1 and isinstance(events[0][1], FrameFailure), events
    return events[0][1]


def test_oversized_frame_is_fatal_501() -> None:
    core = running(1)
    f = failure(feed(core, struct.pack(">BHI", 1, 1, 5000) + b"\x00" * 5001))
    assert f.fatal and f.culprit == (0, 0)
    assert f.error.reply_code == 501 and "{frame_too_large,5000,4088}" in f.error.reply_text


def test_bad_frame_end_is_fatal_501() -> None:
    core = running(1)
    f = failure(feed(core, m(1, commands.Tx.Select())[:-1] + b"\x00"))
    assert f.fatal and "{invalid_frame_end_marker,0}" in f.error.reply_text


def test_method_while_content_expected_names_the_publish() -> None:
    core = running(1)
    pub = publish(1, b"body")
    method_only = pub[: pub.index(b"\xce") + 1]
    f = failure(feed(core, method_only + m(1, commands.Tx.Select())))
    assert (f.error.reply_code, f.culprit, f.channel) == (505, (60, 40), 1)
    assert "expected content header for class 60" in f.error.reply_text


def test_content_without_method_is_505_naming_nothing() -> None:
    core = running(1)
    body = b"\x03\x00\x01\x00\x00\x00\x02hi\xce"
    f = failure(feed(core, body))
    assert (f.error.reply_code, f.culprit) == (505, (0, 0))


def test_channel_not_open_and_not_running() -> None:
    core = running()
    f = failure(feed(core, m(3, commands.Basic.Qos(prefetch_count=1))))
    assert (f.error.reply_code, f.culprit) == (504, (60, 10))
    assert f.error.reply_text == "CHANNEL_ERROR - expected 'channel.open'"
    early = CommandAssembler()
    early.receive_data(PROTOCOL_HEADER + m(1, commands.Channel.Open()))
    events = list(early.events())
    f = failure(events[1:])
    assert (f.error.reply_code, f.culprit) == (505, (0, 0))


def test_channel_max_is_enforced() -> None:
    core = running(1, channel_max=1)
    f = failure(feed(core, m(2, commands.Channel.Open())))
    assert (f.error.reply_code, f.culprit) == (530, (20, 10))
    assert "number of channels opened (1) has reached the negotiated channel_max (1)" in f.error.reply_text


def test_unknown_method_crashes_and_server_method_is_503() -> None:
    core = running(1)
    events = feed(core, struct.pack(">BHI", 1, 1, 4) + b"\x00\x63\x00\x01\xce")
    assert events == [(0, Crash("unknown method id {99,1}"))]
    f = failure(
        feed(
            core, m(1, commands.Basic.Deliver(consumer_tag="x", delivery_tag=1, exchange="", routing_key="k"))
        )
    )
    assert (f.error.reply_code, f.culprit) == (503, (60, 60))


def test_closing_channel_drops_all_but_close_ok() -> None:
    core = running(1)
    core.channel_closing(1)
    assert feed(core, m(1, commands.Basic.Qos(prefetch_count=1)), publish(1, b"dropped")) == []
    assert feed(core, m(1, commands.Channel.Close(200, "bye", 0, 0))) == []
    assert core.outbox and core.outbox[0][7:11] == b"\x00\x14\x00\x29"  # close-ok for the crossing close
    assert feed(core, m(1, commands.Channel.Open())) == [(1, C.ChannelOpen("0"))]


def test_client_channel_close_forgets_the_channel() -> None:
    core = running(1)
    assert feed(core, m(1, commands.Channel.Close(200, "bye", 0, 0))) == [
        (1, C.ChannelClose(200, "bye", 0, 0))
    ]
    assert failure(feed(core, m(1, commands.Tx.Select()))).error.reply_code == 504


def test_connection_closing_passes_only_close_and_close_ok() -> None:
    core = running(1)
    core.connection_closing()
    data = (
        m(1, commands.Tx.Select()) + m(0, commands.Connection.Blocked()) + m(0, commands.Connection.CloseOk())
    )
    assert feed(core, data) == [(0, C.ConnectionCloseOk())]


def test_heartbeats_are_swallowed_and_counted() -> None:
    core = running()
    assert feed(core, HEARTBEAT * 3) == []
    assert core.frames_in == 3 + 0  # frames after the handshake set-up are the three heartbeats
    f = failure(feed(core, b"\x08\x00\x01\x00\x00\x00\x00\xce"))
    assert f.error.reply_code == 505


@pytest.mark.parametrize(
    ("data", "accepted"),
    [(b"AMQP\x00\x00\x09\x01", True), (b"AMQP\x01\x01\x00\x09", True), (b"AMQP\x00\x00\x08\x00", False)],
)
def test_protocol_header(data: bytes, accepted: bool) -> None:
    core = CommandAssembler()
    core.receive_data(data[:3])
    assert list(core.events()) == []
    core.receive_data(data[3:])
    ((channel, header),) = list(core.events())
    assert channel == 0 and header.accepted is accepted


def test_a_wrong_first_octet_is_refused_at_once() -> None:
    core = CommandAssembler()
    core.receive_data(b"GET")
    assert list(core.events()) == [(0, ProtocolHeader(b"GET"))]
