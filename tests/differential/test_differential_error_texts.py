"""Differential scenarios for the error texts that print Erlang terms: frame errors, undecodable
method fields, content headers without room for property flags.

RabbitMQ formats these with io_lib:format (`~p` for a frame's payload snippet and reason, `~w` for
method fields), so non-ASCII, non-printable and long payloads show whether the printing rules and
the line wrapping are Erlang's. The observation is the close frame exactly as sent: its channel,
reply code, the reply text's bytes (as Latin-1 text) and the method it names.
"""

from __future__ import annotations

import struct
import time
from typing import Any

import pytest

from tests.differential_support import Ctx, RawAmqp, Registry, run_differential

registry = Registry()
scenario = registry.scenario

_CLOSES = {(10, 50), (20, 40)}


def _frame(ftype: int, channel: int, payload: bytes, end: bytes = b"\xce") -> bytes:
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + end


def _close(raw: RawAmqp, data: bytes) -> dict[str, Any]:
    """Send `data` on an open channel 1 and return the first close frame the server sends, or
    whether it closed the socket without one (a crash) or said nothing."""
    raw.open_channel(1)
    raw.send_bytes(data)
    buf = raw.buf
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        while len(buf) >= 7:
            ftype, channel, size = struct.unpack_from(">BHI", buf)
            if len(buf) < size + 8:
                break
            payload, buf = buf[7 : 7 + size], buf[size + 8 :]
            if ftype == 1 and struct.unpack_from(">HH", payload) in _CLOSES:
                code, length = struct.unpack_from(">HB", payload, 4)
                text = payload[7 : 7 + length]
                return {
                    "channel": channel,
                    "method": list(struct.unpack_from(">HH", payload)),
                    "reply_code": code,
                    "reply_text": text.decode("latin-1"),
                    "culprit": list(struct.unpack_from(">HH", payload, 7 + length)),
                }
        raw.sock.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            chunk = raw.sock.recv(65536)
        except TimeoutError:
            return {"close": None, "socket_closed": False}
        except ConnectionError:  # RabbitMQ's crashing reader resets the socket
            chunk = b""
        if not chunk:
            return {"close": None, "socket_closed": True}
        buf += chunk
    return {"close": None, "socket_closed": False}


def _each(ctx: Ctx, cases: dict[str, bytes]) -> dict[str, Any]:
    out = {}
    for name, data in cases.items():
        raw = ctx.raw()
        try:
            out[name] = _close(raw, data)
        finally:
            raw.close()
    return out


PAYLOADS = {
    "latin1": b"l\xe9zy",
    "newline": b"la\nzy",
    "utf8": b"caf\xc3\xa9",
    "control": b"\x01ab",
    "quote_backslash": b'a"b\\c',
    "delete": b"\x7f",
    "nbsp_y_umlaut": b"\xa0\xff",
    "first_16": b"0123456789abcdef\n\xe9",
    "wraps_snippet": b"\x80" * 20,
    "wraps_reason": b"\x80" * 12,
}


@scenario
def scenario_bad_frame_end_marker(ctx: Ctx) -> Any:
    """A frame whose end octet is not 0xCE: 501 with `~p` of the payload and the marker."""
    return _each(ctx, {name: _frame(1, 1, payload, end=b"\x00") for name, payload in PAYLOADS.items()})


@scenario
def scenario_unknown_frame_type(ctx: Ctx) -> Any:
    """Frame type 4: 501 unknown_frame with `~p` of the payload."""
    cases = {name: _frame(4, 1, PAYLOADS[name]) for name in ("latin1", "newline", "control", "wraps_snippet")}
    return _each(ctx, cases)


@scenario
def scenario_cannot_decode(ctx: Ctx) -> Any:
    """Method fields that do not parse: 501 "cannot decode" with `~w` (byte values, never text)."""
    declare = struct.pack(">HH", 50, 10)
    cases = {
        "printable": _frame(1, 1, declare + b"AAAA"),
        "latin1": _frame(1, 1, declare + b"\x00\x00\x05l\xe9z\n"),
        "long": _frame(1, 1, declare + b"\x80" * 40),
        "publish": _frame(1, 1, struct.pack(">HHH", 60, 40, 0) + b"\x05ab"),
    }
    return _each(ctx, cases)


