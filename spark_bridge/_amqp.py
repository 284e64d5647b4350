"""A minimal synchronous AMQP 0-9-1 client: pipelined publisher confirms and plain consuming.

Why not pika: the bridge publishes from Spark executors, where one Python process per task must
push tens of thousands of messages a second. pika's BlockingConnection waits for every confirm (or
dispatches callbacks per frame), which costs several times more per message than encoding the three
publish frames by hand. The hand-rolled path below only builds `basic.publish` frames itself; every
other frame (handshake, declarations, deliveries, closes, returns) goes through pamqp, which is
already a core dependency of hashbroker, so the bridge needs no extra AMQP library at all.

The client is deliberately small: one connection, one channel, no heartbeats (the task either
publishes, waits for confirms or waits for deliveries; a dead peer shows up as a socket error or a
timeout). Deliveries are assembled here and handed to `_delivered`, which `consumer.AmqpConsumer`
overrides; everything else ignores them.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import time
from typing import Any, Self

from pamqp import commands, frame, header
from pamqp.exceptions import UnmarshalingException

from spark_bridge.errors import (
    AmqpBridgeError,
    BrokerUnavailableError,
    ChannelClosedError,
    ConnectionLostError,
    PublishFailedError,
)
from spark_bridge.wire import (
    FLAG_MESSAGE_ID,
    AmqpAddress,
    decode_properties,
    encode_properties,
    field_table,
    parse_deliver,
    shortstr,
)

__all__ = [
    "FLAG_MESSAGE_ID",
    "AmqpAddress",
    "AmqpBridgeError",
    "AmqpConnection",
    "BrokerUnavailableError",
    "ChannelClosedError",
    "ConnectionLostError",
    "PublishFailedError",
    "encode_properties",
    "field_table",
    "shortstr",
]

FRAME_END = b"\xce"
_FRAME_HDR = struct.Struct(">BHI")
_PUBLISH_METHOD = struct.Struct(">HHH")  # class 60, method 40, reserved-1
_CONTENT_HDR = struct.Struct(">HHQH")  # class 60, weight 0, body size, property flags
_ACK = struct.Struct(">HHQB")
_BODY_SIZE_FLAGS = struct.Struct(">QH")


class _Content:
    """A delivery whose content header and body frames are still arriving."""

    __slots__ = ("body", "method", "properties", "size")

    def __init__(self, method: Any) -> None:
        self.method = method
        self.properties: Any = None
        self.size = -1
        self.body = bytearray()


class AmqpConnection:
    """One blocking AMQP connection with channel 1 open; publishing uses pipelined confirms."""

    def __init__(self, address: AmqpAddress, *, connection_name: str = "spark_bridge") -> None:
        self.address = address
        self.connection_name = connection_name
        self.frame_max = 131072
        self._sock: socket.socket | None = None
        self.channel = 1
        self._inbuf = bytearray()
        self._out = bytearray()
        self.closed_reason: str | None = None
        # publisher-confirm bookkeeping
        self.confirm_mode = False
        self.published = 0
        self.acked = 0
        self.nacked = 0
        self.returned = 0
        self.first_return: str | None = None
        self._settled_upto = 0
        self._sparse: set[int] = set()
        self._content: _Content | None = None

    # -- connection lifecycle -------------------------------------------------------------------
    def connect(self) -> Self:
        """Open the TCP connection, do the AMQP handshake and open channel 1."""
        addr = self.address
        try:
            sock = socket.create_connection((addr.host, addr.port), timeout=addr.connect_timeout)
        except OSError as exc:
            raise BrokerUnavailableError(
                f"cannot connect to AMQP broker at {addr.display()}: {exc.strerror or exc}"
            ) from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        try:
            sock.sendall(header.ProtocolHeader().marshal())
            start = self._expect(commands.Connection.Start)
            del start
            response = f"\0{addr.username}\0{addr.password}"
            props: dict[str, Any] = {
                "product": "hashbroker spark_bridge",
                "connection_name": self.connection_name,
                "capabilities": {
                    "publisher_confirms": True,
                    "basic.nack": True,
                    "consumer_cancel_notify": True,
                    "connection.blocked": False,
                    # a refused login is answered with connection.close 403 instead of a dropped
                    # socket, so the error can say what went wrong
                    "authentication_failure_close": True,
                },
            }
            self._send_method(
                commands.Connection.StartOk(
                    client_properties=props,
                    mechanism="PLAIN",
                    response=response,
                ),
                channel=0,
            )
            tune = self._expect(commands.Connection.Tune)
            self.frame_max = min(tune.frame_max or 131072, 131072) or 131072
            channel_max = tune.channel_max or 2047
            self._send_method(
                commands.Connection.TuneOk(channel_max=channel_max, frame_max=self.frame_max, heartbeat=0),
                channel=0,
            )
            self._send_method(commands.Connection.Open(virtual_host=addr.vhost), channel=0)
            self._expect(commands.Connection.OpenOk)
            self._send_method(commands.Channel.Open(), channel=self.channel)
            self._expect(commands.Channel.OpenOk)
        except ConnectionLostError as exc:
            self._abort_socket()
            if " 403 ACCESS_REFUSED" in str(exc):
                raise BrokerUnavailableError(
                    f"access refused by {addr.display()} (wrong user or password?): {exc}"
                ) from exc
            raise BrokerUnavailableError(f"AMQP handshake with {addr.display()} failed: {exc}") from exc
        except OSError as exc:
            self._abort_socket()
            raise BrokerUnavailableError(f"AMQP handshake with {addr.display()} failed: {exc}") from exc
        return self

    def close(self) -> None:
        """Close politely (connection.close / close-ok), ignoring a peer that is already gone."""
        if self._sock is None:
            return
        try:
            self._sock.settimeout(5)
            self._flush()
            self._send_method(
                commands.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0),
                channel=0,
            )
            self._expect(commands.Connection.CloseOk)
        except (OSError, AmqpBridgeError):
            pass
        finally:
            self._abort_socket()

    def _abort_socket(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def __enter__(self) -> Self:
        return self.connect() if self._sock is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- synchronous RPC (declarations) ---------------------------------------------------------
    def rpc(self, method: Any, reply: type) -> Any:
        """Send one synchronous method on channel 1 and wait for its reply.

        A channel.close from the broker (404, 406, ...) becomes a ChannelClosedError carrying the
        broker's reply code and text, and a fresh channel is opened so the connection stays usable.
        """
        self._send_method(method, channel=self.channel)
        try:
            return self._expect(reply)
        except _ChannelClosed as exc:
            # Answer the close, then continue on a fresh channel number: reusing the closed one
            # right away is legal but not every broker handles it promptly.
            self._send_method(commands.Channel.CloseOk(), channel=self.channel)
            self.channel += 1
            self._send_method(commands.Channel.Open(), channel=self.channel)
            self._expect(commands.Channel.OpenOk)
            self.confirm_mode = False
            raise ChannelClosedError(exc.reply_code, exc.reply_text) from None

    def select_confirms(self) -> None:
        """Put channel 1 into publisher-confirm mode (delivery tags restart at 1)."""
        self.rpc(commands.Confirm.Select(), commands.Confirm.SelectOk)
        self.confirm_mode = True
        self.published = self.acked = self.nacked = self.returned = 0
        self._settled_upto = 0
        self._sparse = set()

    # -- publishing -----------------------------------------------------------------------------
    def publish(
        self,
        method_prefix: bytes,
        routing_key: bytes,
        mandatory: bool,
        flags: int,
        props: bytes,
        body: bytes,
    ) -> None:
        """Queue one message's frames in the output buffer (no syscall unless the buffer is large).

        `method_prefix` is the pre-encoded `class, method, reserved, exchange` part of
        basic.publish, built once per task, because it is identical for every row.
        """
        if len(routing_key) > 255:
            raise ValueError(
                f"routing key is {len(routing_key)} bytes, AMQP allows at most 255: {routing_key[:40]!r}..."
            )
        out = self._out
        method_payload_len = len(method_prefix) + 1 + len(routing_key) + 1
        out += _FRAME_HDR.pack(1, self.channel, method_payload_len)
        out += method_prefix
        out.append(len(routing_key))
        out += routing_key
        out.append(1 if mandatory else 0)
        out += FRAME_END
        out += _FRAME_HDR.pack(2, self.channel, 14 + len(props))
        out += _CONTENT_HDR.pack(60, 0, len(body), flags)
        out += props
        out += FRAME_END
        max_body = self.frame_max - 8
        if len(body) <= max_body:
            if body:
                out += _FRAME_HDR.pack(3, self.channel, len(body))
                out += body
                out += FRAME_END
        else:
            for start in range(0, len(body), max_body):
                chunk = body[start : start + max_body]
                out += _FRAME_HDR.pack(3, self.channel, len(chunk))
                out += chunk
                out += FRAME_END
        self.published += 1
        if len(out) >= 65536:
            self._flush()
            self._poll(0.0)

    def unconfirmed(self) -> int:
        return self.published - self.acked - self.nacked

    def wait_in_flight(self, limit: int, timeout: float) -> None:
        """Block until at most `limit` published messages are unconfirmed."""
        if self.unconfirmed() <= limit:
            return
        self._flush()
        deadline = time.monotonic() + timeout
        while self.unconfirmed() > limit:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ConnectionLostError(
                    f"no publisher confirm from {self.address.display()} for {timeout:.0f}s; "
                    f"{self.unconfirmed()} messages unconfirmed"
                )
            self._poll(min(remaining, 1.0))

    def flush_and_wait(self, timeout: float) -> None:
        """Send everything buffered and wait until every published message is confirmed."""
        self._flush()
        self.wait_in_flight(0, timeout)

    def encode_publish_prefix(self, exchange: str) -> bytes:
        return _PUBLISH_METHOD.pack(60, 40, 0) + shortstr(exchange)

    def flush(self) -> None:
        """Send everything buffered (used when confirms are off)."""
        self._flush()

    # -- wire plumbing --------------------------------------------------------------------------
    def _flush(self) -> None:
        if not self._out:
            return
        sock = self._require_sock()
        try:
            sock.sendall(self._out)
        except OSError as exc:
            self._lost(f"send failed: {exc}")
        self._out.clear()

    def _require_sock(self) -> socket.socket:
        if self._sock is None:
            raise ConnectionLostError(self.closed_reason or "connection is closed")
        return self._sock

    def _send_method(self, method: Any, channel: int) -> None:
        self._flush()
        sock = self._require_sock()
        try:
            sock.sendall(frame.marshal(method, channel))
        except OSError as exc:
            self._lost(f"send failed: {exc}")

    def _lost(self, why: str) -> None:
        self.closed_reason = f"connection to {self.address.display()} lost: {why}"
        self._abort_socket()
        raise ConnectionLostError(self.closed_reason)

    def _recv(self, timeout: float | None) -> bool:
        """Read available bytes into the input buffer; False when nothing came before `timeout`."""
        sock = self._require_sock()
        if timeout is not None:
            ready, _, _ = select.select([sock], [], [], timeout)
            if not ready:
                return False
        try:
            data = sock.recv(262144)
        except OSError as exc:
            self._lost(f"receive failed: {exc}")
        if not data:
            self._lost("the broker closed the TCP connection")
        self._inbuf += data
        return True

    def _poll(self, timeout: float) -> None:
        """Process whatever frames arrive within `timeout` (acks, nacks, returns, closes)."""
        if self._recv(timeout):
            self._process_frames(None)

    def _expect(self, reply: type) -> Any:
        """Read frames until one of type `reply` arrives; confirms seen meanwhile are counted."""
        deadline = time.monotonic() + max(self.address.connect_timeout, 30.0)
        while True:
            found = self._process_frames(reply)
            if found is not None:
                return found
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ConnectionLostError(
                    f"timed out waiting for {reply.__name__} from {self.address.display()}"
                )
            self._recv(remaining)

    def _process_frames(self, wanted: type | None) -> Any:
        """Consume complete frames from the input buffer.

        Acks and nacks take a fast path (they are most of the traffic). Returns the first frame
        of type `wanted` if one is seen (frames after it stay buffered).
        """
        buf = self._inbuf
        pos = 0
        result = None
        try:
            while len(buf) - pos >= 7:
                ftype, _channel, size = _FRAME_HDR.unpack_from(buf, pos)
                end = pos + 7 + size
                if len(buf) < end + 1:
                    break
                if ftype == 1 and size == 13 and buf[pos + 7 : pos + 11] == b"\x00\x3c\x00\x50":
                    _, _, tag, bits = _ACK.unpack_from(buf, pos + 7)
                    self._on_ack(tag, bool(bits & 1), nack=False)
                    pos = end + 1
                    continue
                if ftype == 8:
                    pos = end + 1
                    continue
                if ftype == 1 and buf[pos + 7 : pos + 11] == b"\x00\x3c\x00\x3c":
                    self._content = _Content(parse_deliver(buf, pos + 11))
                    pos = end + 1
                    continue
                if ftype == 3 or ftype == 2:
                    # a delivery's content is assembled; a basic.return's is skipped
                    if self._content is not None:
                        self._on_content(ftype, buf, pos, end)
                    pos = end + 1
                    continue
                try:
                    _, _, value = frame.unmarshal(bytes(buf[pos : end + 1]))
                except UnmarshalingException as exc:
                    raise ConnectionLostError(f"undecodable frame from broker: {exc}") from exc
                pos = end + 1
                if isinstance(value, commands.Basic.Nack):
                    self._on_ack(value.delivery_tag, value.multiple, nack=True)
                elif isinstance(value, commands.Basic.Ack):
                    self._on_ack(value.delivery_tag, value.multiple, nack=False)
                elif isinstance(value, commands.Basic.Return):
                    self.returned += 1
                    if self.first_return is None:
                        self.first_return = (
                            f"{value.reply_code} {value.reply_text} "
                            f"(exchange {value.exchange!r}, routing key {value.routing_key!r})"
                        )
                elif isinstance(value, commands.Connection.Close):
                    reason = f"broker closed the connection: {value.reply_code} {value.reply_text}"
                    with contextlib.suppress(OSError):
                        self._require_sock().sendall(frame.marshal(commands.Connection.CloseOk(), 0))
                    self._lost(reason)
                elif isinstance(value, commands.Channel.Close):
                    raise _ChannelClosed(int(value.reply_code or 0), str(value.reply_text))
                elif wanted is not None and isinstance(value, wanted):
                    result = value
                    break
        finally:
            del buf[:pos]
        return result

    def _on_content(self, ftype: int, buf: bytearray, pos: int, end: int) -> None:
        content = self._content
        assert content is not None
        if ftype == 2:
            content.size, flags = _BODY_SIZE_FLAGS.unpack_from(buf, pos + 11)
            content.properties = decode_properties(flags, buf, pos + 21)
        else:
            content.body += buf[pos + 7 : end]
        if content.size >= 0 and len(content.body) >= content.size:
            self._content = None
            self._delivered(content.method, content.properties, bytes(content.body))

    def _delivered(self, method: Any, properties: Any, body: bytes) -> None:
        """A complete basic.deliver arrived; a publishing connection never consumes, so drop it."""

    def _on_ack(self, tag: int, multiple: bool, *, nack: bool) -> None:
        """Count a (multiple) ack or nack exactly once per delivery tag.

        RabbitMQ may confirm tags out of order (single acks above a gap, then a multiple ack),
        so tags settled individually above the contiguous prefix are remembered in a set.
        """
        count = 0
        if multiple:
            if tag > self._settled_upto:
                sparse_below = {t for t in self._sparse if t <= tag}
                count = tag - self._settled_upto - len(sparse_below)
                self._sparse -= sparse_below
                self._settled_upto = tag
        elif tag > self._settled_upto and tag not in self._sparse:
            count = 1
            if tag == self._settled_upto + 1:
                self._settled_upto = tag
            else:
                self._sparse.add(tag)
        while self._sparse and (self._settled_upto + 1) in self._sparse:
            self._settled_upto += 1
            self._sparse.discard(self._settled_upto)
        if nack:
            self.nacked += count
        else:
            self.acked += count


class _ChannelClosed(ChannelClosedError):
    """Internal: the broker closed our channel; `rpc` answers the close and re-raises it public."""
