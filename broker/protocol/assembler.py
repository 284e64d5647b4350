"""Bytes in, typed commands out: the frame reader and command assembler of one connection.

Modelled on h11 and on RabbitMQ's rabbit_reader + rabbit_command_assembler. `receive_data` takes
what the socket read; `events()` (or `next_event()`) yields ``(channel, command)`` pairs: a typed
method tuple from `broker.protocol.commands`, a whole `Publish` (method, content header and body
assembled), or a `ProtocolHeader`, `FrameFailure` or `Crash` for the adapter to act on. Errors are
events rather than exceptions so that the stream keeps being read after a connection error (the
peer's close-ok must still be seen). Nothing here knows sockets, the event loop or the clock.

The channel bookkeeping the framing rules need lives here too: which channels are open (frames on
others are 504 "expected 'channel.open'"), which ones the server is closing (everything but
close/close-ok is dropped), and the connection's closing state.

Shortcut: a basic.publish whose content header and single body frame already follow it in the
same read is taken whole, slicing the property bytes and body straight out of the read; when the
content is not all in this read, or anything is unusual (wrong type or channel, oversized, bad end
marker, several body frames), the publish goes to the frame-by-frame assembly, which then reports
RabbitMQ's errors. The shortcut is `broker.protocol.publish_scan` (compiled with mypyc when
possible): it takes a whole run of such publishes at once and stops at anything else.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from amqpwire.errors import AmqpError, channel_error, internal_error, not_allowed, unexpected_frame
from broker.protocol.commands import (
    ChannelClose,
    ChannelOpen,
    Command,
    ConnectionClose,
    ConnectionCloseOk,
    decode_method,
    method_ids,
)
from broker.protocol.framing import (
    ACCEPTED_HEADERS,
    EMPTY_FRAME_SIZE,
    FRAME_BODY,
    FRAME_END,
    FRAME_HEADER,
    FRAME_HEARTBEAT,
    FRAME_METHOD,
    FRAME_MIN_SIZE,
    MAX_MESSAGE_SIZE,
    PROTOCOL_HEADER,
    FrameReader,
    ReaderCrash,
    cannot_decode,
    frame_refused,
    frame_unexpected,
    immediate_refused,
    message_too_large,
)
from broker.protocol.methods import method_frame, simple_payload
from exchanges.erlang.atom import Atom

_HDR = struct.Struct(">BHI")
_CONTENT_HEAD = struct.Struct(">HHQ")
PUBLISH_IDS = (60, 40)
_PUBLISH_HEAD = b"\x00\x3c\x00\x28"
_CHANNEL_CLOSE = (20, 40)
_CHANNEL_CLOSES = frozenset({_CHANNEL_CLOSE, (20, 41)})
_NO_METHOD = (0, 0)
_UNKNOWN_FRAME = Atom("unknown_frame")
_INVALID_END_MARKER = Atom("invalid_frame_end_marker")
_FRAME_TOO_LARGE = Atom("frame_too_large")


def _load_scan(
    data: bytes, pos: int, channels: set[int], pending: dict[int, Any], limit: int, max_size: int
) -> list[tuple[int, int, Publish]]:
    """`broker.protocol.native.scan`, loaded by the first publish and then called directly: an idle
    broker, and connections that never publish, do not carry the compiled module."""
    global scan
    from broker.protocol.native import scan

    return scan(data, pos, channels, pending, limit, max_size)


scan = _load_scan


Publish = tuple[str, str, bool, bool, bytes, bytes]
"""A whole basic.publish: (exchange, routing key, mandatory, immediate, the content header's
property bytes as received, body). The one command built once per message travels as a plain
tuple: building even a tuple subclass costs as much as the rest of its decoding. Every other
command is a `Command` subclass, so a dispatch table finds it under `PUBLISH` (`tuple`)."""
PUBLISH = tuple
PublishRun = list[Publish]
"""Whole basic.publishes on one channel taken from one read, in order (`events(runs=True)`)."""
PUBLISH_RUN = list


class ProtocolHeader(Command):
    """The first octets of the connection: all 8, or fewer that already differ from ours."""

    data: bytes

    @property
    def accepted(self) -> bool:
        return self.data in ACCEPTED_HEADERS


class FrameFailure(Command):
    """A frame the assembler refused. `culprit` is the (class, method) the close names (as
    rabbit_command_assembler: the frame's own method, the pending basic.publish for content frames,
    0/0 for a crash or a frame no method owns); `fatal`: the stream lost sync, close at once."""

    error: AmqpError
    channel: int
    culprit: tuple[int, int]
    fatal: bool


class Crash(Command):
    """Input that crashes RabbitMQ's reader: the socket closes without a word."""

    reason: str