@scenario
def scenario_content_header_without_property_flags(ctx: Ctx) -> Any:
    """A 12- or 13-octet content header: the message completes, then RabbitMQ's channel crashes
    decoding the properties (541, no method named)."""
    publish = _frame(1, 1, struct.pack(">HHH", 60, 40, 0) + b"\x00\x0dprobe-missing\x00")
    cases = {}
    for flags in (b"", b"\x80"):
        for body in (b"", b"abc"):
            content = _frame(2, 1, struct.pack(">HHQ", 60, 0, len(body)) + flags)
            content += _frame(3, 1, body) if body else b""
            cases[f"flags{len(flags)}_body{len(body)}"] = publish + content
    return _each(ctx, cases)


def _shortstr(value: bytes) -> bytes:
    return bytes((len(value),)) + value


def _declare(name: bytes, table: bytes = b"", tail: bytes = b"") -> bytes:
    """A passive queue.declare (a name that passes every check ends in 404, creating nothing)."""
    fields = b"\x00\x00" + _shortstr(name) + b"\x01" + struct.pack(">I", len(table)) + table + tail
    return _frame(1, 1, struct.pack(">HH", 50, 10) + fields)


@scenario
def scenario_shortstr_not_utf8(ctx: Ctx) -> Any:
    """Every method's shortstrs but basic.publish's must be UTF-8 as Erlang's xmerl takes it:
    501 "Malformed UTF-8 in shortstr", naming no method on a channel, the method on channel 0."""
    consume = struct.pack(">HHH", 60, 20, 0) + _shortstr(b"probe-none") + _shortstr(b"t\xe9") + b"\x00"
    close = struct.pack(">HHH", 10, 50, 200) + _shortstr(b"bye\xe9") + struct.pack(">HH", 0, 0)
    publish = struct.pack(">HHH", 60, 40, 0) + _shortstr(b"probe-none") + _shortstr(b"k\xe9") + b"\x00"
    cases = {
        "latin1": _declare(b"x\xe9"),
        "overlong": _declare(b"\xc0\x80"),
        "truncated": _declare(b"\xe2\x82"),
        "five_octets": _declare(b"\xf8\x88\x80\x80\x80"),
        "surrogate_taken": _declare(b"\xed\xa0\x80"),
        "above_10ffff_taken": _declare(b"\xf4\x90\x80\x80"),
        "consumer_tag": _frame(1, 1, consume + struct.pack(">I", 0)),
        "channel_0": _frame(1, 0, close),
        "publish_routing_key_taken": _frame(1, 1, publish) + _frame(2, 1, struct.pack(">HHQH", 60, 0, 0, 0)),
        "before_a_bad_table": _declare(b"x\xe9", b"\x01kZ\x00"),
    }
    return _each(ctx, cases)


@scenario
def scenario_table_that_does_not_parse(ctx: Ctx) -> Any:
    """Method-field tables RabbitMQ cannot parse crash its reader: no close frame, the socket closes."""
    tables = {
        "unknown_type": b"\x01kZ\x00",
        "string_past_end": b"\x01kS\x00\x00\x00\x09ab",
        "nan": b"\x01kd" + struct.pack(">d", float("nan")),
        "nested": b"\x01kF\x00\x00\x00\x04\x01jZ\x00",
    }
    return _each(ctx, {name: _declare(b"probe-tables", table) for name, table in tables.items()})


@scenario
def scenario_fields_must_fill_the_payload(ctx: Ctx) -> Any:
    """Octets after a method's last field: 501 "cannot decode" (`~w` of the fields)."""
    cases = {
        "queue_declare": _declare(b"probe-trailing", tail=b"zz"),
        "tx_select": _frame(1, 1, struct.pack(">HH", 90, 10) + b"\x01"),
        "basic_ack": _frame(1, 1, struct.pack(">HHQB", 60, 80, 1, 0) + b"\x00"),
        "basic_publish": _frame(1, 1, struct.pack(">HHH", 60, 40, 0) + b"\x00\x07nowhere\x00z"),
    }
    return _each(ctx, cases)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("name", "target"), registry.params())
def test_differential(name: str, target: str, request: pytest.FixtureRequest) -> None:
    run_differential(registry, name, target, request)
