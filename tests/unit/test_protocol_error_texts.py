"""The texts of the protocol layer's own errors, byte for byte as RabbitMQ 3.10.8 sent them.

Every expected reply text below was observed on RabbitMQ 3.10.8 with the same bytes on the wire
(tests/differential/test_differential_error_texts.py replays them against both brokers). They print
Erlang terms: the payload snippet of a frame error with `~p` (printable Latin-1 bytes, UTF-8 included,
as a quoted string of those very bytes, anything else as byte values, wrapped at 80 columns), the
fields of an undecodable method with `~w` (always byte values).
"""

from __future__ import annotations

import struct

import pytest

from broker.protocol.assembler import CommandAssembler, Crash, FrameFailure
from broker.protocol.framing import PROTOCOL_HEADER


def _frame(ftype: int, channel: int, payload: bytes, end: bytes = b"\xce") -> bytes:
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + end


def _running() -> CommandAssembler:
    core = CommandAssembler()
    core.receive_data(PROTOCOL_HEADER)
    list(core.events())
    core.opened(131072, 2047)
    core.receive_data(_frame(1, 1, b"\x00\x14\x00\x0a\x00"))  # channel.open
    list(core.events())
    return core


def _failure(*frames: bytes) -> FrameFailure:
    core = _running()
    for data in frames:
        core.receive_data(data)
        for _channel, event in core.events():
            if isinstance(event, FrameFailure):
                return event
    raise AssertionError("no frame failure")


def _text(failure: FrameFailure) -> bytes:
    return failure.error.reply_text.encode("utf-8", "surrogateescape")


END_MARKER_CASES = [
    (b"l\xe9zy", b'FRAME_ERROR - type 1, all octets = <<"l\xe9zy">>: {invalid_frame_end_marker,0}'),
    (b"la\nzy", b'FRAME_ERROR - type 1, all octets = <<"la\\nzy">>: {invalid_frame_end_marker,0}'),
    (b"caf\xc3\xa9", b'FRAME_ERROR - type 1, all octets = <<"caf\xc3\xa9">>: {invalid_frame_end_marker,0}'),
    (b"\x01ab", b"FRAME_ERROR - type 1, all octets = <<1,97,98>>: {invalid_frame_end_marker,0}"),
    (b'a"b\\c', b'FRAME_ERROR - type 1, all octets = <<"a\\"b\\\\c">>: {invalid_frame_end_marker,0}'),
    (b"\x7f", b"FRAME_ERROR - type 1, all octets = <<127>>: {invalid_frame_end_marker,0}"),
    (b"\xa0\xff", b'FRAME_ERROR - type 1, all octets = <<"\xa0\xff">>: {invalid_frame_end_marker,0}'),
    (
        b"0123456789abcdef\n\xe9",
        b'FRAME_ERROR - type 1, first 16 octets = <<"0123456789abcdef">>: {invalid_frame_end_marker,0}',
    ),
    (
        b"\x80" * 20,
        b"FRAME_ERROR - type 1, first 16 octets = <<128,128,128,128,128,128,128,128,128,128,128,128,\n"
        + b" " * 28
        + b"128,128,128,128>>: {invalid_frame_end_marker,0}",
    ),
    (
        b"\x80" * 12,
        b"FRAME_ERROR - type 1, all octets = <<128,128,128,128,128,128,128,128,128,128,128,128>>: "
        b"{invalid_frame_end_marker,\n" + b" " * 75 + b"0}",
    ),
]


@pytest.mark.parametrize(("payload", "expected"), END_MARKER_CASES)
def test_bad_frame_end_prints_the_payload_with_p(payload: bytes, expected: bytes) -> None:
    failure = _failure(_frame(1, 1, payload, end=b"\x00"))
    assert (failure.error.reply_code, failure.fatal) == (501, True)
    assert _text(failure) == expected


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b"abc", b'FRAME_ERROR - type 4, all octets = <<"abc">>: unknown_frame'),
        (b"l\xe9zy\n", b'FRAME_ERROR - type 4, all octets = <<"l\xe9zy\\n">>: unknown_frame'),
        (
            b"\x80" * 20,
            b"FRAME_ERROR - type 4, first 16 octets = <<128,128,128,128,128,128,128,128,128,128,128,128,\n"
            + b" " * 28
            + b"128,128,128,128>>: unknown_frame",
        ),
    ],
)
def test_unknown_frame_type(payload: bytes, expected: bytes) -> None:
    assert _text(_failure(_frame(4, 1, payload))) == expected


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (b"AAAA", b"FRAME_ERROR - cannot decode <<65,65,65,65>>"),
        (b"\x00\x00\x05l\xe9z\n", b"FRAME_ERROR - cannot decode <<0,0,5,108,233,122,10>>"),
        (
            b"\x80" * 40,
            b"FRAME_ERROR - cannot decode <<" + b",".join([b"128"] * 40) + b">>",
        ),
    ],
)
def test_undecodable_method_fields_print_with_w(fields: bytes, expected: bytes) -> None:
    failure = _failure(_frame(1, 1, struct.pack(">HH", 50, 10) + fields))  # queue.declare
    assert (failure.error.reply_code, failure.culprit) == (501, (50, 10))
    assert _text(failure) == expected


def test_undecodable_publish_fields_print_with_w() -> None:
    failure = _failure(_frame(1, 1, struct.pack(">HHH", 60, 40, 0) + b"\x05ab"))
    assert _text(failure) == b"FRAME_ERROR - cannot decode <<0,0,5,97,98>>"


