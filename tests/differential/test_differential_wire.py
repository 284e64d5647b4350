"""Differential scenarios on raw frames: handshake/tune, heartbeats, frame order, protocol errors.

Client libraries hide (or refuse to produce) exactly what these scenarios test, so they talk AMQP with
pamqp over a plain socket (``RawAmqp``). The observation is the sequence of frames the server sent,
plus whether it closed the socket after our close-ok.
"""

from __future__ import annotations

import struct
import time
from typing import Any

import pytest
from pamqp import commands, frame, header
from pamqp.body import ContentBody

from tests.differential_support import (
    Ctx,
    RawAmqp,
    RawClosed,
    Registry,
    frame_obs,
    publish_frames,
    run_differential,
)

registry = Registry()
scenario = registry.scenario

FRAME_END = b"\xce"


def _converse(raw: RawAmqp, quiet: float = 0.6, *, observe_close: bool = True) -> dict[str, Any]:
    """Collect the server's frames until it goes quiet; answer closes politely and see if it hangs up.

    ``observe_close=False`` where our own stream is corrupt (the server cannot parse our close-ok, so
    when it hangs up is a timeout detail rather than behaviour).
    """
    frames: list[Any] = []
    eof = False
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        try:
            channel, value = raw.recv(quiet)
        except TimeoutError:
            break
        except RawClosed:
            eof = True
            break
        frames.append(frame_obs(channel, value))
        if isinstance(value, commands.Connection.Close):
            raw.send(0, commands.Connection.CloseOk())
        elif isinstance(value, commands.Channel.Close):
            raw.send(channel, commands.Channel.CloseOk())
    if not observe_close:
        return {"frames": frames}
    return {"frames": frames, "socket_closed": eof}


def _raw_method(channel: int, class_id: int, method_id: int, args: bytes = b"") -> bytes:
    payload = struct.pack(">HH", class_id, method_id) + args
    return struct.pack(">BHI", 1, channel, len(payload)) + payload + FRAME_END


@scenario
def scenario_connection_start_and_tune(ctx: Ctx) -> Any:
    """connection.start (version, mechanisms, locales, capabilities) and the tune proposal."""
    raw = ctx.raw()
    assert raw.start is not None and raw.tune is not None
    props = raw.start.server_properties
    caps = props.get("capabilities", {})
    return {
        "version": [raw.start.version_major, raw.start.version_minor],
        "mechanisms": raw.start.mechanisms,
        "locales": raw.start.locales,
        "capabilities": {k: caps[k] for k in sorted(caps)},
        "tune": [raw.tune.channel_max, raw.tune.frame_max, raw.tune.heartbeat],
    }


@scenario
def scenario_heartbeat_negotiated(ctx: Ctx) -> Any:
    """With heartbeat=1 the server sends heartbeats and drops a silent client; with 0 it sends none."""
    beating = ctx.raw(heartbeat=1)
    silent = ctx.raw(heartbeat=0)
    received, closed_after = beating.read_until_closed(6)
    beats = received.count(b"\x08\x00\x00\x00\x00\x00\x00\xce")
    silent_frames = _converse(silent, quiet=1.5)
    return {
        "received_heartbeats": beats >= 1,
        "closed_silent_client": closed_after is not None,
        "closed_within_2_to_5s": closed_after is not None and 1.5 <= closed_after <= 5.0,
        "heartbeat0_frames": silent_frames,
    }


@scenario
def scenario_heartbeat_client_keeps_alive(ctx: Ctx) -> Any:
    """A client that sends heartbeats (and nothing else) stays connected past the timeout."""
    raw = ctx.raw(heartbeat=1)
    start = time.monotonic()
    while time.monotonic() - start < 3.5:
        raw.send_bytes(b"\x08\x00\x00\x00\x00\x00\x00\xce")
        time.sleep(0.4)
    raw.open_channel(1)
    ok = raw.call(1, commands.Queue.Declare(queue="", exclusive=True), commands.Queue.DeclareOk)
    return {"alive": ok.queue.startswith("amq.gen-")}


