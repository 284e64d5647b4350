"""Length-based AMQP frame splitting and building.

RabbitMQ's reader (rabbit_reader:handle_input) reads a 7-byte header, checks the payload size against
the negotiated frame_max (allowing an 8-byte fudge because many clients are off by one frame
header), then expects the 0xCE end marker. We do the same so oversized and corrupt frames produce the
same FRAME_ERROR texts.
"""

from __future__ import annotations

import struct

from amqpwire.errors import (
    AmqpError,
    frame_error,
    not_implemented,
    precondition_failed,
    unexpected_frame,
)
from exchanges.erlang.format import erl_format

FRAME_METHOD = 1
FRAME_HEADER = 2
FRAME_BODY = 3
FRAME_HEARTBEAT = 8
FRAME_END = 0xCE
FRAME_END_BYTE = b"\xce"
EMPTY_FRAME_SIZE = 8
FRAME_MIN_SIZE = 4096

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
# 0-9 header some clients send; RabbitMQ treats it as 0-9-1 (rabbit_reader:handshake).
ACCEPTED_HEADERS = frozenset({PROTOCOL_HEADER, b"AMQP\x01\x01\x00\x09"})

_HDR = struct.Struct(">BHI")
HEARTBEAT_FRAME = b"\x08\x00\x00\x00\x00\x00\x00\xce"
MAX_MESSAGE_SIZE = 134217728
"""RabbitMQ 3.10's default max_message_size (128 MiB)."""
MAX_MSG_SIZE = 536870912
"""RabbitMQ's ?MAX_MSG_SIZE, the largest max_message_size it accepts; at exactly this limit its
refusal drops the word "configured"."""


def frame_refused(frame_type: int, payload: bytes, reason: object) -> AmqpError:
    """rabbit_reader:frame_error/5: 501 naming the frame type, (the start of) its payload and the
    reason, an Erlang term (e.g. `(Atom("invalid_frame_end_marker"), 0)`)."""
    kind, snippet = _payload_snippet(payload)
    return frame_error(erl_format("type ~p, ~s octets = ~p: ~p", [frame_type, kind, snippet, reason]))


def frame_unexpected(frame_type: int, payload: bytes) -> AmqpError:
    """rabbit_reader:unexpected_frame/4: 505 naming the frame type and (the start of) its payload."""
    kind, snippet = _payload_snippet(payload)
    return unexpected_frame(erl_format("type ~p, ~s octets = ~p", [frame_type, kind, snippet]))


def cannot_decode(fields: bytes) -> AmqpError:
    """rabbit_misc:frame_error/2: method fields that do not parse, printed with ~w (byte values)."""
    return frame_error(erl_format("cannot decode ~w", [fields]))


def _payload_snippet(payload: bytes) -> tuple[str, bytes]:
    if len(payload) <= 16:
        return "all", payload
    return "first 16", payload[:16]


class ReaderCrash(Exception):
    """Input that crashes RabbitMQ's reader process instead of raising an AMQP error.

    rabbit_command_assembler:analyze_frame looks method ids up with a generated function that has no
    clause for unknown (class, method) pairs, so the reader dies and the socket simply closes: the
    client gets no connection.close. The connection reproduces that by closing without a word.
    """


class FrameReader:
    """Buffers received bytes between reads: the protocol header, then at most one incomplete frame.

    `frame_max` is the negotiated maximum (4096 until tune-ok, like RabbitMQ's initial_frame_max);
    0 means unlimited. The frames themselves are split by `broker.protocol.assembler`, which
    reports a 501 for an oversized frame or a bad end marker (after that the stream is out of sync
    and the connection closes).
    """

    __slots__ = ("_buf", "_need", "frame_max")

    def __init__(self, frame_max: int = FRAME_MIN_SIZE) -> None:
        self._buf = bytearray()
        self._need = 0  # bytes the buffered incomplete frame needs before anything can be parsed
        self.frame_max = frame_max

    def feed(self, data: bytes) -> None:
        self._buf += data

    def gather(self, data: bytes) -> bytes | None:
        """Received `data` behind whatever is buffered, as one immutable chunk to parse.

        None while the buffered frame is still incomplete (the bytes are kept), so a large frame
        arriving in many reads is joined once rather than re-copied per read. The caller parses
        complete frames from the chunk and hands the incomplete tail back with `keep`.
        """
        buf = self._buf
        if not buf:
            return data if type(data) is bytes else bytes(data)
        buf += data
        if len(buf) < self._need:
            return None
        out = bytes(buf)
        buf.clear()
        return out

    def keep(self, data: bytes, pos: int) -> None:
        """Buffer data[pos:] (at most one incomplete frame) for the next `gather`."""
        rest = len(data) - pos
        if rest <= 0:
            return
        self._buf += memoryview(data)[pos:]
        self._need = 7 if rest < 7 else _HDR.unpack_from(data, pos)[2] + EMPTY_FRAME_SIZE

    def peek(self) -> bytes:
        """The buffered bytes that would start the protocol header (at most 8)."""
        return bytes(self._buf[:8])

    def take(self, n: int) -> bytes | None:
        """Remove and return the first n raw bytes (protocol header), None if not yet received."""
        if len(self._buf) < n:
            return None
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out


def message_too_large(size: int, max_size: int) -> AmqpError:
    """406 with rabbit_channel:check_msg_size's text (a channel error naming basic.publish).

    RabbitMQ checks once the whole body is in, so a header declaring terabytes lets one
    connection buffer gigabytes; the assembler refuses at the content header instead, with the
    same error, and the channel's body frames are then dropped unread."""
    configured = "" if max_size == MAX_MSG_SIZE else "configured "
    return precondition_failed(f"message size {size} is larger than {configured}max size {max_size}")


def immediate_refused() -> AmqpError:
    """basic.publish with immediate=true: rabbit_channel's first publish clause, 540 (hard)."""
    return not_implemented("immediate=true")


def build_body_frames(channel: int, body: bytes, frame_max: int, out: list[bytes]) -> None:
    """Append body frames for `body`, each payload at most frame_max - 8 bytes."""
    n = len(body)
    if n == 0:
        return
    chunk = (frame_max - EMPTY_FRAME_SIZE) if frame_max else n
    if n <= chunk:
        out.append(_HDR.pack(FRAME_BODY, channel, n))
        out.append(body)
        out.append(FRAME_END_BYTE)
        return
    view = memoryview(body)
    for start in range(0, n, chunk):
        piece = view[start : start + chunk]
        out.append(_HDR.pack(FRAME_BODY, channel, len(piece)))
        out.append(bytes(piece))
        out.append(FRAME_END_BYTE)