_PUBLISH = _frame(1, 1, struct.pack(">HHH", 60, 40, 0) + b"\x00\x01q\x00")


@pytest.mark.parametrize("flags", [b"", b"\x80"])
@pytest.mark.parametrize("body", [b"", b"abc"])
def test_content_header_without_property_flags_crashes_once_complete(flags: bytes, body: bytes) -> None:
    """RabbitMQ takes a 12- or 13-octet content header, then its channel crashes decoding the
    properties when the message is complete: connection.close 541 naming no method."""
    core = _running()
    core.receive_data(_PUBLISH + _frame(2, 1, struct.pack(">HHQ", 60, 0, len(body)) + flags))
    events = list(core.events())
    if body:
        assert events == []  # still waiting for the body, as RabbitMQ does
        core.receive_data(_frame(3, 1, body))
        events = list(core.events())
    [(channel, failure)] = events
    assert channel == 0 and isinstance(failure, FrameFailure)
    assert (failure.error.reply_text, failure.error.hard, failure.culprit) == ("INTERNAL_ERROR", True, (0, 0))


def test_short_content_header_with_immediate_is_refused_for_immediate() -> None:
    core = _running()
    immediate = _frame(1, 1, struct.pack(">HHH", 60, 40, 0) + b"\x00\x01q\x02")
    core.receive_data(immediate + _frame(2, 1, struct.pack(">HHQ", 60, 0, 0)))
    [(channel, publish)] = list(core.events())
    assert channel == 1 and publish[3] is True  # the session refuses immediate=true (540) first


def _shortstr(value: bytes) -> bytes:
    return bytes((len(value),)) + value


def _declare(name: bytes, table: bytes = b"", tail: bytes = b"") -> bytes:
    fields = b"\x00\x00" + _shortstr(name) + b"\x00" + struct.pack(">I", len(table)) + table + tail
    return _frame(1, 1, struct.pack(">HH", 50, 10) + fields)


MALFORMED = b"FRAME_ERROR - Malformed UTF-8 in shortstr"


@pytest.mark.parametrize(
    "name", [b"x\xe9", b"\xc0\x80", b"\xe2\x82", b"\xf8\x88\x80\x80\x80", b"\xe0\x9f\xbf"]
)
def test_shortstr_that_is_not_utf8_names_no_method(name: bytes) -> None:
    failure = _failure(_declare(name))
    assert (_text(failure), failure.error.hard, failure.culprit) == (MALFORMED, True, (0, 0))


@pytest.mark.parametrize(
    "name", [b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf7\xbf\xbf\xbf", b"a\x00b", "é".encode()]
)
def test_shortstr_erlang_takes_for_utf8_is_decoded(name: bytes) -> None:
    core = _running()
    core.receive_data(_declare(name))
    [(channel, declare)] = list(core.events())
    assert channel == 1 and declare.queue.encode("utf-8", "surrogateescape") == name


def test_malformed_shortstr_on_channel_0_names_the_method() -> None:
    close = struct.pack(">HHH", 10, 50, 200) + _shortstr(b"bye\xe9") + struct.pack(">HH", 0, 0)
    failure = _failure(_frame(1, 0, close))
    assert (_text(failure), failure.culprit) == (MALFORMED, (10, 50))


def test_lengths_are_checked_before_utf8_and_utf8_before_tables() -> None:
    truncated = _frame(
        1, 1, struct.pack(">HHH", 50, 10, 0) + _shortstr(b"x\xe9") + b"\x00" + struct.pack(">I", 10)
    )
    assert _text(_failure(truncated)) == b"FRAME_ERROR - cannot decode <<0,0,2,120,233,0,0,0,0,10>>"
    assert _text(_failure(_declare(b"x\xe9", b"\x01kZ\x00"))) == MALFORMED


@pytest.mark.parametrize(
    "table",
    [b"\x01kZ\x00", b"\x01kS\x00\x00\x00\x09ab", b"\x01kd" + struct.pack(">d", float("nan")), b"\x09k"],
)
def test_table_that_does_not_parse_crashes_the_reader(table: bytes) -> None:
    core = _running()
    core.receive_data(_declare(b"q", table))
    [(channel, crash)] = list(core.events())
    assert channel == 0 and isinstance(crash, Crash)


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (_declare(b"q", tail=b"zz"), b"FRAME_ERROR - cannot decode <<0,0,1,113,0,0,0,0,0,122,122>>"),
        (_frame(1, 1, b"\x00\x5a\x00\x0a\x01"), b"FRAME_ERROR - cannot decode <<1>>"),
        (
            _frame(1, 1, b"\x00\x3c\x00\x50" + struct.pack(">QB", 1, 0) + b"\x00"),
            b"FRAME_ERROR - cannot decode <<0,0,0,0,0,0,0,1,0,0>>",
        ),
        (
            _frame(1, 1, struct.pack(">HHH", 60, 40, 0) + b"\x00\x07nowhere\x00z"),
            b"FRAME_ERROR - cannot decode <<0,0,0,7,110,111,119,104,101,114,101,0,122>>",
        ),
    ],
)
def test_fields_must_fill_the_payload(frame: bytes, expected: bytes) -> None:
    failure = _failure(frame)
    assert _text(failure) == expected
    assert failure.culprit == struct.unpack_from(">HH", frame, 7)