@scenario
def scenario_return_before_ack_frame_order(ctx: Ctx) -> Any:
    """In confirm mode basic.return (312 NO_ROUTE) of a mandatory message precedes its basic.ack."""
    raw = ctx.raw()
    raw.open_channel(1)
    q = ctx.queue()
    raw.call(1, commands.Queue.Declare(queue=q, auto_delete=True), commands.Queue.DeclareOk)
    raw.call(1, commands.Confirm.Select(), commands.Confirm.SelectOk)
    raw.publish(1, "", "nowhere", b"r1", mandatory=True)
    raw.publish(1, "", q, b"ok2", mandatory=True)
    raw.publish(1, "", "nowhere", b"r3", mandatory=True)
    raw.publish(1, "", "nowhere", b"n4", mandatory=False)
    events: list[str] = []
    acked: set[int] = set()
    deadline = time.monotonic() + 5
    while len(acked) < 4 and time.monotonic() < deadline:
        _ch, value = raw.recv()
        if isinstance(value, commands.Basic.Return):
            events.append(f"return {value.reply_code} {value.reply_text} {value.routing_key}")
        elif isinstance(value, ContentBody):
            events.append(f"body {value.value.decode()}")
        elif isinstance(value, header.ContentHeader):
            events.append(f"header {value.body_size}")
        elif isinstance(value, commands.Basic.Ack):
            tags = range(1, value.delivery_tag + 1) if value.multiple else [value.delivery_tag]
            for tag in tags:
                if tag not in acked:
                    acked.add(tag)
                    events.append(f"ack {tag}")
        else:
            events.append(repr(value))
    # acks of routed messages may overtake or trail the others (queue vs channel): compare only what
    # is ordered by the protocol - each return precedes the ack of its own publish
    return {
        "returns": [e for e in events if not e.startswith("ack")],
        "acked": sorted(acked),
        "return_before_ack": {
            body: events.index(f"body {body}") < events.index(f"ack {tag}")
            if f"ack {tag}" in events
            else None
            for body, tag in (("r1", 1), ("r3", 3))
        },
    }


@scenario
def scenario_immediate_not_implemented(ctx: Ctx) -> Any:
    """basic.publish immediate=true is a 540 NOT_IMPLEMENTED connection error."""
    raw = ctx.raw()
    raw.open_channel(1)
    raw.send_bytes(publish_frames("x", b"x", immediate=True))
    return _converse(raw)


@scenario
def scenario_channel_not_open(ctx: Ctx) -> Any:
    """A method on a channel that was never opened is a 504 CHANNEL_ERROR connection error."""
    raw = ctx.raw()
    raw.send(3, commands.Queue.Declare(queue="", exclusive=True))
    return _converse(raw)


@scenario
def scenario_channel_open_twice(ctx: Ctx) -> Any:
    """channel.open on an open channel is a connection error."""
    raw = ctx.raw()
    raw.open_channel(1)
    raw.send(1, commands.Channel.Open())
    return _converse(raw)


@scenario
def scenario_channel_above_channel_max(ctx: Ctx) -> Any:
    """Channel numbers above channel_max: RabbitMQ checks its own maximum, not the client's."""
    raw = ctx.raw(channel_max=10)
    raw.open_channel(10)
    raw.send(11, commands.Channel.Open())
    above_client = _converse(raw)
    raw2 = ctx.raw()
    raw2.send(2048, commands.Channel.Open())
    return {"above_client_max": above_client, "above_server_max": _converse(raw2)}


@scenario
def scenario_channel_close_and_reuse(ctx: Ctx) -> Any:
    """After channel.close/close-ok the number can be opened again; frames sent to a channel the
    server is closing are dropped until our close-ok."""
    raw = ctx.raw()
    raw.open_channel(1)
    raw.call(
        1,
        commands.Channel.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0),
        commands.Channel.CloseOk,
    )
    raw.open_channel(1)
    missing = ctx.queue("missing")
    raw.send(1, commands.Queue.Declare(queue=missing, passive=True))
    close = raw.recv()
    raw.send(1, commands.Queue.Declare(queue="", exclusive=True))  # ignored: close-ok pending
    ignored = raw.frames_until_quiet(0.4)
    raw.send(1, commands.Channel.CloseOk())
    raw.open_channel(1)
    ok = raw.call(1, commands.Queue.Declare(queue="", exclusive=True), commands.Queue.DeclareOk)
    return {
        "close": frame_obs(*close),
        "while_closing": [frame_obs(*f) for f in ignored],
        "reopened": ok.queue[:8],
    }


@scenario
def scenario_content_header_without_publish(ctx: Ctx) -> Any:
    """A content header with no preceding basic.publish is UNEXPECTED_FRAME."""
    raw = ctx.raw()
    raw.open_channel(1)
    raw.send(1, header.ContentHeader(0, 3, commands.Basic.Properties()))
    return _converse(raw)


@scenario
def scenario_method_during_content(ctx: Ctx) -> Any:
    """A method frame where a content body is expected is UNEXPECTED_FRAME."""
    raw = ctx.raw()
    raw.open_channel(1)
    raw.send_bytes(
        publish_frames("x", b"12345", size=10) + frame.marshal(commands.Basic.Qos(prefetch_count=1), 1)
    )
    return _converse(raw)


@scenario
def scenario_body_larger_than_declared(ctx: Ctx) -> Any:
    """More body bytes than the content header declared is a connection error."""
    raw = ctx.raw()
    raw.open_channel(1)
    raw.send_bytes(publish_frames("x", b"123456", size=3))
    first = _converse(raw, observe_close=False)
    try:
        raw.send(1, commands.Queue.Declare(queue="", exclusive=True))
        after = _converse(raw, observe_close=False)
    except OSError:
        after = "send failed"
    return {"first": first, "then_declare": after}


