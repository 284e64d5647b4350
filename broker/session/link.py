"""The connection's output, heartbeats and every way it closes (the I/O half of the adapter).

Error handling follows rabbit_reader: handshake errors close the socket silently after a delay (a
refused login and a refused connection.open excepted), hard errors send connection.close and wait
briefly for close-ok, soft errors close only the channel. A refused login and a fatal frame error
send what RabbitMQ sends, then stop reading and reset the socket after the same delay (rabbit_reader
sleeps ?SILENT_CLOSE_DELAY before its exit), so a client still writing reads the reason and a client
retrying a wrong password is slowed down. Every close for an internal error names class/method 0/0,
as a crashed RabbitMQ process reports.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import socket
import struct
from typing import TYPE_CHECKING

from amqpwire.errors import AmqpError, ReplyCode
from broker.entities.events import NO_EVENTS, Events
from broker.protocol.assembler import CommandAssembler
from broker.protocol.framing import HEARTBEAT_FRAME
from broker.protocol.handshake import Handshake
from broker.protocol.heartbeat import Beat, HeartbeatPolicy
from broker.protocol.methods import (
    close_payload,
    confirm_payload,
    content_frames,
    deliver_frame_parts,
    deliver_frames,
    get_ok_payload,
    method_frame,
    return_payload,
    shortstr,
)
from broker.session import announce
from broker.session.identity import ConnectionIdentity
from broker.session.ports import Transport

if TYPE_CHECKING:
    from broker.entities.message import StoredMessage
    from broker.entities.queues.catalog import Consumer, Queue
    from broker.entities.vhost import VHost
    from broker.session.channel import Channel
    from broker.session.ports import ChannelHandle, Scheduler, Server, Timer

__all__ = ["CLOSE_OK_TIMEOUT", "SILENT_CLOSE_DELAY", "Link", "Transport"]

log = logging.getLogger("hashbroker.connection")
_ids = itertools.count(1)
_channel_serials = itertools.count(1)
# After connection.close RabbitMQ 3.10.8 keeps reading (discarding all but close/close-ok) and
# resets the socket 30 s later if no close-ok came (observed with a raw socket).
CLOSE_OK_TIMEOUT = 30.0
#: connection.close-ok as a client sends it (a method frame on channel 0, class 10 method 51): what
#: ends the wait after a close the broker sent when the connection was already done for.
CLOSE_OK_FRAME = b"\x01\x00\x00\x00\x00\x00\x04\x00\x0a\x00\x33\xce"
SILENT_CLOSE_DELAY = 3.0  # rabbit_reader ?SILENT_CLOSE_DELAY (seconds): the default of the setting
_LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST
#: how many (channel, consumer, exchange, routing key) deliver frame parts a connection keeps;
#: past it the cache starts over (routing keys unique per message would otherwise grow it)
_DELIVER_PARTS_MAX = 1024
#: A delivery to a consumer that already holds more than PATIENT_BACKLOG unacknowledged deliveries
#: is not what that consumer waits for: it may wait up to DELIVERY_HOLD seconds for company, so a
#: stream of them reaches the client in a few writes instead of one per publisher read. (RabbitMQ's
#: writer gets the same effect by flushing only when its mailbox is empty; a client that wakes once
#: per write spends most of its CPU waking.) Small bodies only: for big ones the write is cheap
#: next to the copy. Consumers waiting with an empty backlog (RPC, prefetch 1) are never held.
PATIENT_BACKLOG = 64
PATIENT_BODY = 4096
DELIVERY_HOLD = 0.001
#: held output is written at once past this many pieces (8 per small delivery: 256 deliveries)
_HOLD_PIECES = 2048


class Link(ConnectionIdentity):
    """One client connection's state, output and closing; `Connection` adds the input side."""

    def __init__(self, broker: Server, transport: Transport, loop: Scheduler, handshake: Handshake) -> None:
        local = transport.get_extra_info("sockname")
        port = local[1] if isinstance(local, tuple) else broker.port  # the TLS listener's, for AMQPS
        super().__init__(handshake, transport.get_extra_info("peername"), f"{broker.host}:{port}")
        self.broker = broker
        self.transport = transport
        self.loop = loop
        self.id = next(_ids)
        # the broker's event hub (a test double of the Server port may have none)
        self.events: Events = getattr(broker, "events", NO_EVENTS)
        self.core = CommandAssembler(broker.settings.max_message_size)
        self._out = self.core.outbox
        self.vhost_obj: VHost = None  # type: ignore[assignment]  # set on connection.open
        self.channels: dict[int, Channel] = {}
        self.channel_pids: dict[int, str] = {}  # the open channels' made-up process ids (events)
        self.exclusive_queues: list[Queue] = []
        self.paused = False
        self.alarm_blocked = False  # a publisher under a resource alarm: its socket is not read
        self.flow_paused = False  # a publisher waiting for the store to catch up: not read either
        self.closed = False
        self.silent = False
        self._halted = False  # closed or silent: the rest of a read is ignored
        # while a close waits for the client's close-ok: the last bytes read, to spot one split
        # across reads (None: not waiting for one)
        self._close_ok_tail: bytes | None = None
        self._flush_scheduled = False
        self._hold: Timer | None = None  # held deliveries' flush (DELIVERY_HOLD)
        self._deliver_parts: dict[tuple[int, bytes, str, str], tuple[bytes, bytes]] = {}
        self._confirm_channels: set[ChannelHandle] = set()
        self._heartbeat: HeartbeatPolicy | None = None
        self._hb_timer: Timer | None = None
        self._close_timer: Timer | None = None
        self._hs_timer: Timer | None = None
        log.info("accepting AMQP connection %s (%s)", self.id, self.name)

    @property
    def recv_cnt(self) -> int:
        """Frames received (the assembler adds them up once per read)."""
        return self.core.frames_in

    def send_method(self, channel: int, payload: bytes) -> None:
        self._out.append(method_frame(channel, payload))
        self.send_cnt += 1
        self._schedule_flush()

    def send_deliver(
        self,
        channel: int,
        consumer_tag: bytes,
        delivery_tag: int,
        redelivered: bool,
        msg: StoredMessage,
        backlog: int = 0,
    ) -> None:
        """The frame bytes that do not change between one consumer's deliveries from one exchange
        and key are encoded once and kept (`_deliver_parts`): a consumer's deliveries mostly share them.
        `backlog` is what decides whether the write may wait (PATIENT_BACKLOG)."""
        key = (channel, consumer_tag, msg.exchange, msg.routing_key)
        cache = self._deliver_parts
        parts = cache.get(key)
        if parts is None:
            if len(cache) >= _DELIVER_PARTS_MAX:
                cache.clear()
            parts = cache[key] = deliver_frame_parts(*key)
        self.send_cnt += deliver_frames(
            parts, channel, delivery_tag, redelivered, msg.props, msg.body, self.frame_max, self._out
        )
        if self._flush_scheduled:
            return
        if backlog > PATIENT_BACKLOG and len(msg.body) <= PATIENT_BODY and len(self._out) < _HOLD_PIECES:
            if self._hold is None:
                self._hold = self.loop.call_later(DELIVERY_HOLD, self.flush)
            return
        self._flush_scheduled = True
        self.loop.call_soon(self.flush)

    def send_get_ok(
        self, channel: int, delivery_tag: int, redelivered: bool, message_count: int, msg: StoredMessage
    ) -> None:
        payload = get_ok_payload(
            delivery_tag, redelivered, shortstr(msg.exchange), shortstr(msg.routing_key), message_count
        )
        self._send_content(channel, payload, msg)

    def send_return(self, channel: int, reply_code: int, reply_text: str, msg: StoredMessage) -> None:
        payload = return_payload(reply_code, reply_text, shortstr(msg.exchange), shortstr(msg.routing_key))
        self._send_content(channel, payload, msg)

    def send_confirm(self, channel: int, ack: bool, seq: int, multiple: bool) -> None:
        self.send_method(channel, confirm_payload(ack, seq, multiple))

    def _send_content(self, channel: int, method_payload: bytes, msg: StoredMessage) -> None:
        """A method with a message: the one place a connection frames content."""
        out = self._out
        before = len(out)
        content_frames(channel, method_payload, msg.props, msg.body, self.frame_max, out)
        self.send_cnt += (len(out) - before) // 3
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self.flush)

    def want_flush_confirms(self, channel: ChannelHandle) -> None:
        self._confirm_channels.add(channel)
        self._schedule_flush()

    def flush(self) -> None:
        self._flush_scheduled = False
        if self._hold is not None:
            self._hold.cancel()
            self._hold = None
        if self._confirm_channels:
            chans = self._confirm_channels
            self._confirm_channels = set()
            for ch in chans:
                if ch.open:
                    ch.flush_confirms()
        if self._out and not self.closed:
            data = b"".join(self._out)
            self._out.clear()
            self.send_oct += len(data)
            self.transport.write(data)
        elif self._out:
            self._out.clear()

    def _heartbeat_tick(self) -> None:
        self._hb_timer = None
        policy = self._heartbeat
        if self.closed or policy is None:
            return
        beat = policy.tick(self.recv_oct, self.send_oct)
        if beat is Beat.DEAD and (self.alarm_blocked or self.flow_paused):  # unread on purpose, as RabbitMQ
            beat = Beat.SEND
        if beat is Beat.DEAD:
            log.error(
                "closing AMQP connection %s (%s): missed heartbeats from client, timeout: %ss",
                *(self.id, self.name, policy.interval),
            )
            self._out.clear()
            self._shutdown("missed heartbeats", reset=True)
            return
        if beat is Beat.SEND:
            self._out.append(HEARTBEAT_FRAME)
            self.send_cnt += 1
            self.flush()
            policy.sent_heartbeat(self.send_oct)
        self._hb_timer = self.loop.call_later(policy.period, self._heartbeat_tick)

    def fail(self, err: AmqpError, culprit: tuple[int, int], fatal: bool = False, detail: str = "") -> None:
        """A connection-level error: log it, send connection.close (when RabbitMQ would), close.

        `culprit` is the (class, method) the close names; 0/0 for every internal error. During
        the handshake (`Handshake.silent_errors`) RabbitMQ says nothing and closes after a delay.
        """
        log.error(
            "closing AMQP connection %s (%s, vhost: '%s', user: '%s'): %d %s%s",
            *(self.id, self.name, self.vhost_name, self.user, err.reply_code, err.reply_text, detail),
        )
        if self.handshake.silent_errors:
            self._silent_close(err.reply_text)
            return
        if self.core.closing or self.closed:
            return
        class_id, method_id = (0, 0) if err.reply_code == ReplyCode.INTERNAL_ERROR else culprit
        self._out.append(
            method_frame(0, close_payload(10, err.reply_code, err.reply_text, class_id, method_id))
        )
        self.core.connection_closing()
        self._teardown_channels()
        self.flush()
        if fatal:  # rabbit_reader:fatal_frame_error: a grace period for the close to reach the client
            self.close_later(err.reply_text, until_close_ok=True)
            return
        self._close_timer = self.loop.call_later(CLOSE_OK_TIMEOUT, self._shutdown, "close-ok timeout", True)

    def watch_for_close_ok(self, data: bytes) -> None:
        """Input during a close's wait: only a connection.close-ok matters (it ends the wait)."""
        tail = self._close_ok_tail
        if tail is None or self.closed:
            return
        seen = tail + data
        if CLOSE_OK_FRAME in seen:
            self._close_ok_tail = None
            self._shutdown("close-ok received", True)
            return
        self._close_ok_tail = seen[-(len(CLOSE_OK_FRAME) - 1) :]

    def _silent_close(self, reason: str) -> None:
        """rabbit_reader's handshake-error path: say nothing, wait, reset (see `close_later`)."""
        self.silent = True
        self._out.clear()
        self.close_later(f"handshake error: {reason}")

    def close_later(self, reason: str, *, until_close_ok: bool = False) -> None:
        """rabbit_reader's sleep before it exits: send what is pending, read nothing more, reset the
        socket after the server's `silent_close_delay` (RabbitMQ's ?SILENT_CLOSE_DELAY, 3 s).

        RabbitMQ sleeps so that a misbehaving client cannot retry in a tight loop and a client still
        writing can read the reason; its reader then exits with the peer's frames unread, which the
        kernel turns into a reset. Reading is paused, so whatever the client sends meanwhile stays
        in the kernel's socket buffer and costs the broker nothing. When a connection.close was
        sent (`until_close_ok`), the client's close-ok ends the wait at once, as on RabbitMQ
        (observed: a refused login answered with close-ok is reset immediately, an unanswered one
        after 3.00 s); input is then read only to spot that frame, and none of it is kept.
        """
        if self.closed:
            return
        self.flush()
        self._halted = True
        self._close_ok_tail = b"" if until_close_ok else None
        if not until_close_ok:
            self.transport.pause_reading()
        self._cancel_timers()
        delay = self.broker.settings.silent_close_delay
        self._close_timer = self.loop.call_later(delay, self._shutdown, reason, True)

    def close_channel(self, ch: ChannelHandle, err: AmqpError, culprit: tuple[int, int] = (0, 0)) -> None:
        """A soft error: channel.close with the error; the channel is gone once close-ok arrives."""
        log.warning(
            "channel error on connection %s (%s), channel %d: %d %s",
            *(self.id, self.name, ch.number, err.reply_code, err.reply_text),
        )
        class_id, method_id = (0, 0) if err.reply_code == ReplyCode.INTERNAL_ERROR else culprit
        self.send_method(ch.number, close_payload(20, err.reply_code, err.reply_text, class_id, method_id))
        ch.closing = True
        ch.teardown()
        self._announce_channel_closed(ch.number)
        self.channels.pop(ch.number, None)
        self.core.channel_closing(ch.number)

    def channel_closed(self, ch: ChannelHandle) -> None:
        """Called by the channel after close (client-initiated) or close-ok (server-initiated)."""
        if self.channels.get(ch.number) is ch:
            del self.channels[ch.number]
            ch.teardown()
            self._announce_channel_closed(ch.number)
        self.core.channel_closed(ch.number)

    def _teardown_channels(self) -> None:
        chans = list(self.channels.values())
        self.channels.clear()
        for ch in chans:
            ch.teardown()
            self._announce_channel_closed(ch.number)
        for q in self.exclusive_queues:
            if not q.deleted:
                q.vhost.delete_queue(q, reason="owner closed")
        self.exclusive_queues.clear()

    def _cancel_timers(self) -> None:
        for timer in (self._hb_timer, self._close_timer, self._hs_timer, self._hold):
            if timer is not None:
                timer.cancel()
        self._hb_timer = self._close_timer = self._hs_timer = self._hold = None

    def _shutdown(self, reason: str, reset: bool = False) -> None:
        """Close the socket (after flushing pending output); `reset` aborts it with an RST instead."""
        if self.closed:
            return
        self._end(reason)
        self._drop_socket(reset)

    def hang_up_after_close_ok(self, reason: str) -> None:
        """The client's connection.close was answered: the connection is over, but, as RabbitMQ's
        reader does, the socket is left for the client to close (observed on 3.10.8: still open,
        reset after 30 s when the client keeps it), so a client whose reader and writer are
        separate tasks sees the close in the order it does on RabbitMQ. Input is discarded."""
        if self.closed:
            return
        self._end(reason)
        self._close_timer = self.loop.call_later(CLOSE_OK_TIMEOUT, self._drop_socket, True)

    def _end(self, reason: str) -> None:
        self.flush()
        self.closed = self._halted = True
        self._cancel_timers()
        self._teardown_channels()
        self.broker.connection_lost(self)
        self._announce_closed()
        log.info("connection %s closed: %s", self.id, reason)

    def announce_channel_open(self, number: int) -> None:
        """channel.created for channel `number`, just opened (its pid is made here)."""
        node = self.broker.cluster.local
        pid = self.channel_pids[number] = announce.channel_pid(node, next(_channel_serials))
        self.events.emit(
            "channel.created",
            lambda: announce.channel_created(self, self.id, node, number, pid),
            actor=self.user,
        )

    def _announce_channel_closed(self, number: int) -> None:
        pid = self.channel_pids.pop(number, None)
        if pid is not None:
            self.events.emit("channel.closed", lambda: announce.channel_closed(pid), actor=self.user)

    def announce_consumer(self, kind: str, number: int, consumer: Consumer) -> None:
        """consumer.created or consumer.deleted on channel `number`."""
        pid = self.channel_pids.get(number, "")
        build = announce.consumer_created if kind == "consumer.created" else announce.consumer_deleted
        self.events.emit(kind, lambda: build(pid, consumer), actor=self.user)

    def _announce_closed(self) -> None:
        node = self.broker.cluster.local
        self.events.emit(
            "connection.closed", lambda: announce.connection_closed(self, self.id, node), acted=False
        )

    @property
    def pid(self) -> str:
        """The made-up process id events name this connection by (an exclusive queue's owner_pid)."""
        return announce.connection_pid(self.broker.cluster.local, self.id)

    def _drop_socket(self, reset: bool) -> None:
        if reset:
            sock = self.transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
        self.transport.close()

    def connection_lost(self) -> None:
        """The socket went away (client vanished or we closed it)."""
        self._cancel_timers()  # a socket left for the client to close: it did
        if not self.closed:
            if self.handshake.done and not self.core.closing:
                log.warning("client unexpectedly closed TCP connection %s (%s)", self.id, self.name)
            self._out.clear()
            self.closed = self._halted = True
            self._cancel_timers()
            self._teardown_channels()
            self.broker.connection_lost(self)
            self._announce_closed()

    def pause_writing(self) -> None:
        self.paused = True
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.paused = False
        if not self.alarm_blocked and not self.flow_paused:
            self.transport.resume_reading()
        for ch in list(self.channels.values()):
            ch.kick_queues()
