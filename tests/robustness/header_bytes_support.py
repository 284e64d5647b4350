"""A raw AMQP client whose content headers are written and read as bytes, so a header key or value
that is not UTF-8 can be sent (pika and pamqp decode field names as text) and read back exactly.

Method frames go through pamqp; content-header frames are built and parsed here: only the
`headers` property (flag bit 13) is written, and on the way back the raw properties are kept
along with the header table parsed with bytes keys.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from typing import Any

from pamqp import commands, frame, header
from pamqp.body import ContentBody

from tests.differential_support import RawClosed, recv_chunk

HEADERS_FLAG = 1 << 13
DELIVERY_MODE_FLAG = 1 << 12
_PROPERTY_ORDER = (
    (15, "s"),  # content_type
    (14, "s"),  # content_encoding
    (13, "F"),  # headers
    (12, "o"),  # delivery_mode
    (11, "o"),  # priority
    (10, "s"),  # correlation_id
    (9, "s"),  # reply_to
    (8, "s"),  # expiration
    (7, "s"),  # message_id
    (6, "q"),  # timestamp
    (5, "s"),  # type
    (4, "s"),  # user_id
    (3, "s"),  # app_id
    (2, "s"),  # cluster_id
)


def table_entry(key: bytes, value: bytes) -> bytes:
    """One `key -> longstr` entry in wire form."""
    return bytes([len(key)]) + key + b"S" + struct.pack(">I", len(value)) + value


def table_entries(table_body: bytes) -> list[tuple[bytes, bytes, bytes]]:
    """Top-level entries of a table body as (key, type tag, raw value bytes including any length)."""
    out = []
    pos = 0
    sizes = {b"b": 1, b"B": 1, b"s": 2, b"u": 2, b"I": 4, b"i": 4, b"l": 8, b"L": 8, b"T": 8}
    sizes.update({b"f": 4, b"d": 8, b"t": 1, b"D": 5, b"V": 0})
    while pos < len(table_body):
        n = table_body[pos]
        key = table_body[pos + 1 : pos + 1 + n]
        pos += 1 + n
        tag = table_body[pos : pos + 1]
        pos += 1
        if tag in (b"S", b"x", b"F", b"A"):
            (size,) = struct.unpack_from(">I", table_body, pos)
            value = table_body[pos : pos + 4 + size]
            pos += 4 + size
        else:
            value = table_body[pos : pos + sizes[tag]]
            pos += sizes[tag]
        out.append((key, tag, value))
    return out


def headers_of(properties: bytes) -> bytes | None:
    """The header table body (without its length) from raw property bytes (flags first)."""
    (flags,) = struct.unpack_from(">H", properties, 0)
    pos = 2
    for bit, kind in _PROPERTY_ORDER:
        if not flags & (1 << bit):
            continue
        if kind == "s":
            pos += 1 + properties[pos]
        elif kind == "o":
            pos += 1
        elif kind == "q":
            pos += 8
        else:
            (size,) = struct.unpack_from(">I", properties, pos)
            if bit == 13:
                return properties[pos + 4 : pos + 4 + size]
            pos += 4 + size
    return None


class Delivered:
    """A message read back: its method, raw property bytes and body."""

    def __init__(self, method: Any, properties: bytes, body: bytes) -> None:
        self.method = method
        self.properties = properties
        self.body = body

    @property
    def headers(self) -> bytes | None:
        return headers_of(self.properties)


class RawClient:
    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 5.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""
        self.sock.sendall(frame.marshal(header.ProtocolHeader(), 0))
        self._expect_method(commands.Connection.Start)
        self.send(
            0, commands.Connection.StartOk(client_properties={"product": "t"}, response="\0guest\0guest")
        )
        tune = self._expect_method(commands.Connection.Tune)
        self.send(0, commands.Connection.TuneOk(channel_max=tune.channel_max, frame_max=tune.frame_max))
        self.send(0, commands.Connection.Open(virtual_host="/"))
        self._expect_method(commands.Connection.OpenOk)

    def send(self, channel: int, method: Any) -> None:
        self.sock.sendall(frame.marshal(method, channel))

    def call(self, channel: int, method: Any, reply: type) -> Any:
        self.send(channel, method)
        return self._expect_method(reply)

    def open_channel(self, channel: int) -> None:
        self.call(channel, commands.Channel.Open(), commands.Channel.OpenOk)

    def publish(
        self,
        channel: int,
        routing_key: str,
        body: bytes,
        headers: bytes | None,
        exchange: str = "",
        *,
        persistent: bool = False,
    ) -> None:
        """Publish with the header table body `headers` (None: no headers property)."""
        flags = (HEADERS_FLAG if headers is not None else 0) | (DELIVERY_MODE_FLAG if persistent else 0)
        props = struct.pack(">H", flags)
        if headers is not None:
            props += struct.pack(">I", len(headers)) + headers
        if persistent:
            props += b"\x02"
        content = struct.pack(">HHQ", 60, 0, len(body)) + props
        data = frame.marshal(commands.Basic.Publish(exchange=exchange, routing_key=routing_key), channel)
        data += struct.pack(">BHI", 2, channel, len(content)) + content + b"\xce"
        if body:
            data += frame.marshal(ContentBody(body), channel)
        self.sock.sendall(data)

    # frames ---------------------------------------------------------------------------------------
    def raw_frame(self, timeout: float = 5.0) -> tuple[int, int, bytes]:
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 7:
                kind, channel, size = struct.unpack_from(">BHI", self.buf, 0)
                if len(self.buf) >= 8 + size:
                    payload = self.buf[7 : 7 + size]
                    self.buf = self.buf[8 + size :]
                    if kind == 8:
                        continue
                    return kind, channel, payload
            self.buf += recv_chunk(self.sock, deadline)

    def next_method(self, timeout: float = 5.0) -> tuple[int, Any]:
        kind, channel, payload = self.raw_frame(timeout)
        assert kind == 1, f"expected a method frame, got type {kind}"
        _used, _ch, value = frame.unmarshal(struct.pack(">BHI", 1, channel, len(payload)) + payload + b"\xce")
        return channel, value

    def _expect_method(self, kind: type) -> Any:
        while True:
            _channel, value = self.next_method()
            if isinstance(value, commands.Connection.Close | commands.Channel.Close):
                raise AssertionError(f"closed: {value!r}")
            assert isinstance(value, kind), f"expected {kind.__name__}, got {value!r}"
            return value

    def content(self, method: Any, timeout: float = 5.0) -> Delivered:
        kind, _channel, payload = self.raw_frame(timeout)
        assert kind == 2
        (body_size,) = struct.unpack_from(">Q", payload, 4)
        body = b""
        while len(body) < body_size:
            kind, _channel, chunk = self.raw_frame(timeout)
            assert kind == 3
            body += chunk
        return Delivered(method, payload[12:], body)

    def get(self, channel: int, queue: str, no_ack: bool = True) -> Delivered | None:
        self.send(channel, commands.Basic.Get(queue=queue, no_ack=no_ack))
        _ch, method = self.next_method()
        if isinstance(method, commands.Basic.GetEmpty):
            return None
        if not isinstance(method, commands.Basic.GetOk):
            raise AssertionError(f"basic.get answered {method!r}")
        return self.content(method)

    def next_delivery(self, timeout: float = 5.0) -> Delivered:
        _ch, method = self.next_method(timeout)
        if not isinstance(method, commands.Basic.Deliver):
            raise AssertionError(f"expected basic.deliver, got {method!r}")
        return self.content(method, timeout)

    def alive(self, channel: int = 0) -> bool:
        """Whether the connection (and `channel`, when given) still answers."""
        try:
            if channel:
                self.call(channel, commands.Basic.Qos(prefetch_count=0), commands.Basic.QosOk)
            else:
                self.open_channel(999)
                self.call(
                    999,
                    commands.Channel.Close(reply_code=200, reply_text="", class_id=0, method_id=0),
                    commands.Channel.CloseOk,
                )
        except (RawClosed, AssertionError, TimeoutError, OSError):
            return False
        return True

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
