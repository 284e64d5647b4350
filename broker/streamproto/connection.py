"""One stream-protocol connection as a sans-I/O state machine (RabbitMQ 3.10.8's
`rabbit_stream_reader`): `receive_data(bytes)` in, `data_to_send()` out, the broker behind the
`StreamBroker` port, time from an injected clock (`tick()` runs the timers).

States follow the reader's gen_statem. Before `open` every frame must take the connection one
step along `TRANSITIONS`; any other frame (a second peer-properties, a heartbeat, a command that
needs an open connection, an authentication failure after its response) closes the socket without
a close frame, as RabbitMQ's invalid transition does, and each step has 10 seconds. RabbitMQ judges
the step after each TCP read rather than each frame; judging each frame gives the same outcome for
a client that waits for each answer (all the clients do) and does not depend on TCP segmentation.

Once open, the commands are answered with RabbitMQ's codes; a frame it does not parse gets a close
request (UNKNOWN_FRAME) and the connection waits up to 10 s for the close response; a frame its
parser crashes on drops the connection. Publishing is bounded by the connection's credits
(`initial_credits` messages not yet confirmed): at zero the connection stops reading
(`reading_paused`) until more than `credits_required_for_unblocking` came back, and while the
broker's resource alarm is on (for new publishers, the refusal of declare-publisher).
Deliveries are bounded by the subscriptions' credit (in chunks) and by the transport: while it is
not `writable` no chunk is read from the log.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar

from amqpwire.fields import FieldDecodeError, FieldTable
from broker.streamproto import chunk as C
from broker.streamproto import frames as F
from broker.streamproto.constants import (
    DEFAULT_CREDITS_REQUIRED_FOR_UNBLOCKING,
    DEFAULT_FRAME_MAX,
    DEFAULT_HEARTBEAT,
    DEFAULT_INITIAL_CREDITS,
    HARD_FRAME_LIMIT,
    NEGOTIATION_STEP_TIMEOUT,
    Code,
    Key,
)
from broker.streamproto.ports import AuthRefused, ChunkReader, Crashed, LoopbackOnly, StreamBroker, StreamLog

#: Output buffers this large are written as they are, not joined with the frames around them.
BIG_BUFFER = 16 * 1024


class State(Enum):
    TCP_CONNECTED = "tcp_connected"
    PEER_PROPERTIES_EXCHANGED = "peer_properties_exchanged"
    AUTHENTICATING = "authenticating"
    TUNING = "tuning"
    TUNED = "tuned"
    OPEN = "open"
    CLOSE_SENT = "close_sent"
    CLOSED = "closed"


class Step(Enum):
    """What a frame before `open` achieved (the reader's connection_step)."""

    PEER_PROPERTIES_EXCHANGED = "peer_properties_exchanged"
    AUTHENTICATING = "authenticating"
    AUTHENTICATED = "authenticated"
    TUNED = "tuned"
    OPENED = "opened"
    FAILURE = "failure"
    UNCHANGED = "unchanged"


#: The handshake: (state, step a frame achieved) -> next state; anything else closes the socket.
TRANSITIONS: dict[tuple[State, Step], State] = {
    (State.TCP_CONNECTED, Step.PEER_PROPERTIES_EXCHANGED): State.PEER_PROPERTIES_EXCHANGED,
    (State.PEER_PROPERTIES_EXCHANGED, Step.AUTHENTICATING): State.AUTHENTICATING,
    (State.AUTHENTICATING, Step.AUTHENTICATED): State.TUNING,
    (State.TUNING, Step.TUNED): State.TUNED,
    (State.TUNING, Step.OPENED): State.OPEN,
    (State.TUNED, Step.OPENED): State.OPEN,
}
_TIMED = frozenset(
    {
        State.TCP_CONNECTED,
        State.PEER_PROPERTIES_EXCHANGED,
        State.AUTHENTICATING,
        State.TUNING,
        State.TUNED,
        State.CLOSE_SENT,
    }
)


@dataclass(frozen=True, slots=True)
class Config:
    frame_max: int = DEFAULT_FRAME_MAX
    heartbeat: int = DEFAULT_HEARTBEAT
    initial_credits: int = DEFAULT_INITIAL_CREDITS
    credits_required_for_unblocking: int = DEFAULT_CREDITS_REQUIRED_FOR_UNBLOCKING
    step_timeout: float = NEGOTIATION_STEP_TIMEOUT
    frame_limit: int = HARD_FRAME_LIMIT


@dataclass(slots=True)
class Publisher:
    publisher_id: int
    stream: str
    reference: str | None
    log: StreamLog
    published: int = 0
    confirmed: int = 0
    errored: int = 0


@dataclass(slots=True)
class Subscription:
    """A subscription: where it reads, its credit (in chunks), the properties it was made with
    (`all_chunks`: chunk_selector=all, every chunk with its trailer)."""

    subscription_id: int
    stream: str
    log: StreamLog
    reader: ChunkReader
    credit: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    all_chunks: bool = False
    consumed: int = 0  # records sent
    offset: int = 0  # the first offset of the last chunk sent

    @property
    def committed_offset(self) -> int:
        """The stream's last committed offset (a consumer's lag is measured against it)."""
        return self.log.committed_offset


@dataclass(slots=True)
class _Heartbeat:
    interval: float
    last_sent: float
    last_received: float


def _plain(data: bytes | None) -> tuple[str, str] | None:
    """rabbit_auth_mechanism_plain: `\\0user\\0password`, nothing more."""
    if not data or data[0] != 0:
        return None
    user_end = data.find(b"\0", 1)
    if user_end < 0:
        return None
    user, rest = data[1:user_end], data[user_end:]
    if rest[:1] != b"\0" or b"\0" in rest[1:]:
        return None
    return user.decode("utf-8", "surrogateescape"), rest[1:].decode("utf-8", "surrogateescape")


def _amqplain(data: bytes | None) -> tuple[str, str] | None:
    try:
        table = FieldTable.decode(data or b"")
    except (FieldDecodeError, ValueError):
        raise Crashed("AMQPLAIN response is no table") from None
    login, password = table.get("LOGIN"), table.get("PASSWORD")
    if login is None or password is None or login.type != "longstr" or password.type != "longstr":
        return None
    return bytes(login.value).decode("utf-8", "surrogateescape"), bytes(password.value).decode(
        "utf-8", "surrogateescape"
    )


class StreamConnection:
    """The protocol state of one client connection."""

    def __init__(
        self,
        broker: StreamBroker,
        *,
        peer_host: str,
        config: Config | None = None,
        clock: Callable[[], float] = time.monotonic,
        peer_port: int = 0,
        host: str = "",
        port: int = 0,
        connected_at: int = 0,
    ) -> None:
        self.broker = broker
        self.peer_host = peer_host
        self.peer_port = peer_port
        self.host = host  # the listener's address the client reached
        self.port = port
        self.connected_at = connected_at  # ms since the epoch
        # socket counters, as RabbitMQ's connection stats: reads and bytes in, writes and bytes out
        self.recv_cnt = self.recv_oct = self.send_cnt = self.send_oct = 0
        self.config = config or Config()
        self.clock = clock
        self.state = State.TCP_CONNECTED
        self.state_since = clock()
        self.client_properties: dict[str, str] = {}
        self.user: object | None = None
        self.username = ""
        self.vhost = ""
        self.auth_mechanism = ""
        self.frame_max = self.config.frame_max
        self.heartbeat: int | None = None
        self.publishers: dict[int, Publisher] = {}
        self.publisher_ids: dict[tuple[str, str], int] = {}
        self.subscriptions: dict[int, Subscription] = {}
        self.credits = self.config.initial_credits
        self.blocked = False
        self.resource_alarm = False
        self.writable = True
        self.close_reason = ""
        self._decoder = F.FrameDecoder(self.config.frame_limit)
        self._out: list[bytes] = []
        self._leaders: dict[str, StreamLog] = {}
        self._monitors: dict[str, StreamLog] = {}
        self._hb: _Heartbeat | None = None
        self._close_corr = 1
        #: Called when output is queued outside `receive_data` (a confirm, new chunks for a
        #: subscription, a deleted stream): the I/O side flushes then.
        self.on_output: Callable[[], None] | None = None
        #: Called after each chunk queued for a subscription: the I/O side may write the output
        #: at once (and call `set_writable(False)` when its buffer is full, which stops the
        #: sending), so the client gets the first chunk (and a subscribe's response) without
        #: waiting for the store to read all the chunks its credit allows.
        self.on_chunk: Callable[[], None] | None = None

    # -- I/O side ---------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """The socket is to be closed once `data_to_send()` is written."""
        return self.state is State.CLOSED

    @property
    def name(self) -> str:
        """As RabbitMQ names a connection: "peer host:port -> listener host:port"."""
        return f"{self.peer_host}:{self.peer_port} -> {self.host}:{self.port}"

    @property
    def is_open(self) -> bool:
        """Listed by the management API: the handshake is over and no close is under way."""
        return self.state is State.OPEN

    @property
    def reading_paused(self) -> bool:
        return self.blocked and self.state is State.OPEN

    def data_to_send(self) -> bytes:
        return b"".join(self.buffers_to_send())

    def buffers_to_send(self) -> list[bytes]:
        """What to write, in order, as `data_to_send` would give it: the frames joined, except
        a chunk's entry section of `BIG_BUFFER` bytes or more, which comes as its own buffer
        (the bytes the log holds), so that writing a chunk copies it no more than the socket
        needs."""
        out = self._out
        if not out:
            return []
        self._out = []
        size = 0
        bufs: list[bytes] = []
        small: list[bytes] = []
        for b in out:
            size += len(b)
            if len(b) < BIG_BUFFER:
                small.append(b)
                continue
            if small:
                bufs.append(b"".join(small))  # one exact bytes object is returned as it is
                small = []
            bufs.append(b)
        if small:
            bufs.append(b"".join(small))
        self.send_cnt += 1
        self.send_oct += size
        if self._hb is not None and size:
            self._hb.last_sent = self.clock()
        return bufs

    def _send(self, cmd: F.Command) -> None:
        self._out.append(cmd.to_bytes())
        self._wake()

    def _wake(self) -> None:
        if self.on_output is not None:
            self.on_output()

    def receive_data(self, data: bytes) -> None:
        if self.state is State.CLOSED:
            return
        self.recv_cnt += 1
        self.recv_oct += len(data)
        if self._hb is not None:
            self._hb.last_received = self.clock()
        self._decoder.feed(data)
        try:
            for body in self._decoder.frames():
                if self.state is State.CLOSED:
                    return
                self._handle(body)
        except F.FrameTooLargeError as e:
            self._frame_too_large(e.size)
            return
        if self.state is State.OPEN:
            self._after_batch()

    def connection_lost(self) -> None:
        """The socket closed: stop listening to the streams."""
        for log in list(self._monitors.values()):
            log.unlisten(self)
        self._monitors.clear()
        self._leaders.clear()
        self.state = State.CLOSED

    def set_writable(self, writable: bool) -> None:
        """The transport's buffer went above (False) or below (True) its high-water mark."""
        self.writable = writable
        if writable and self.state is State.OPEN:
            for sub in list(self.subscriptions.values()):
                self._send_chunks(sub)

    def set_resource_alarm(self, on: bool) -> None:
        self.resource_alarm = on
        if self.state is State.OPEN:
            self.blocked = True if on else not self._enough_credits()

    def tick(self) -> None:
        """Run the timers: handshake step and close-response timeouts, heartbeats."""
        now = self.clock()
        if self.state in _TIMED and now - self.state_since >= self.config.step_timeout:
            self._close_now(f"timeout in state {self.state.value}")
            return
        hb = self._hb
        if hb is None or self.state not in (State.OPEN, State.TUNED, State.TUNING):
            return
        if now - hb.last_received >= 2 * hb.interval:
            self._close_now("missed heartbeats")
            return
        if now - hb.last_sent >= hb.interval / 2 and not self._out:
            self._send(F.Heartbeat())

    def force_close(self, reason: str) -> None:
        """Drop the connection without a close frame, as RabbitMQ 3.10.8 does when the management
        API deletes it: the socket closes at the I/O side's next flush."""
        self._close_now(reason)
        self._wake()

    def _close_now(self, reason: str) -> None:
        self.close_reason = self.close_reason or reason
        if self.state is not State.CLOSED:
            self.connection_lost()

    def _enter(self, state: State) -> None:
        self.state = state
        self.state_since = self.clock()

    # -- dispatch ---------------------------------------------------------------------------

    def _handle(self, body: memoryview) -> None:
        cmd = F.parse(body)
        if isinstance(cmd, F.Crash):
            self._close_now(f"crash: {cmd.reason}")
            return
        state = self.state
        if state is State.OPEN:
            self._open_frame(cmd)
        elif state is State.CLOSE_SENT:
            if isinstance(cmd, F.CodeResponse) and cmd.request_key == Key.CLOSE:
                self._close_now("close confirmed")
        else:
            try:
                step = self._pre_open(cmd)
            except Crashed as e:
                self._close_now(str(e))
                return
            nxt = TRANSITIONS.get((state, step))
            if nxt is None:
                self._close_now(f"invalid transition from {state.value} ({step.value})")
                return
            self._enter(nxt)
            if nxt is State.TUNING:
                self._send(F.Tune(self.config.frame_max, self.config.heartbeat))

    def _frame_too_large(self, size: int) -> None:
        if self.state is State.OPEN:
            self._send(F.Close(self._close_corr, Code.FRAME_TOO_LARGE, "frame too large"))
            self._enter(State.CLOSE_SENT)
            self._decoder = F.FrameDecoder(self.config.frame_limit)
        else:
            self._close_now(f"frame of {size} bytes")

    # -- before open ------------------------------------------------------------------------

    def _pre_open(self, cmd: F.Command) -> Step:
        if isinstance(cmd, F.PeerProperties):
            props = dict(sorted(self.broker.server_properties().items()))
            self._send(F.PeerPropertiesResponse(cmd.corr, Code.OK, props))
            self.client_properties = dict(cmd.properties)
            return Step.PEER_PROPERTIES_EXCHANGED
        if isinstance(cmd, F.SaslHandshake):
            self._send(F.SaslHandshakeResponse(cmd.corr, Code.OK, tuple(self.broker.auth_mechanisms())))
            return Step.AUTHENTICATING
        if isinstance(cmd, F.SaslAuthenticate):
            return self._authenticate(cmd)
        if isinstance(cmd, F.Tune):
            self.frame_max = cmd.frame_max
            self.heartbeat = cmd.heartbeat
            if cmd.heartbeat > 0:
                now = self.clock()
                self._hb = _Heartbeat(float(cmd.heartbeat), now, now)
            return Step.TUNED
        if isinstance(cmd, F.Open):
            if self.user is None or not self.broker.check_vhost_access(self.user, cmd.vhost, self.peer_host):
                self._send(F.CodeResponse(cmd.corr, Code.VHOST_ACCESS_FAILURE, Key.OPEN))
                return Step.FAILURE
            host, port = self.broker.advertised_endpoint()
            props = {"advertised_port": str(port), "advertised_host": host}
            self._send(F.OpenResponse(cmd.corr, Code.OK, props))
            self.vhost = cmd.vhost
            self.resource_alarm = self.broker.resource_alarm()
            self.blocked = self.resource_alarm
            return Step.OPENED
        if isinstance(cmd, F.Heartbeat):
            return Step.UNCHANGED
        return Step.FAILURE

    def _authenticate(self, cmd: F.SaslAuthenticate) -> Step:
        mechanisms = self.broker.auth_mechanisms()
        if cmd.mechanism not in mechanisms:
            self._send(F.SaslAuthenticateResponse(cmd.corr, Code.SASL_MECHANISM_NOT_SUPPORTED))
            return Step.FAILURE
        self.auth_mechanism = cmd.mechanism
        creds = _plain(cmd.data) if cmd.mechanism == "PLAIN" else _amqplain(cmd.data)
        if creds is None:
            self._send(F.SaslAuthenticateResponse(cmd.corr, Code.SASL_ERROR))
            return Step.FAILURE
        try:
            self.user = self.broker.authenticate(creds[0], creds[1], self.peer_host)
        except AuthRefused:
            self._send(F.SaslAuthenticateResponse(cmd.corr, Code.AUTHENTICATION_FAILURE))
            return Step.FAILURE
        except LoopbackOnly:
            self._send(F.SaslAuthenticateResponse(cmd.corr, Code.SASL_AUTHENTICATION_FAILURE_LOOPBACK))
            return Step.FAILURE
        self.username = creds[0]
        self._send(F.SaslAuthenticateResponse(cmd.corr, Code.OK))
        return Step.AUTHENTICATED

    # -- open -------------------------------------------------------------------------------

    def _open_frame(self, cmd: F.Command) -> None:
        handler = self._HANDLERS.get(type(cmd))
        if handler is None:
            self._send(F.Close(self._close_corr, Code.UNKNOWN_FRAME, "unknown frame"))
            self._enter(State.CLOSE_SENT)
            return
        try:
            handler(self, cmd)
        except Crashed as e:
            self._close_now(str(e))

    def _after_batch(self) -> None:
        """After a read: unblock when enough credits came back, block when none are left."""
        if self.blocked:
            if self._should_unblock():
                self.blocked = False
        elif self.credits <= 0:
            self.blocked = True

    def _enough_credits(self) -> bool:
        return self.credits > self.config.credits_required_for_unblocking

    def _should_unblock(self) -> bool:
        if not self.publishers:
            return True
        return not self.resource_alarm and self._enough_credits()

    def _permitted(self, stream: str, permission: str) -> bool:
        assert self.user is not None
        return self.broker.check_permission(self.user, self.vhost, stream, permission)  # type: ignore[arg-type]

    def _monitor(self, stream: str, log: StreamLog) -> None:
        if stream not in self._monitors:
            self._monitors[stream] = log
            log.listen(self)

    def _demonitor(self, stream: str) -> None:
        log = self._monitors.pop(stream, None)
        if log is not None:
            log.unlisten(self)

    def _lookup_leader(self, stream: str) -> StreamLog | None:
        log = self._leaders.get(stream)
        if log is None:
            log = self.broker.lookup(self.vhost, stream)
            if log is None:
                return None
            self._monitor(stream, log)
            self._leaders[stream] = log
        return log

    def _maybe_clean(self, stream: str) -> None:
        """No publisher and no subscription left on `stream`: stop watching it."""
        has_pub = any(p.stream == stream for p in self.publishers.values())
        has_sub = any(s.stream == stream for s in self.subscriptions.values())
        if not has_pub and not has_sub:
            self._demonitor(stream)
        self._leaders.pop(stream, None)

    def _clean_after_deletion(self, stream: str) -> bool:
        subs = [i for i, s in self.subscriptions.items() if s.stream == stream]
        pubs = [i for i, p in self.publishers.items() if p.stream == stream]
        for i in subs:
            del self.subscriptions[i]
        for i in pubs:
            p = self.publishers.pop(i)
            self.publisher_ids.pop((stream, p.reference or ""), None)
        had_leader = self._leaders.pop(stream, None) is not None
        cleaned = bool(subs or pubs or had_leader)
        if cleaned:
            self._demonitor(stream)
        return cleaned

    # -- listener (the streams call these) --------------------------------------------------

    def stream_grew(self, log: StreamLog) -> None:
        if self.state is not State.OPEN:
            return
        for sub in reversed(list(self.subscriptions.values())):  # the newest first, as RabbitMQ
            if sub.log is log and sub.credit > 0:
                self._send_chunks(sub)

    def stream_deleted(self, log: StreamLog) -> None:
        stream = log.name
        if self._monitors.get(stream) is not log:
            return
        if self._clean_after_deletion(stream) and self.state is State.OPEN:
            self._send(F.MetadataUpdate(Code.STREAM_NOT_AVAILABLE, stream))

    def _confirmed(self, publisher_id: int, ids: list[int]) -> None:
        """A chunk committed: confirm to its publisher (if still declared), return the credits."""
        if self.state is State.CLOSED:
            return
        pub = self.publishers.get(publisher_id)
        if pub is not None:
            pub.confirmed += len(ids)
            self._send(F.PublishConfirm(publisher_id, tuple(ids)))
        self.credits += len(ids)
        if self.blocked and self._should_unblock():
            self.blocked = False

    # -- commands ---------------------------------------------------------------------------

    def _declare_publisher(self, cmd: F.DeclarePublisher) -> None:
        def reply(code: int) -> None:
            self._send(F.CodeResponse(cmd.corr, code, Key.DECLARE_PUBLISHER))

        if self.resource_alarm:
            reply(Code.PRECONDITION_FAILED)
            return
        if not self._permitted(cmd.stream, "write"):
            reply(Code.ACCESS_REFUSED)
            return
        if cmd.publisher_id in self.publishers or (cmd.stream, cmd.reference) in self.publisher_ids:
            reply(Code.PRECONDITION_FAILED)
            return
        log = self._lookup_leader(cmd.stream)
        if log is None:
            reply(Code.STREAM_DOES_NOT_EXIST)
            return
        reference = cmd.reference or None
        if reference is not None:
            self.publisher_ids[(cmd.stream, reference)] = cmd.publisher_id
        self.publishers[cmd.publisher_id] = Publisher(cmd.publisher_id, cmd.stream, reference, log)
        reply(Code.OK)

    def _publish(self, cmd: F.Publish) -> None:
        pub = self.publishers.get(cmd.publisher_id)
        if pub is None:
            ids = tuple(self._entries(cmd).ids)
            self._send(F.PublishError(cmd.publisher_id, Code.PUBLISHER_DOES_NOT_EXIST, ids))
            return
        pub.published += cmd.count
        entries = self._entries(cmd)
        if not self._permitted(pub.stream, "write"):
            self._send(F.PublishError(cmd.publisher_id, Code.ACCESS_REFUSED, tuple(entries.ids)))
            pub.errored += cmd.count
            return
        self.credits -= cmd.count
        pid = cmd.publisher_id
        pub.log.append(entries, pub.reference, lambda ids: self._confirmed(pid, ids))

    @staticmethod
    def _entries(cmd: F.Publish) -> F.Published:
        try:
            return cmd.entries()
        except F.CrashError as e:
            raise Crashed(f"malformed publish: {e}") from None

    def _query_publisher_sequence(self, cmd: F.QueryPublisherSequence) -> None:
        code, seq = Code.OK, 0
        if not self._permitted(cmd.stream, "read"):
            code = Code.ACCESS_REFUSED
        else:
            log = self.broker.lookup(self.vhost, cmd.stream)
            if log is None:
                code = Code.STREAM_DOES_NOT_EXIST
            else:
                seq = log.writer_sequence(cmd.reference) or 0
        self._send(F.QueryPublisherSequenceResponse(cmd.corr, code, seq))

    def _delete_publisher(self, cmd: F.DeletePublisher) -> None:
        pub = self.publishers.pop(cmd.publisher_id, None)
        if pub is not None:
            self.publisher_ids.pop((pub.stream, pub.reference or ""), None)
        self._ended(cmd.corr, Key.DELETE_PUBLISHER, pub, Code.PUBLISHER_DOES_NOT_EXIST)

    def _ended(self, corr: int, key: Key, gone: Publisher | Subscription | None, missing: int) -> None:
        """Answer the removal of a publisher or a subscription (`missing`: the code when there was
        none); the stream stops being watched when that was its last use."""
        if gone is None:
            self._send(F.CodeResponse(corr, missing, key))
            return
        self._maybe_clean(gone.stream)
        self._send(F.CodeResponse(corr, Code.OK, key))

    def _subscribe(self, cmd: F.Subscribe) -> None:
        def reply(code: int) -> None:
            self._send(F.CodeResponse(cmd.corr, code, Key.SUBSCRIBE))

        if not self._permitted(cmd.stream, "read"):
            reply(Code.ACCESS_REFUSED)
            return
        log = self.broker.lookup(self.vhost, cmd.stream)
        if log is None:
            reply(Code.STREAM_DOES_NOT_EXIST)
            return
        if cmd.subscription_id in self.subscriptions:
            reply(Code.SUBSCRIPTION_ID_ALREADY_EXISTS)
            return
        reader = log.reader(cmd.offset)
        self._monitor(cmd.stream, log)
        reply(Code.OK)
        selector = cmd.properties.get("chunk_selector", "user_data")
        if selector not in ("user_data", "all"):
            raise Crashed(f"chunk selector {selector}")
        sub = Subscription(
            cmd.subscription_id,
            cmd.stream,
            log,
            reader,
            credit=cmd.credit,
            properties=dict(cmd.properties),
            all_chunks=selector == "all",
        )
        self.subscriptions[cmd.subscription_id] = sub
        self._send_chunks(sub)

    def _send_chunks(self, sub: Subscription) -> None:
        """osiris send_file: whole chunks while the subscription has credit (user chunks only,
        without their trailer, unless it asked for `chunk_selector=all`)."""
        while sub.credit > 0 and self.writable and self.subscriptions.get(sub.subscription_id) is sub:
            ch = sub.reader.next_chunk()
            if ch is None:
                return
            if ch.chunk_type != C.USER and not sub.all_chunks:
                continue
            head, data = ch.header(), ch.data
            trailer = ch.trailer if sub.all_chunks else b""
            out = self._out
            out.append(F.deliver_header(sub.subscription_id, len(head) + len(data) + len(trailer)))
            out.append(head)
            out.append(data)
            if trailer:
                out.append(trailer)
            sub.credit -= 1
            sub.consumed += ch.num_records
            sub.offset = ch.first_offset
            if self.on_chunk is not None:
                self.on_chunk()
            else:
                self._wake()

    def _credit(self, cmd: F.Credit) -> None:
        sub = self.subscriptions.get(cmd.subscription_id)
        if sub is None:
            self._send(F.CreditResponse(Code.SUBSCRIPTION_ID_DOES_NOT_EXIST, cmd.subscription_id))
            return
        sub.credit += cmd.credit
        self._send_chunks(sub)

    def _store_offset(self, cmd: F.StoreOffset) -> None:
        if not self._permitted(cmd.stream, "write"):
            return
        log = self._lookup_leader(cmd.stream)
        if log is not None:
            log.store_offset(cmd.reference, cmd.offset)

    def _query_offset(self, cmd: F.QueryOffset) -> None:
        code, offset = Code.OK, 0
        if not self._permitted(cmd.stream, "read"):
            code = Code.ACCESS_REFUSED
        else:
            log = self._lookup_leader(cmd.stream)
            if log is None:
                code = Code.STREAM_DOES_NOT_EXIST
            else:
                stored = log.query_offset(cmd.reference)
                if stored is None:
                    code = Code.NO_OFFSET
                else:
                    offset = stored
        self._send(F.QueryOffsetResponse(cmd.corr, code, offset))

    def _unsubscribe(self, cmd: F.Unsubscribe) -> None:
        sub = self.subscriptions.pop(cmd.subscription_id, None)
        self._ended(cmd.corr, Key.UNSUBSCRIBE, sub, Code.SUBSCRIPTION_ID_DOES_NOT_EXIST)

    def _create_stream(self, cmd: F.CreateStream) -> None:
        name = cmd.stream.replace("\n", "").replace("\r", "")
        if not name or name.startswith("amq."):
            code: int = Code.PRECONDITION_FAILED
        elif not self._permitted(name, "configure"):
            code = Code.ACCESS_REFUSED
        else:
            assert self.user is not None
            code = self.broker.create_stream(self.user, self.vhost, name, cmd.arguments)
        self._send(F.CodeResponse(cmd.corr, code, Key.CREATE_STREAM))

    def _delete_stream(self, cmd: F.DeleteStream) -> None:
        if not self._permitted(cmd.stream, "configure"):
            self._send(F.CodeResponse(cmd.corr, Code.ACCESS_REFUSED, Key.DELETE_STREAM))
            return
        assert self.user is not None
        log = self._monitors.get(cmd.stream)
        code = self.broker.delete_stream(self.user, self.vhost, cmd.stream)
        self._send(F.CodeResponse(cmd.corr, code, Key.DELETE_STREAM))
        if code == Code.OK and log is not None and self._clean_after_deletion(cmd.stream):
            self._send(F.MetadataUpdate(Code.STREAM_NOT_AVAILABLE, cmd.stream))

    def _metadata(self, cmd: F.Metadata) -> None:
        host, port = self.broker.advertised_endpoint()
        found = {name: self.broker.lookup(self.vhost, name) is not None for name in cmd.streams}
        brokers = (F.Broker(0, host, port),) if any(found.values()) else ()
        metas = tuple(
            F.StreamMetadata(name, Code.OK, 0, ())
            if ok
            else F.StreamMetadata(name, Code.STREAM_DOES_NOT_EXIST)
            for name, ok in sorted(found.items(), reverse=True)
        )
        self._send(F.MetadataResponse(cmd.corr, brokers, metas))

    def _route(self, cmd: F.Route) -> None:
        streams = self.broker.route(self.vhost, cmd.super_stream, cmd.routing_key)
        code = Code.OK if streams is not None else Code.STREAM_DOES_NOT_EXIST
        self._send(F.StreamsResponse(cmd.corr, code, tuple(streams or ()), Key.ROUTE))

    def _partitions(self, cmd: F.Partitions) -> None:
        streams = self.broker.partitions(self.vhost, cmd.super_stream)
        code = Code.OK if streams is not None else Code.STREAM_DOES_NOT_EXIST
        self._send(F.StreamsResponse(cmd.corr, code, tuple(streams or ()), Key.PARTITIONS))

    def _close(self, cmd: F.Close) -> None:
        self._send(F.CodeResponse(cmd.corr, Code.OK, Key.CLOSE))
        self.close_reason = f"closed by the client: {cmd.code} {cmd.reason}"
        self._close_now(self.close_reason)

    def _heartbeat(self, cmd: F.Heartbeat) -> None:
        """Nothing to answer: receiving it reset the heartbeat timer."""

    #: The commands an open connection answers; any other frame is an unknown frame.
    _HANDLERS: ClassVar[dict[type, Callable[..., None]]] = {
        F.DeclarePublisher: _declare_publisher,
        F.Publish: _publish,
        F.QueryPublisherSequence: _query_publisher_sequence,
        F.DeletePublisher: _delete_publisher,
        F.Subscribe: _subscribe,
        F.Credit: _credit,
        F.StoreOffset: _store_offset,
        F.QueryOffset: _query_offset,
        F.Unsubscribe: _unsubscribe,
        F.CreateStream: _create_stream,
        F.DeleteStream: _delete_stream,
        F.Metadata: _metadata,
        F.Route: _route,
        F.Partitions: _partitions,
        F.Close: _close,
        F.Heartbeat: _heartbeat,
    }