@scenario
def scenario_bad_frame_end(ctx: Ctx) -> Any:
    """A frame whose end octet is not 0xCE is a FRAME_ERROR."""
    raw = ctx.raw()
    raw.open_channel(1)
    good = frame.marshal(commands.Basic.Qos(prefetch_count=1), 1)
    raw.send_bytes(good[:-1] + b"\x00")
    return _converse(raw, observe_close=False)


@scenario
def scenario_frame_too_large(ctx: Ctx) -> Any:
    """A frame larger than the negotiated frame_max is a FRAME_ERROR."""
    raw = ctx.raw(frame_max=4096)
    raw.open_channel(1)
    raw.send_bytes(publish_frames("x", b"z" * 10_000))
    return _converse(raw, observe_close=False)


@scenario
def scenario_unknown_method(ctx: Ctx) -> Any:
    """An unknown class/method id is refused."""
    raw = ctx.raw()
    raw.open_channel(1)
    raw.send_bytes(_raw_method(1, 60, 999))
    return _converse(raw)


@scenario
def scenario_unknown_frame_type(ctx: Ctx) -> Any:
    """An unknown frame type octet is refused."""
    raw = ctx.raw()
    raw.send_bytes(struct.pack(">BHI", 9, 0, 4) + b"abcd" + FRAME_END)
    return _converse(raw)


@scenario
def scenario_heartbeat_on_channel(ctx: Ctx) -> Any:
    """A heartbeat frame on a non-zero channel is refused."""
    raw = ctx.raw()
    raw.open_channel(1)
    raw.send_bytes(b"\x08\x00\x01\x00\x00\x00\x00\xce")
    return _converse(raw)


@scenario
def scenario_truncated_method_args(ctx: Ctx) -> Any:
    """A method frame whose arguments are cut short is a syntax/frame error."""
    raw = ctx.raw()
    raw.open_channel(1)
    raw.send_bytes(_raw_method(1, 50, 10, b"\x00\x00\x05ab"))  # queue.declare, shortstr says 5, has 2
    return _converse(raw)


@scenario
def scenario_bad_protocol_header(ctx: Ctx) -> Any:
    """A wrong protocol header gets the server's own header back, then the socket closes."""
    host_raw = ctx.raw(handshake=False)
    host_raw.send_bytes(b"AMQP\x00\x00\x08\x00")
    data, closed_after = host_raw.read_until_closed(3, poll=0.5)
    return {"reply": data.hex(), "closed": closed_after is not None}


@scenario
def scenario_bad_credentials(ctx: Ctx) -> Any:
    """Wrong password: connection.close 403 ACCESS_REFUSED (authentication_failure_close)."""
    raw = ctx.raw(handshake=False)
    raw.greet()
    raw.send(
        0,
        commands.Connection.StartOk(
            client_properties={"capabilities": {"authentication_failure_close": True}},
            response="\0guest\0wrong",
        ),
    )
    return _converse(raw)


@scenario
def scenario_unknown_mechanism(ctx: Ctx) -> Any:
    """An unsupported SASL mechanism is refused."""
    raw = ctx.raw(handshake=False)
    raw.greet()
    raw.send(0, commands.Connection.StartOk(mechanism="CRAM-MD5", response="x"))
    return _converse(raw, quiet=4.5)  # RabbitMQ resets the socket after ~3 s, sending nothing


@scenario
def scenario_unknown_vhost(ctx: Ctx) -> Any:
    """connection.open to a vhost that does not exist is a 530 NOT_ALLOWED."""
    raw = ctx.raw(handshake=False)
    raw.greet()
    raw.login()
    raw.tune_and_open(vhost="no-such-vhost")
    return _converse(raw)


@scenario
def scenario_frame_max_too_small(ctx: Ctx) -> Any:
    """tune-ok with frame_max below the 4096 minimum is refused."""
    raw = ctx.raw(handshake=False)
    raw.greet()
    raw.login()
    raw.tune_and_open(frame_max=1024)
    return _converse(raw, quiet=4.5)  # RabbitMQ resets the socket after ~3 s, sending nothing


@scenario
def scenario_client_connection_close(ctx: Ctx) -> Any:
    """A client connection.close is answered by close-ok and the socket is closed."""
    raw = ctx.raw()
    raw.open_channel(1)
    raw.send(0, commands.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0))
    # who closes the socket after close-ok is left open by the spec: not compared
    return _converse(raw, observe_close=False)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("name", "target"), registry.params())
def test_differential(name: str, target: str, request: pytest.FixtureRequest) -> None:
    run_differential(registry, name, target, request)
