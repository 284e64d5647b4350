"""The AMQP connection state machine: handshake, tuning, channel table, heartbeats, error closing.

It consumes bytes (`data_received`) and produces bytes through `transport.write`; the asyncio
Protocol in broker.transport is only an adapter. Error handling follows rabbit_reader: errors during
the handshake close the socket (with connection.close only where RabbitMQ sends one), hard errors
send connection.close and wait briefly for close-ok, soft errors close just the channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import platform
import socket
import struct
import time
from typing import TYPE_CHECKING, Any, Protocol

from amqpwire.errors import AmqpError
from amqpwire.fields import FieldDecodeError, FieldTable
from broker import __version__
from broker.channel import Channel
from broker.protocol import methods as M
from broker.protocol.framing import (
    ACCEPTED_HEADERS,
    EMPTY_FRAME_SIZE,
    FRAME_BODY,
    FRAME_END,
    FRAME_HEADER,
    FRAME_HEARTBEAT,
    FRAME_METHOD,
    FRAME_MIN_SIZE,
    HEARTBEAT_FRAME,
    PROTOCOL_HEADER,
    FrameReader,
    ReaderCrash,
    frame_error,
    unexpected_frame_error,
)

if TYPE_CHECKING:
    from broker.entities.queue import Queue
    from broker.entities.vhost import VHost
    from broker.server import Broker

log = logging.getLogger("hashbroker.connection")
_ids = itertools.count(1)
CLOSE_OK_TIMEOUT = 1.0
SILENT_CLOSE_DELAY = 3.0  # rabbit_reader ?SILENT_CLOSE_DELAY (seconds)
_S64 = struct.Struct(">Q")
_HDR = struct.Struct(">BHI")
_HEADER_FRAME = struct.Struct(">BHIHHQ")  # frame header + content header's class, weight, body size
_PUBLISH_HEAD = b"\x00\x3c\x00\x28"  # basic.publish method ids
_PUBLISH_IDS = (60, 40)
_LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST


class Transport(Protocol):
    def write(self, data: bytes) -> None: ...
    def close(self) -> None: ...
    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def get_extra_info(self, name: str, default: Any = None) -> Any: ...


def server_properties(cluster_name: str) -> dict[str, Any]:
    """connection.start's server-properties: RabbitMQ 3.10.8's capabilities and keys, our identity.

    ``cluster_name`` is there because rabbit_reader always sends it (``rabbit_nodes:cluster_name()``,
    by default the node name) and clients hand it to users: Node's amqplib exposes
    ``connection.serverProperties.cluster_name``, which was ``undefined`` against hashbroker only.
    The value is the emulated cluster's local node, as ``/api/overview`` reports it. Product,
    version, platform, copyright and information say hashbroker on purpose (as the management API's
    ``product_name`` does); no client decides anything on them.
    """
    return {
        "cluster_name": cluster_name,
        "product": "hashbroker",
        "version": __version__,
        "platform": f"Python {platform.python_version()}",
        "copyright": "hashbroker contributors",
        "information": "AMQP 0-9-1 broker routing as RabbitMQ 3.10.8; Apache-2.0",
        "capabilities": {
            "publisher_confirms": True,
            "exchange_exchange_bindings": True,
            "basic.nack": True,
            "consumer_cancel_notify": True,
            "connection.blocked": True,
            "consumer_priorities": True,
            "authentication_failure_close": True,
            "per_consumer_qos": True,
            "direct_reply_to": True,
        },
    }


class Connection:
    def __init__(self, broker: Broker, transport: Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.broker = broker
        self.transport = transport
        self.loop = loop
        self.id = next(_ids)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.name = f"{self.peer} -> {broker.host}:{broker.port}"
        self.reader = FrameReader(FRAME_MIN_SIZE)
        self.state = "handshake"
        self.frame_max = FRAME_MIN_SIZE
        self.channel_max = broker.settings.channel_max
        self.heartbeat = 0
        self.user = ""
        self.vhost_name = ""
        self.vhost_obj: VHost = None  # type: ignore[assignment]  # set on connection.open
        self.capabilities: FieldTable = FieldTable()
        self.cancel_notify = False
        self.channels: dict[int, Channel] = {}
        self.closing_channels: set[int] = set()
        self.exclusive_queues: list[Queue] = []
        self.paused = False
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self._confirm_channels: set[Channel] = set()
        self._last_recv = time.monotonic()
        self._last_send = time.monotonic()
        self._hb_timer: asyncio.TimerHandle | None = None
        self._close_timer: asyncio.TimerHandle | None = None
        self.closed = False
        self._auth_mechanism = ""
        log.info("accepting AMQP connection %s (%s)", self.id, self.name)

    # -- output -----------------------------------------------------------------------------------

    def send_method(self, channel: int, payload: bytes) -> None:
        self._out.append(M.method_frame(channel, payload))
        self._schedule_flush()

    def send_frames(self, frames: list[bytes]) -> None:
        self._out.extend(frames)
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self.flush)

    def want_flush_confirms(self, channel: Channel) -> None:
        self._confirm_channels.add(channel)
        self._schedule_flush()

    def flush(self) -> None:
        self._flush_scheduled = False
        if self._confirm_channels:
            chans = self._confirm_channels
            self._confirm_channels = set()
            for ch in chans:
                if ch.open:
                    ch.flush_confirms()
        if self._out and not self.closed:
            data = b"".join(self._out)
            self._out.clear()
            self._last_send = time.monotonic()
            self.transport.write(data)
        elif self._out:
            self._out.clear()

    # -- input --------------------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self.closed or self.state == "silent":
            return
        self._last_recv = time.monotonic()
        reader = self.reader
        if self.state == "handshake":
            reader.feed(data)
            header = reader.take(8)
            if header is None:
                if reader.buffered and not PROTOCOL_HEADER.startswith(
                    bytes(reader._buf[:8])[: reader.buffered]
                ):
                    self._refuse()
                return
            if header not in ACCEPTED_HEADERS:
                self._refuse()
                return
            self._send_start()
            chunk = reader.gather(b"")
        else:
            chunk = reader.gather(data)
        if chunk is None:  # still inside one incomplete frame
            return
        try:
            if self._ingest(chunk):
                return
        except AmqpError as err:
            # the frame reader lost sync (bad end marker, oversized frame): no method to blame,
            # and nothing after it can be parsed, so close without waiting for close-ok
            self.fail(err, (0, 0), fatal=True)
        self.flush()

    def _ingest(self, data: bytes) -> bool:
        """Dispatch every complete frame in `data`, as RabbitMQ's reader splits them (a 7-byte
        header, the size checked against frame_max, then the 0xCE end marker); the incomplete tail
        goes back to the reader. True when the connection closed (or went silent) meanwhile.

        Fast path: a basic.publish whose content header and single body frame already follow it in
        `data`, on an open channel that expects a method, is taken whole (`_fast_publish`): no
        payload copy and no dispatch per frame. Everything else goes frame by frame through
        `_handle_frame`, and so does a publish the fast path declines (it then fails exactly as it
        always did). One call handles at most one read (asyncio reads up to 256 KiB), so other
        connections run between reads.
        """
        reader = self.reader
        limit = reader.frame_max
        channels = self.channels
        unpack = _HDR.unpack_from
        pos = 0
        end = len(data)
        try:
            while end - pos >= 7:
                ftype, channel, size = unpack(data, pos)
                if limit and size > limit:
                    raise frame_error(ftype, b"", f"{{frame_too_large,{size},{limit - EMPTY_FRAME_SIZE}}}")
                stop = pos + 7 + size
                if stop >= end:
                    break
                if data[stop] != FRAME_END:
                    raise frame_error(
                        ftype, data[pos + 7 : stop], f"{{invalid_frame_end_marker,{data[stop]}}}"
                    )
                if ftype == FRAME_METHOD and channel and data.startswith(_PUBLISH_HEAD, pos + 7):
                    ch = channels.get(channel)
                    if ch is not None and not ch.expect and not ch.closing and self.state == "running":
                        after = self._fast_publish(ch, data, pos + 7, stop, end, limit)
                        if after:
                            pos = after
                            if self.closed or self.state == "silent":
                                return True
                            continue
                payload = data[pos + 7 : stop]
                pos = stop + 1
                self._handle_frame(ftype, channel, payload)
                if self.closed or self.state == "silent":
                    return True
        finally:
            reader.keep(data, pos)
        return False

    def _fast_publish(self, ch: Channel, data: bytes, mpos: int, mstop: int, end: int, limit: int) -> int:
        """A whole basic.publish (method payload at data[mpos:mstop]) in one step.

        Returns the position after its last frame, or 0 to decline: the content is not all in
        `data` yet, the body spans several frames, or anything is unusual (immediate flag, short or
        malformed payloads, bad end markers, frames of another type or channel, oversized frames) -
        the frame-by-frame path then produces RabbitMQ's errors for it. The content header's
        property bytes are kept exactly as received. Errors from the publish itself are closed as
        `_handle_frame` closes them for the frame that completes the content.
        """
        number = ch.number
        p = mpos + 6  # class, method, ticket
        ex_end = p + 1 + data[p]
        if ex_end >= mstop:
            return 0
        rk_end = ex_end + 1 + data[ex_end]
        if rk_end >= mstop:
            return 0
        bits = data[rk_end]
        if bits & 2:  # immediate: refused with 540 by the frame-by-frame path
            return 0
        h = mstop + 1
        if end - h < 22:  # header frame: 7 + at least 14 payload octets + end marker
            return 0
        ftype, channel, hsize, class_id, weight, body_size = _HEADER_FRAME.unpack_from(data, h)
        if (
            ftype != FRAME_HEADER
            or channel != number
            or class_id != 60
            or weight
            or hsize < 14
            or (limit and hsize > limit)
        ):
            return 0
        hstop = h + 7 + hsize
        if hstop >= end or data[hstop] != FRAME_END:
            return 0
        after = hstop + 1
        if body_size:
            if end - after < 8:
                return 0
            ftype, channel, size = _HDR.unpack_from(data, after)
            if ftype != FRAME_BODY or channel != number or size != body_size or (limit and size > limit):
                return 0
            bstop = after + 7 + size
            if bstop >= end or data[bstop] != FRAME_END:
                return 0
            body = data[after + 7 : bstop]
            after = bstop + 1
        else:
            body = b""
        ch.method_ids = _PUBLISH_IDS
        try:
            ch.publish(
                data[p + 1 : ex_end].decode("utf-8", "surrogateescape") if ex_end > p + 1 else "",
                data[ex_end + 1 : rk_end].decode("utf-8", "surrogateescape"),
                bits & 1 == 1,
                data[h + 19 : hstop],
                body,
            )
        except AmqpError as err:
            self._frame_failed(err, ch, number, FRAME_BODY, b"")
        return after

    def _refuse(self) -> None:
        """Bad protocol header: answer with ours and close (rabbit_reader:refuse_connection)."""
        log.info("connection %s: bad protocol header, refused", self.id)
        self.transport.write(PROTOCOL_HEADER)
        self._shutdown("bad protocol header")

    def _handle_frame(self, ftype: int, channel: int, payload: bytes) -> None:
        """Dispatch one frame; turn an error into channel.close or connection.close.

        This is the one place that decides which method an error close names: like
        rabbit_command_assembler, the method a frame belongs to - its own ids for a method frame,
        the channel's pending basic.publish for content frames - unless the error is a crash
        (`in_method` false) or a frame that belongs to no method (heartbeat, stray content).
        """
        ch = self.channels.get(channel) if channel else None
        try:
            if ch is not None and 0 < ftype <= FRAME_BODY and self.state == "running":
                ch.handle_frame(ftype, payload)
            else:
                self._connection_frame(ftype, channel, payload)
        except AmqpError as err:
            self._frame_failed(err, ch, channel, ftype, payload)
        except ReaderCrash as crash:
            self._crash(str(crash))

    def _frame_failed(
        self, err: AmqpError, ch: Channel | None, channel: int, ftype: int, payload: bytes
    ) -> None:
        """Close the channel (soft error) or the connection for an error raised by one frame."""
        if not err.in_method:
            culprit = (0, 0)
        elif ch is not None and 0 < ftype <= FRAME_BODY:
            culprit = ch.method_ids
        elif ftype == FRAME_METHOD:
            culprit = M.method_ids(payload)
        else:
            culprit = (0, 0)
        if ch is not None and not err.hard and self.channels.get(channel) is ch:
            self.close_channel(ch, err, culprit)
        else:
            self.fail(err, culprit)

    def _connection_frame(self, ftype: int, channel: int, payload: bytes) -> None:
        """Frames on channel 0, on channels that are not open, and heartbeats."""
        if ftype == FRAME_HEARTBEAT:
            if channel != 0:
                raise unexpected_frame_error(ftype, payload)
            return
        if ftype not in (FRAME_METHOD, FRAME_HEADER, FRAME_BODY):
            raise frame_error(ftype, payload, "unknown_frame")
        if self.state == "closing":
            if channel == 0 and ftype == FRAME_METHOD:
                self._closing_method(payload)
            return
        if channel == 0:
            if ftype != FRAME_METHOD:
                raise unexpected_frame_error(ftype, payload)
            self._channel0(M.decode_method(payload))
            return
        if self.state != "running":
            # RabbitMQ 3.10.8's reader rejects a channel frame before connection.open as a bare
            # frame: 505 with class/method 0/0 even when it is a method frame (e.g. channel.open)
            err = unexpected_frame_error(ftype, payload)
            err.in_method = False
            raise err
        if channel in self.closing_channels:
            # we sent channel.close: only close-ok (or a crossing close) matters now
            if ftype == FRAME_METHOD and payload[:4] in (b"\x00\x14\x00\x29", b"\x00\x14\x00\x28"):
                if payload[:4] == b"\x00\x14\x00\x28":
                    self.send_method(channel, M.simple_payload(20, 41))
                self.closing_channels.discard(channel)
            return
        if ftype == FRAME_METHOD and payload[:4] == b"\x00\x14\x00\x0a":  # channel.open
            if self.channel_max and len(self.channels) >= self.channel_max:
                raise AmqpError(
                    530,
                    f"number of channels opened ({len(self.channels)}) has reached the "
                    f"negotiated channel_max ({self.channel_max})",
                )
            self.channels[channel] = Channel(self, channel)
            self.send_method(channel, M.simple_payload(20, 11, b"\x00\x00\x00\x00"))
            return
        if ftype == FRAME_METHOD:
            M.decode_method(payload)  # undecodable methods report 501 (or crash) first
        raise AmqpError(504, "expected 'channel.open'")

    # -- channel 0 ----------------------------------------------------------------------------------

    def _send_start(self) -> None:
        from pamqp import commands

        start = commands.Connection.Start(
            version_major=0,
            version_minor=9,
            server_properties=server_properties(self.broker.cluster.local),
            mechanisms="PLAIN AMQPLAIN",
            locales="en_US",
        )
        self._out.append(M.encode_method(0, start))
        self.state = "starting"
        self.flush()

    def _channel0(self, m: M.Method) -> None:
        state = self.state
        name = m.name
        if name == "connection.start_ok" and state == "starting":
            self._start_ok(m.args)
        elif name == "connection.secure_ok" and state == "securing":
            raise AmqpError(503, "unexpected connection.secure_ok")
        elif name == "connection.tune_ok" and state == "tuning":
            self._tune_ok(m.args)
        elif name == "connection.open" and state == "opening":
            self._open(m.args)
        elif name == "connection.close":
            self.send_method(0, M.simple_payload(10, 51))
            log.info(
                "closing AMQP connection %s (%s, vhost: '%s', user: '%s')",
                self.id,
                self.name,
                self.vhost_name,
                self.user,
            )
            self.flush()
            self._shutdown("client closed")
        elif name == "connection.close_ok":
            self._shutdown("close-ok")
        elif name == "connection.update_secret" and state == "running":
            # RabbitMQ 3.10.8 with the internal auth backend: rabbit_access_control:update_state keeps
            # the user as is and answers update-secret-ok, whatever the new secret (observed with the
            # right and a wrong password); hashbroker used to close with 530 "Secret update failed".
            self.send_method(0, M.simple_payload(10, 71))
        else:
            raise AmqpError(504, f"unexpected method in connection state {state}")

    def _start_ok(self, a: dict[str, Any]) -> None:
        props: FieldTable = a["client_properties"]
        caps = props.get("capabilities")
        if caps is not None and caps.type == "table":
            self.capabilities = caps.value
        cn = self.capabilities.get("consumer_cancel_notify")
        self.cancel_notify = bool(cn is not None and cn.type == "bool" and cn.value)
        mech = a["mechanism"]
        self._auth_mechanism = mech
        response: bytes = a["response"]
        if mech == "PLAIN":
            parts = response.split(b"\x00")
            if len(parts) != 3:
                raise AmqpError(502, f"response {response!r} invalid")
            user, password = parts[1], parts[2]
        elif mech == "AMQPLAIN":
            try:
                table = FieldTable.decode(response)
            except FieldDecodeError:
                raise AmqpError(502, "AMQPLAIN response invalid") from None
            lf, pf = table.get("LOGIN"), table.get("PASSWORD")
            if lf is None or pf is None or lf.type != "longstr" or pf.type != "longstr":
                raise AmqpError(502, "AMQPLAIN auth info invalid")
            user, password = lf.value, pf.value
        else:
            raise AmqpError(503, f"unknown authentication mechanism '{mech}'")
        username = user.decode("utf-8", errors="replace")
        ok = self.broker.check_credentials(username, password.decode("utf-8", errors="replace"))
        if not ok:
            self._auth_fail(username, f"user '{username}' - invalid credentials")
            return
        if username in self.broker.settings.loopback_users and not self._is_loopback():
            self._auth_fail(username, f"user '{username}' can only connect via localhost")
            return
        self.user = username
        from pamqp import commands

        s = self.broker.settings
        self._out.append(
            M.encode_method(
                0,
                commands.Connection.Tune(
                    channel_max=s.channel_max, frame_max=s.frame_max, heartbeat=s.heartbeat
                ),
            )
        )
        self.state = "tuning"

    def _is_loopback(self) -> bool:
        peer = self.transport.get_extra_info("peername")
        if not isinstance(peer, tuple):
            return True  # unix socket / in-memory transport
        host = str(peer[0])
        return host.startswith("127.") or host in ("::1", "::ffff:127.0.0.1", "localhost")

    def _auth_fail(self, username: str, reason: str) -> None:
        log.error(
            "connection %s (%s): user '%s' login refused: %s login refused: %s",
            self.id,
            self.name,
            username,
            self._auth_mechanism,
            reason,
        )
        af = self.capabilities.get("authentication_failure_close")
        if af is not None and af.type == "bool" and af.value:
            text = (
                f"ACCESS_REFUSED - Login was refused using authentication mechanism {self._auth_mechanism}. "
                "For details see the broker logfile."
            )
            self._out.append(M.method_frame(0, M.close_payload(10, 403, text, 0, 0)))
        self.flush()
        self._shutdown("authentication failure")

    def _tune_ok(self, a: dict[str, Any]) -> None:
        s = self.broker.settings
        self._negotiate("frame_max", FRAME_MIN_SIZE, s.frame_max, a["frame_max"])
        self._negotiate("channel_max", 1, s.channel_max, a["channel_max"])
        self.frame_max = a["frame_max"] or s.frame_max
        self.reader.frame_max = self.frame_max
        self.channel_max = a["channel_max"] or s.channel_max
        self.heartbeat = a["heartbeat"]
        self.state = "opening"
        if self.heartbeat:
            self._hb_timer = self.loop.call_later(self.heartbeat, self._heartbeat_tick)

    @staticmethod
    def _negotiate(field: str, minimum: int, server: int, client: int) -> None:
        detail = " (no limit)" if client == 0 and field == "channel_max" else ""
        if client != 0 and client < minimum:
            raise AmqpError(
                530,
                f"negotiated {field} = {client}{detail} is lower than the minimum allowed value ({minimum})",
            )
        if server != 0 and (client == 0 or client > server):
            raise AmqpError(
                530,
                f"negotiated {field} = {client}{detail} is higher than the maximum allowed value ({server})",
            )

    def _open(self, a: dict[str, Any]) -> None:
        vhost = self.broker.vhosts.get(a["virtual_host"])
        if vhost is None:
            raise AmqpError(530, f"vhost {a['virtual_host']} not found")
        if (vhost.name, self.user) not in self.broker.auth.permissions:
            raise AmqpError(530, f"access to vhost '{vhost.name}' refused for user '{self.user}'")
        self.vhost_name = vhost.name
        self.vhost_obj = vhost
        self.send_method(0, M.simple_payload(10, 41, b"\x00"))
        self.state = "running"
        log.info(
            "connection %s (%s): user '%s' authenticated and granted access to vhost '%s'",
            self.id,
            self.name,
            self.user,
            vhost.name,
        )

    def _closing_method(self, payload: bytes) -> None:
        try:
            m = M.decode_method(payload)
        except AmqpError:
            return
        if m.name == "connection.close_ok":
            self._shutdown("close-ok")
        elif m.name == "connection.close":
            self.send_method(0, M.simple_payload(10, 51))
            self.flush()

    # -- heartbeats -------------------------------------------------------------------------------

    def _heartbeat_tick(self) -> None:
        self._hb_timer = None
        if self.closed:
            return
        now = time.monotonic()
        hb = self.heartbeat
        if now - self._last_recv > 2 * hb:
            log.error(
                "closing AMQP connection %s (%s): missed heartbeats from client, timeout: %ss",
                self.id,
                self.name,
                hb,
            )
            self._shutdown("missed heartbeats")
            return
        if now - self._last_send >= hb * 0.5:
            self._out.append(HEARTBEAT_FRAME)
            self.flush()
        self._hb_timer = self.loop.call_later(hb / 2, self._heartbeat_tick)

    # -- errors and closing -----------------------------------------------------------------------

    def fail(self, err: AmqpError, culprit: tuple[int, int], fatal: bool = False) -> None:
        """A connection-level error: log it, send connection.close (when RabbitMQ would), close.

        `culprit` is the (class, method) the close names. During the handshake RabbitMQ answers only
        a refused login (handled in `_auth_fail`) and a refused connection.open with a close; every
        other handshake error - including a failed tune negotiation, which rabbit_reader raises
        with the method already set so it misses the tuning clause - is a silent close after a delay.
        """
        log.error(
            "closing AMQP connection %s (%s, vhost: '%s', user: '%s'): %d %s",
            self.id,
            self.name,
            self.vhost_name,
            self.user,
            err.reply_code,
            err.reply_text,
        )
        if self.state in ("starting", "securing", "tuning"):
            self._silent_close(err.reply_text)
            return
        if self.state == "closing":
            return
        class_id, method_id = culprit
        self._out.append(
            M.method_frame(0, M.close_payload(10, err.reply_code, err.reply_text, class_id, method_id))
        )
        self._teardown_channels()
        self.state = "closing"
        self.flush()
        if fatal:
            self._shutdown(err.reply_text)
            return
        self._close_timer = self.loop.call_later(CLOSE_OK_TIMEOUT, self._shutdown, "close-ok timeout")

    def _silent_close(self, reason: str) -> None:
        """rabbit_reader's handshake-error path: say nothing, wait SILENT_CLOSE_DELAY, reset.

        RabbitMQ sleeps so that a misbehaving client cannot retry in a tight loop, then its reader
        exits with the socket still holding our unread frames, which the kernel turns into a reset.
        Reading stops meanwhile; the connection stays registered until the socket goes.
        """
        self.state = "silent"
        self._out.clear()
        self.transport.pause_reading()
        if self._hb_timer is not None:
            self._hb_timer.cancel()
            self._hb_timer = None
        self._close_timer = self.loop.call_later(
            SILENT_CLOSE_DELAY, self._shutdown, f"handshake error: {reason}", True
        )

    def _crash(self, reason: str) -> None:
        """Input that crashes RabbitMQ's reader (`ReaderCrash`): the socket closes at once, silently."""
        log.error("closing AMQP connection %s (%s): %s", self.id, self.name, reason)
        self._out.clear()
        self._shutdown(reason)

    def close_channel(self, ch: Channel, err: AmqpError, culprit: tuple[int, int] = (0, 0)) -> None:
        """A soft error: channel.close with the error; the channel is gone once close-ok arrives."""
        log.warning(
            "channel error on connection %s (%s), channel %d: %d %s",
            self.id,
            self.name,
            ch.number,
            err.reply_code,
            err.reply_text,
        )
        class_id, method_id = culprit
        self.send_method(ch.number, M.close_payload(20, err.reply_code, err.reply_text, class_id, method_id))
        ch.closing = True
        ch.teardown()
        self.channels.pop(ch.number, None)
        self.closing_channels.add(ch.number)

    def channel_closed(self, ch: Channel) -> None:
        """Called by the channel after close (client-initiated) or close-ok (server-initiated)."""
        if self.channels.get(ch.number) is ch:
            del self.channels[ch.number]
            ch.teardown()
        self.closing_channels.discard(ch.number)

    def _teardown_channels(self) -> None:
        chans = list(self.channels.values())
        self.channels.clear()
        for ch in chans:
            ch.teardown()
        for q in self.exclusive_queues:
            if not q.deleted:
                q.vhost.delete_queue(q, reason="owner closed")
        self.exclusive_queues.clear()

    def _shutdown(self, reason: str, reset: bool = False) -> None:
        """Close the socket (after flushing pending output); `reset` aborts it with an RST instead."""
        if self.closed:
            return
        self.flush()
        self.closed = True
        self.state = "closed"
        for timer in (self._hb_timer, self._close_timer):
            if timer is not None:
                timer.cancel()
        self._teardown_channels()
        if reset:
            sock = self.transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
        self.transport.close()
        self.broker.connection_lost(self)
        log.info("connection %s closed: %s", self.id, reason)

    def connection_lost(self) -> None:
        """The socket went away (client vanished or we closed it)."""
        if not self.closed:
            if self.state == "running":
                log.warning("client unexpectedly closed TCP connection %s (%s)", self.id, self.name)
            self._out.clear()
            self.closed = True
            self.state = "closed"
            for timer in (self._hb_timer, self._close_timer):
                if timer is not None:
                    timer.cancel()
            self._teardown_channels()
            self.broker.connection_lost(self)

    # -- flow control -------------------------------------------------------------------------------

    def pause_writing(self) -> None:
        self.paused = True
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.paused = False
        self.transport.resume_reading()
        for ch in list(self.channels.values()):
            ch._kick_queues()

    # -- helpers for channels -----------------------------------------------------------------------

    def locked_error(self, q: Queue) -> AmqpError:
        return AmqpError(
            405,
            f"cannot obtain exclusive access to locked queue '{q.name}' in vhost '{q.vhost.name}'. "
            "It could be "
            "originally declared on another connection or the exclusive property value does not match that "
            "of the original declaration.",
        )

    def check_access(self, kind: str, resource: str, name: str) -> None:
        """rabbit_access_control:check_resource_access: 403 unless the user's `kind` regex
        (configure, write or read) in this vhost matches `name`."""
        self.broker.auth.check(self.user, self.vhost_name, kind, resource, name)

    def check_exclusive(self, q: Queue) -> None:
        if q.exclusive_owner is not None and q.exclusive_owner is not self:
            raise self.locked_error(q)
