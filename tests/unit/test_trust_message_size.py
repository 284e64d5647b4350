"""max_message_size in the assembler, with bytes alone: a content header declaring more than the
limit is refused at once (406 naming basic.publish, RabbitMQ's check_msg_size text), and the body
bytes being assembled are counted."""

from __future__ import annotations

import struct
from typing import Any

from pamqp import commands, frame
from pamqp.body import ContentBody

from broker.protocol.assembler import PUBLISH, CommandAssembler, FrameFailure, ProtocolHeader
from broker.protocol.commands import ChannelOpen
from broker.protocol.framing import MAX_MSG_SIZE, PROTOCOL_HEADER, message_too_large
from tests.sansio_support import m, publish


def running(max_size: int) -> CommandAssembler:
    core = CommandAssembler(max_size)
    core.receive_data(PROTOCOL_HEADER)
    assert list(core.events()) == [(0, ProtocolHeader(PROTOCOL_HEADER))]
    core.opened(4096, 2047)
    core.receive_data(m(1, commands.Channel.Open()))
    assert list(core.events()) == [(1, ChannelOpen("0"))]
    return core


def feed(core: CommandAssembler, data: bytes) -> list[tuple[int, Any]]:
    core.receive_data(data)
    return list(core.events())


def header(channel: int, size: int, immediate: bool = False) -> bytes:
    method = m(channel, commands.Basic.Publish(exchange="", routing_key="q"))
    if immediate:
        method = method[:-2] + bytes((method[-2] | 2,)) + method[-1:]
    payload = struct.pack(">HHQH", 60, 0, size, 0)
    return method + struct.pack(">BHI", 2, channel, len(payload)) + payload + b"\xce"


def body(channel: int, data: bytes) -> bytes:
    return frame.marshal(ContentBody(data), channel)


def test_header_over_the_limit_is_refused_before_any_body() -> None:
    core = running(1000)
    events = feed(core, header(1, 2**40))
    assert len(events) == 1
    failure = events[0][1]
    assert isinstance(failure, FrameFailure)
    assert (failure.error.reply_code, failure.error.hard, failure.channel, failure.culprit) == (
        406,
        False,
        1,
        (60, 40),
    )
    assert failure.error.reply_text == (
        "PRECONDITION_FAILED - message size 1099511627776 is larger than configured max size 1000"
    )
    assert core.assembling_bytes == 0
    # the session closes the channel: its body frames are dropped, nothing is kept
    core.channel_closing(1)
    for _ in range(50):
        assert feed(core, body(1, b"x" * 4000)) == []
    assert core.assembling_bytes == 0


def test_limit_is_inclusive_and_both_paths_agree() -> None:
    for fast in (True, False):
        core = running(100)
        core.fast = fast
        events = feed(core, publish(1, b"a" * 100, routing_key="q"))
        assert [type(e) for _, e in events] == [PUBLISH]
        events = feed(core, publish(1, b"a" * 101, routing_key="q"))
        assert isinstance(events[0][1], FrameFailure)
        assert events[0][1].error.reply_code == 406
        assert "message size 101 is larger than configured max size 100" in events[0][1].error.reply_text


def test_assembling_bytes_counts_partial_bodies() -> None:
    core = running(1_000_000)
    assert feed(core, header(1, 10_000)) == []
    assert core.assembling_bytes == 0
    assert feed(core, body(1, b"y" * 4000)) == []
    assert core.assembling_bytes == 4000
    assert feed(core, body(1, b"y" * 4000)) == []
    assert core.assembling_bytes == 8000
    events = feed(core, body(1, b"y" * 2000))
    assert [type(e) for _, e in events] == [PUBLISH]
    assert events[0][1][5] == b"y" * 10_000
    assert core.assembling_bytes == 0


def test_immediate_oversized_is_the_540_rabbitmq_gives_first() -> None:
    core = running(10)
    failure = feed(core, header(1, 11, immediate=True))[0][1]
    assert isinstance(failure, FrameFailure)
    assert (failure.error.reply_code, failure.error.hard, failure.culprit) == (540, True, (60, 40))


def test_text_at_rabbitmq_hard_cap_drops_configured() -> None:
    assert message_too_large(MAX_MSG_SIZE + 1, MAX_MSG_SIZE).reply_text == (
        f"PRECONDITION_FAILED - message size {MAX_MSG_SIZE + 1} is larger than max size {MAX_MSG_SIZE}"
    )
