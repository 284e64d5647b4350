"""The run-time command classes behave as the NamedTuples mypy sees, and the assembler counts frames."""

from __future__ import annotations

import copy
import pickle

import pytest
from pamqp import commands, frame, header
from pamqp.body import ContentBody

from amqpwire.errors import unexpected_frame
from broker.protocol import commands as C
from broker.protocol.assembler import CommandAssembler, FrameFailure


def test_fields_read_by_name_and_compare_as_tuples() -> None:
    ack = C.BasicAck(7, True)
    assert (ack.delivery_tag, ack.multiple) == (7, True)
    assert ack == (7, True)
    assert C.BasicAck._fields == ("delivery_tag", "multiple")
    assert repr(ack) == "BasicAck(delivery_tag=7, multiple=True)"
    assert repr(C.TxSelect()) == "TxSelect()"
    assert not hasattr(ack, "__dict__")
    assert pickle.loads(pickle.dumps(ack)) == ack
    assert type(copy.copy(ack)) is C.BasicAck
    match ack:
        case C.BasicAck(tag, multiple):
            assert (tag, multiple) == (7, True)
        case _:
            pytest.fail("a command matches its class pattern positionally")


def test_wrong_field_count_is_refused() -> None:
    with pytest.raises(TypeError):
        C.BasicAck(1)
    failure = FrameFailure(unexpected_frame("x"), 1, (60, 40), False)
    assert failure.culprit == (60, 40)
    assert failure.fatal is False


def test_decoded_method_is_the_typed_class() -> None:
    payload = frame.marshal(commands.Basic.Ack(delivery_tag=9, multiple=False), 1)[7:-1]
    decoded = C.decode_method(payload)
    assert type(decoded) is C.BasicAck
    assert decoded == (9, False)


def _publish(body: bytes, mandatory: bool = False) -> bytes:
    method = commands.Basic.Publish(exchange="", routing_key="q", mandatory=mandatory)
    out = frame.marshal(method, 1) + frame.marshal(
        header.ContentHeader(0, len(body), commands.Basic.Properties()), 1
    )
    return out + (frame.marshal(ContentBody(body), 1) if body else b"")


def test_frames_counted_on_the_shortcut_and_the_frame_by_frame_path() -> None:
    core = CommandAssembler()
    core.receive_data(b"AMQP\x00\x00\x09\x01")
    list(core.events())
    core.opened(131072, 0)
    core.receive_data(frame.marshal(commands.Channel.Open(), 1))
    list(core.events())
    whole = _publish(b"abc", mandatory=True)
    core.receive_data(whole + _publish(b"") + whole[:30])  # the last one's header is cut
    events = list(core.events())
    assert events == [
        (1, ("", "q", True, False, b"\x00\x00", b"abc")),
        (1, ("", "q", False, False, b"\x00\x00", b"")),
    ]
    assert core.frames_in == 1 + 3 + 2 + 1
    core.receive_data(whole[30:])
    assert list(core.events()) == [(1, ("", "q", True, False, b"\x00\x00", b"abc"))]
    assert core.frames_in == 9