class _Content:
    """A basic.publish waiting for its content header (size < 0) or for the rest of its body."""

    __slots__ = ("exchange", "got", "immediate", "mandatory", "parts", "props", "routing_key", "size")

    def __init__(self, exchange: str, routing_key: str, bits: int) -> None:
        self.exchange = exchange
        self.routing_key = routing_key
        self.mandatory = bits & 1 == 1
        self.immediate = bits & 2 == 2
        self.props: bytes | None = b""
        self.size = -1
        self.parts: list[bytes] = []
        self.got = 0

    def complete(self, channel: int, body: bytes) -> tuple[int, Any]:
        """The assembled publish on `channel`, or the crash of a content header without room for
        property flags (see `CommandAssembler._content_header`)."""
        props = self.props
        if props is None:
            return _fail(internal_error(), channel)
        return channel, (self.exchange, self.routing_key, self.mandatory, self.immediate, props, body)


class CommandAssembler:
    """One connection's inbound protocol state (see the module docstring)."""

    __slots__ = (
        "_awaiting_header",
        "_chunk",
        "_content",
        "_gen",
        "_header",
        "channel_max",
        "channels",
        "closing",
        "closing_channels",
        "fast",
        "frame_max",
        "frames_in",
        "max_message_size",
        "outbox",
        "reader",
        "running",
    )

    def __init__(self, max_message_size: int = MAX_MESSAGE_SIZE) -> None:
        self.reader = FrameReader(FRAME_MIN_SIZE)
        self.max_message_size = max_message_size
        self.frame_max = FRAME_MIN_SIZE  # RabbitMQ's initial_frame_max until tune-ok; 0: no limit
        self.channel_max = 0
        self.running = False  # connection.open done: channel frames are allowed
        self.closing = False  # the server sent connection.close: only close/close-ok matter now
        self.channels: set[int] = set()
        self.closing_channels: set[int] = set()
        self.fast = True  # the single-read publish shortcut (off only to compare both paths)
        self.outbox: list[bytes] = []  # frames the protocol itself answers (a crossing channel.close)
        self.frames_in = 0
        self._content: dict[int, _Content] = {}
        self._awaiting_header = True
        self._header: ProtocolHeader | None = None
        self._chunk = b""
        self._gen: Iterator[tuple[int, Any]] | None = None

    # -- input ------------------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Take one read; drain `events()` before the next one."""
        reader = self.reader
        if self._awaiting_header:
            reader.feed(data)
            raw = reader.take(8)
            if raw is None:
                seen = reader.peek()
                if seen and not PROTOCOL_HEADER.startswith(seen):
                    self._header = ProtocolHeader(seen)
                    self._awaiting_header = False
                return
            self._header = ProtocolHeader(raw)
            self._awaiting_header = False
            chunk = reader.gather(b"")
        else:
            chunk = reader.gather(data)
        if chunk:
            self._chunk = chunk

    def next_event(self) -> tuple[int, Any] | None:
        """The next command of the data received so far, None when more data is needed."""
        gen = self._gen
        if gen is None:
            gen = self._gen = self.events()
        event = next(gen, None)
        if event is None:
            self._gen = None
        return event

    def events(self, runs: bool = False) -> Iterator[tuple[int, Any]]:
        """Every command the received data completes, in order, evaluated lazily so that a command
        the adapter handles (tune-ok setting frame_max, a close) applies to the frames after it.

        `runs`: consecutive publishes on one channel that the shortcut took together come as one
        `PublishRun`; a session handles them in order and stops at the first that fails (the rest
        belong to a channel that is closing), as it would one by one."""
        header = self._header
        if header is not None:
            self._header = None
            yield 0, header
            if not header.accepted:
                return
        data = self._chunk
        if not data:
            return
        self._chunk = b""
        unpack = _HDR.unpack_from
        channels = self.channels
        content = self._content
        fast = self.fast
        limit = self.frame_max
        max_size = self.max_message_size
        pos = 0
        end = len(data)
        frames = 0
        try:
            while end - pos >= 7:
                ftype, channel, size = unpack(data, pos)
                if limit and size > limit:
                    reason = (_FRAME_TOO_LARGE, size, limit - EMPTY_FRAME_SIZE)
                    err = frame_refused(ftype, b"", reason)
                    pos = end
                    yield 0, FrameFailure(err, 0, _NO_METHOD, True)
                    return
                stop = pos + 7 + size
                if stop >= end:
                    break
                if data[stop] != FRAME_END:
                    err = frame_refused(ftype, data[pos + 7 : stop], (_INVALID_END_MARKER, data[stop]))
                    pos = end
                    yield 0, FrameFailure(err, 0, _NO_METHOD, True)
                    return
                if (
                    ftype == FRAME_METHOD
                    and channel in channels
                    and (not content or channel not in content)
                    and data.startswith(_PUBLISH_HEAD, pos + 7)
                ):
                    if fast:  # the single-read shortcut (see the docstring)
                        run = scan(data, pos, channels, content, limit, max_size)
                        if run and runs:
                            i = 0
                            n = len(run)
                            while i < n:
                                number = run[i][1]
                                j = i + 1
                                while j < n and run[j][1] == number:
                                    j += 1
                                group = [publish for _, _, publish in run[i:j]]
                                frames += 3 * len(group) - sum(1 for publish in group if not publish[5])
                                pos = run[j - 1][0]
                                i = j
                                if number in channels:  # else closed by one before: dropped
                                    yield number, group
                            continue
                        if run:
                            for after, number, publish in run:
                                frames += 3 if publish[5] else 2
                                pos = after
                                if number in channels:  # else closed by one before: dropped
                                    yield number, publish
                            continue
                    # basic.publish, the one decoder of its fields (a payload they do not fit goes
                    # on to `_channel_frame`, which reports the 501)
                    p = pos + 13  # frame header, class, method, ticket
                    ex_end = p + 1 + data[p] if p < stop else stop
                    rk_end = ex_end + 1 + data[ex_end] if ex_end < stop else stop
                    if rk_end + 1 == stop:  # the bits octet ends the payload
                        exchange = (
                            data[p + 1 : ex_end].decode("utf-8", "surrogateescape") if ex_end > p + 1 else ""
                        )
                        routing_key = data[ex_end + 1 : rk_end].decode("utf-8", "surrogateescape")
                        bits = data[rk_end]
                        h = stop + 1
                        content[channel] = _Content(exchange, routing_key, bits)
                        frames += 1
                        pos = h
                        continue
                frames += 1
                payload = data[pos + 7 : stop]
                pos = stop + 1
                if channel in channels and 0 < ftype <= FRAME_BODY:
                    event = self._channel_frame(ftype, channel, payload)
                else:
                    event = self._other_frame(ftype, channel, payload)
                if event is not None:
                    yield event
                    limit = self.frame_max  # the adapter may have applied a tune-ok meanwhile
        finally:
            self.frames_in += frames
            self.reader.keep(data, pos)

    def _channel_frame(self, ftype: int, channel: int, payload: bytes) -> tuple[int, Any] | None:
        """A method, header or body frame on an open channel."""
        pending = self._content.get(channel)
        if pending is None:
            if ftype != FRAME_METHOD:
                return _fail(unexpected_frame("expected method frame, got non method frame instead"), channel)
            if payload.startswith(_PUBLISH_HEAD):  # `_publish` could not parse its fields
                return _fail(cannot_decode(payload[4:]), channel, PUBLISH_IDS)
            try:
                command = decode_method(payload)
            except AmqpError as err:
                return _fail(err, channel, method_ids(payload))
            except ReaderCrash as crash:
                return 0, Crash(str(crash))
            if type(command) is ChannelClose:  # the session answers close-ok: the channel is gone
                self.channels.discard(channel)
            return channel, command
        if pending.size < 0:
            return self._content_header(ftype, channel, payload, pending)
        if ftype != FRAME_BODY:
            return _fail(
                unexpected_frame("expected content body, got non content body frame instead"),
                channel,
                PUBLISH_IDS,
            )
        pending.got += len(payload)
        if pending.got == pending.size:
            del self._content[channel]
            parts = pending.parts
            if parts:
                parts.append(payload)
                return pending.complete(channel, b"".join(parts))
            return pending.complete(channel, payload)
        if pending.got < pending.size:
            pending.parts.append(payload)
        else:
            # More body than the header declared: RabbitMQ's assembler completes only when the
            # remaining size hits exactly 0, so it waits for body frames for ever (the next method
            # frame is UNEXPECTED_FRAME). Drop the parts: this content can never complete.
            pending.parts = []
        return None

    def _content_header(
        self, ftype: int, channel: int, payload: bytes, pending: _Content
    ) -> tuple[int, Any] | None:
        wrong = "expected content header for class 60, got non content header frame instead"
        if ftype != FRAME_HEADER:
            return _fail(unexpected_frame(wrong), channel, PUBLISH_IDS)
        if len(payload) < 12:  # too short for analyze_frame's header pattern
            return _fail(frame_refused(ftype, payload, _UNKNOWN_FRAME), channel, PUBLISH_IDS)
        class_id, weight, size = _CONTENT_HEAD.unpack_from(payload, 0)
        if weight != 0:
            return _fail(unexpected_frame(wrong), channel, PUBLISH_IDS)
        if class_id != 60:
            text = f"expected content header for class 60, got one for class {class_id} instead"
            return _fail(unexpected_frame(text), channel, PUBLISH_IDS)
        if size > self.max_message_size:  # refused before any body byte is kept (see framing)
            del self._content[channel]
            err = immediate_refused() if pending.immediate else message_too_large(size, self.max_message_size)
            return _fail(err, channel, PUBLISH_IDS)
        if len(payload) < 14 and not pending.immediate:
            # No room for the property flags: analyze_frame takes the header, but the channel
            # crashes decoding the properties once the message is complete (a publish with
            # immediate=true is refused before that).
            pending.props = None
        else:
            pending.props = payload[12:]
        if size == 0:
            del self._content[channel]
            return pending.complete(channel, b"")
        pending.size = size
        return None

    def _other_frame(self, ftype: int, channel: int, payload: bytes) -> tuple[int, Any] | None:
        """Frames on channel 0, on channels that are not open, and heartbeats."""
        if ftype == FRAME_HEARTBEAT:
            if channel != 0:
                return _fail(frame_unexpected(ftype, payload), channel)
            return None
        if ftype not in (FRAME_METHOD, FRAME_HEADER, FRAME_BODY):
            return _fail(frame_refused(ftype, payload, _UNKNOWN_FRAME), channel)
        culprit = method_ids(payload) if ftype == FRAME_METHOD else _NO_METHOD
        if self.closing:
            if channel == 0 and ftype == FRAME_METHOD:
                try:
                    command = decode_method(payload)
                except (AmqpError, ReaderCrash):
                    return None
                if type(command) in (ConnectionClose, ConnectionCloseOk):
                    return 0, command
            return None
        try:
            if channel == 0:
                if ftype != FRAME_METHOD:
                    return _fail(frame_unexpected(ftype, payload), 0)
                try:
                    return 0, decode_method(payload)
                except AmqpError as err:
                    # rabbit_reader:handle_method0 names the method in an error that names none
                    return 0, FrameFailure(err, 0, culprit, False)
            if not self.running:
                # RabbitMQ 3.10.8's reader rejects a channel frame before connection.open as a bare
                # frame: 505 with class/method 0/0 even when it is a method frame (e.g. channel.open)
                return _fail(frame_unexpected(ftype, payload), channel)
            if channel in self.closing_channels:
                # we sent channel.close: only close-ok (or a crossing close, answered) matters now
                if culprit in _CHANNEL_CLOSES:
                    if culprit == _CHANNEL_CLOSE:
                        self.outbox.append(method_frame(channel, simple_payload(20, 41)))
                    self.closing_channels.discard(channel)
                return None
            # undecodable methods report 501 (or crash) before the channel is found closed
            command = decode_method(payload) if ftype == FRAME_METHOD else None
            if type(command) is not ChannelOpen:
                return _fail(channel_error("expected 'channel.open'"), channel, culprit)
            if self.channel_max and len(self.channels) >= self.channel_max:
                text = (
                    f"number of channels opened ({len(self.channels)}) has reached the "
                    f"negotiated channel_max ({self.channel_max})"
                )
                return _fail(not_allowed(text), channel, culprit)
            self.channels.add(channel)
            return channel, command
        except AmqpError as err:
            return _fail(err, channel, culprit)
        except ReaderCrash as crash:
            return 0, Crash(str(crash))

    @property
    def assembling_bytes(self) -> int:
        """Body bytes held for messages still being assembled (counted only when asked)."""
        return sum(p.got for p in self._content.values() if p.parts)

    # -- what the session tells the protocol -------------------------------------------------------

    def opened(self, frame_max: int, channel_max: int) -> None:
        """connection.open accepted, with the limits tune-ok negotiated."""
        self.frame_max = frame_max
        self.reader.frame_max = frame_max
        self.channel_max = channel_max
        self.running = True

    def tuned(self, frame_max: int, channel_max: int) -> None:
        """tune-ok accepted: its frame_max applies to the frames after it."""
        self.frame_max = frame_max
        self.reader.frame_max = frame_max
        self.channel_max = channel_max

    def channel_closing(self, channel: int) -> None:
        """The server sent channel.close: drop the channel's content, wait for close-ok."""
        self.channels.discard(channel)
        self._content.pop(channel, None)
        self.closing_channels.add(channel)

    def channel_closed(self, channel: int) -> None:
        """A channel is gone (the client closed it, or its close-ok arrived)."""
        self.channels.discard(channel)
        self._content.pop(channel, None)
        self.closing_channels.discard(channel)

    def connection_closing(self) -> None:
        """The server sent connection.close: every channel is gone."""
        self.closing = True
        self.channels.clear()
        self._content.clear()


def _fail(err: AmqpError, channel: int, culprit: tuple[int, int] = _NO_METHOD) -> tuple[int, FrameFailure]:
    return 0, FrameFailure(err, channel, culprit if err.in_method else _NO_METHOD, False)


__all__ = [
    "PUBLISH",
    "PUBLISH_IDS",
    "PUBLISH_RUN",
    "CommandAssembler",
    "Crash",
    "FrameFailure",
    "ProtocolHeader",
    "Publish",
    "PublishRun",
]
