"""The connection adapter: runs the sans-I/O protocol core with the event loop and the transport.

Bytes from the socket go into `CommandAssembler`; each command it yields is dispatched through one
table (`_events` for channel 0, channel.open and the assembler's verdicts, `channel.DISPATCH` for
channel methods); the handshake's actions are performed by `_actions`. Error handling follows
rabbit_reader: handshake errors close the socket silently after a delay (a refused login and a
refused connection.open excepted; a refused login and a fatal frame error are closed after the same
delay, once their reason is sent), hard errors send connection.close and wait briefly for
close-ok, soft errors close only the channel (`broker.session.link`), and anything unexpected
becomes one log line and a 541 INTERNAL_ERROR connection.close (class/method 0/0, as a crashed
RabbitMQ process reports).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from amqpwire.errors import AmqpError, ReplyCode, channel_error, command_invalid, internal_error, not_allowed
from broker.entities.events import count_auth_attempt
from broker.protocol import commands as C
from broker.protocol import handshake as H
from broker.protocol import replies
from broker.protocol.assembler import (
    PUBLISH,
    PUBLISH_IDS,
    PUBLISH_RUN,
    Crash,
    FrameFailure,
    ProtocolHeader,
)
from broker.protocol.heartbeat import HeartbeatPolicy
from broker.session import announce
from broker.session.identity import server_properties
from broker.session.link import CLOSE_OK_TIMEOUT, SILENT_CLOSE_DELAY, Link, Transport

if TYPE_CHECKING:
    from broker.session.channel import Channel
    from broker.session.ports import Scheduler, Server

log = logging.getLogger("hashbroker.connection")


#: `broker.session.channel.DISPATCH` once the first channel opens: the channel and its parts
#: load then, so an idle broker and connections that never open a channel do not carry it.
_dispatch: dict[type, Any] = {}
_PUBLISHES = (PUBLISH, PUBLISH_RUN)


def _channel_class() -> type[Channel]:
    global _dispatch
    from broker.session.channel import DISPATCH, Channel

    _dispatch = DISPATCH
    return Channel


class Connection(Link):
    """The adapter: feeds the transport's bytes to the protocol core and dispatches its commands."""

    def __init__(
        self,
        broker: Server,
        transport: Transport,
        loop: Scheduler,
        handshake_timeout: float = H.HANDSHAKE_TIMEOUT,
        mechanisms: H.Mechanisms = H.PASSWORD_MECHANISMS,
        peer_login: H.PeerLogin | None = None,
        tls_info: Mapping[str, str | None] | None = None,
    ) -> None:
        s = broker.settings
        hs = H.Handshake(
            server_properties(broker.cluster.local),
            channel_max=s.channel_max,
            frame_max=s.frame_max,
            heartbeat=s.heartbeat,
            timeout=handshake_timeout,
            mechanisms=mechanisms,
        )
        super().__init__(broker, transport, loop, hs)
        self.peer_login = peer_login
        """Who the TLS peer certificate names, for the EXTERNAL mechanism (None: not TLS)."""
        self.tls_info = tls_info
        """The connection's TLS details (protocol, cipher, peer certificate) as the management API
        shows them; None: not TLS."""
        self._run(hs.begin())

    @property
    def state(self) -> str:
        if self.closed:
            return "closed"
        if self.silent:
            return "silent"
        if self.alarm_blocked:
            return "blocked"
        if self.flow_paused:
            return "flow"
        if self.core.closing:
            return "closing"
        return self.handshake.state.replace("awaiting_header", "handshake")

    def data_received(self, data: bytes) -> None:
        if self._halted:
            self.watch_for_close_ok(data)
            return
        self.recv_oct += len(data)
        core = self.core
        channels = self.channels
        dispatch = _dispatch.get
        alarms = self.broker.alarms
        alarm = alarms.blocked_by  # empty while no resource alarm is set
        held = alarm or alarms.flow  # truthy while publishers must wait
        published = False
        events = self.events
        actor = events.actor
        events.actor = self.user or actor  # who the commands of this read are from
        try:
            core.receive_data(data)
            for number, command in core.events(True):
                ch = channels.get(number)  # channel 0 is never in the table
                if ch is not None:
                    if held and type(command) in _PUBLISHES:
                        published = True
                    handler = dispatch(type(command))
                    try:
                        if handler is None:
                            # the first channel opened in this same read loaded the table
                            handler = _dispatch.get(type(command))
                            dispatch = _dispatch.get
                        if handler is None:
                            raise command_invalid("unimplemented method")
                        handler(ch, command)
                    except AmqpError as err:
                        self._failed(err, command, ch)
                else:
                    try:
                        event = self._events.get(type(command))
                        if event is None:
                            self._handshake_method(number, command)
                        else:
                            event(self, number, command)
                    except AmqpError as err:
                        self._failed(err, command, None)
                if self._halted:
                    events.actor = actor
                    return
        except Exception as exc:  # a bug here must cost one connection and one log line, no more
            log.debug("internal error on connection %s", self.id, exc_info=True)
            self.fail(internal_error(), (0, 0), detail=f" ({exc!r})")
        events.actor = actor
        if not self._halted:
            if alarm:
                if published or core.assembling_bytes:
                    self.alarm_block()
            elif alarms.flow and (not held or published or core.assembling_bytes):
                self.flow_pause()  # flow that began in this read began with this publisher's message
        self.flush()

    def alarm_block(self) -> None:
        """rabbit_reader's publish_received under an alarm: stop reading this publisher's socket
        (its consumers are still served) and say why when the client asked to be told."""
        if self.alarm_blocked:
            return
        self.alarm_blocked = True
        self.transport.pause_reading()
        self.send_blocked(self.broker.alarms.reason)

    def send_blocked(self, reason: str) -> None:
        if self.handshake.capability("connection.blocked"):
            self.send_method(0, replies.connection_blocked(reason))

    def alarm_unblock(self) -> None:
        """Every alarm cleared: connection.unblocked and read again (unless the socket's own
        write back-pressure still holds reading)."""
        if not self.alarm_blocked:
            return
        self.alarm_blocked = False
        if self.handshake.capability("connection.blocked"):
            self.send_method(0, replies.connection_unblocked())
        if not self.paused and not self.flow_paused and not self.closed:
            self.transport.resume_reading()

    def flow_pause(self) -> None:
        """The store is behind: stop reading this publisher's socket until it has caught up."""
        if not self.flow_paused:
            self.flow_paused = True
            self.transport.pause_reading()

    def flow_resume(self) -> None:
        self.flow_paused = False
        if not self.paused and not self.alarm_blocked and not self.closed:
            self.transport.resume_reading()

    def _failed(self, err: AmqpError, command: Any, ch: Channel | None) -> None:
        """Close the channel (soft error) or the connection for an error a command raised."""
        if not err.in_method or err.reply_code == ReplyCode.INTERNAL_ERROR:
            culprit = (0, 0)
        else:
            culprit = PUBLISH_IDS if type(command) in _PUBLISHES else C.IDS.get(type(command), (0, 0))
        if ch is not None and not err.hard and self.channels.get(ch.number) is ch:
            self.close_channel(ch, err, culprit)
        else:
            self.fail(err, culprit)

    def _on_header(self, number: int, header: ProtocolHeader) -> None:
        if not header.accepted:
            log.info("connection %s: bad protocol header, refused", self.id)
        self._run(self.handshake.protocol_header(header))

    def _on_frame_failure(self, number: int, failure: FrameFailure) -> None:
        ch = self.channels.get(failure.channel) if failure.channel else None
        err = failure.error
        if ch is not None and not err.hard:
            self.close_channel(ch, err, failure.culprit)
        else:
            self.fail(err, failure.culprit, fatal=failure.fatal)

    def _on_crash(self, number: int, crash: Crash) -> None:
        """Input that crashes RabbitMQ's reader: the socket is reset at once, silently (the crashed
        process's socket is closed with the peer's frames unread, which the kernel answers with a
        reset; observed on 3.10.8 with an unknown method id)."""
        log.error("closing AMQP connection %s (%s): %s", self.id, self.name, crash.reason)
        self._out.clear()
        self._shutdown(crash.reason, reset=True)

    def _on_channel_open(self, number: int, command: C.ChannelOpen) -> None:
        if number == 0:
            self._handshake_method(number, command)
            return
        self.channels[number] = _channel_class()(self, number)
        self.send_method(number, replies.channel_open_ok())
        self.announce_channel_open(number)

    def _on_close(self, number: int, command: C.ConnectionClose) -> None:
        self.send_method(0, replies.connection_close_ok())
        if self.core.closing:  # crossing closes: answer, keep waiting for our close-ok
            return
        log.info(
            "closing AMQP connection %s (%s, vhost: '%s', user: '%s')",
            *(self.id, self.name, self.vhost_name, self.user),
        )
        self.hang_up_after_close_ok("client closed")

    def _on_close_ok(self, number: int, command: C.ConnectionCloseOk) -> None:
        self._shutdown("close-ok")

    def _on_update_secret(self, number: int, command: C.ConnectionUpdateSecret) -> None:
        """RabbitMQ 3.10.8 with the internal auth backend keeps the user as is and answers
        update-secret-ok, whatever the new secret (observed with the right and a wrong password)."""
        if not self.handshake.done:
            self._handshake_method(number, command)
            return
        self.send_method(0, replies.connection_update_secret_ok())

    def _handshake_method(self, number: int, command: Any) -> None:
        if self.handshake.done or number:
            raise channel_error(f"unexpected method in connection state {self.handshake.state}")
        self._run(self.handshake.receive(command))

    def _run(self, actions: list[H.Action]) -> None:
        for action in actions:
            self._actions[type(action)](self, action)

    def _send(self, action: H.Send) -> None:
        self._out.append(action.data)
        self.send_cnt += 1

    def _login_refusal(self, action: H.Authenticate) -> tuple[str, str | None]:
        """The user logging in and why the login is refused (None: it is not)."""
        if action.mechanism == H.EXTERNAL:
            # rabbit_auth_mechanism_ssl: the certificate names the user, who needs no password
            login = self.peer_login or H.PeerLogin(None, "not a TLS-enabled connection")
            if login.user is None:
                return "", login.refusal or "no name found"
            user = login.user
            known = user in self.broker.auth.users
        else:
            user = action.username
            known = self.broker.auth.check_credentials(user, action.password)
        if not known:
            return user, f"user '{user}' - invalid credentials"
        if user in self.broker.settings.loopback_users and not self._is_loopback():
            return user, f"user '{user}' can only connect via localhost"
        return user, None

    def _authenticate(self, action: H.Authenticate) -> None:
        user, refusal = self._login_refusal(action)
        count_auth_attempt(self.events, "amqp091", refusal is None)
        self.events.emit(
            "user.authentication.success" if refusal is None else "user.authentication.failure",
            lambda: announce.login(self, user, refusal),
            acted=False,
        )
        if refusal is None:
            self.user = user
            self._run(self.handshake.authenticated(None))
            return
        log.error(
            "connection %s (%s): user '%s' login refused: %s login refused: %s",
            *(self.id, self.name, user, action.mechanism, refusal),
        )
        # rabbit_reader answers a refused login (403 when the client asked for it, else nothing),
        # then sleeps before it exits: the handshake's socket close happens after that delay
        told = False  # a 403 connection.close was sent (the client asked to be told)
        for step in self.handshake.authenticated(refusal):
            if isinstance(step, H.CloseSocket):
                self.close_later(step.reason, until_close_ok=told)
            else:
                self._actions[type(step)](self, step)
                told = True

    def _tuned(self, action: H.Tuned) -> None:
        self.frame_max, self.channel_max, self.heartbeat = action
        self.core.tuned(action.frame_max, action.channel_max)
        if action.heartbeat:
            self._heartbeat = HeartbeatPolicy(action.heartbeat, self.recv_oct)
            self._hb_timer = self.loop.call_later(self._heartbeat.period, self._heartbeat_tick)

    def _open_vhost(self, action: H.OpenVhost) -> None:
        vhost = self.broker.vhosts.get(action.name)
        if vhost is None:
            raise not_allowed(f"vhost {action.name} not found")
        if (vhost.name, self.user) not in self.broker.auth.permissions:
            raise not_allowed(f"access to vhost '{vhost.name}' refused for user '{self.user}'")
        self.vhost_obj = vhost
        self.vhost_name = vhost.name
        self._run(self.handshake.opened())
        self.core.opened(self.frame_max, self.channel_max)
        node = self.broker.cluster.local
        self.events.emit(
            "connection.created", lambda: announce.connection_created(self, self.id, node), actor=self.user
        )
        log.info(
            "connection %s (%s): user '%s' authenticated and granted access to vhost '%s'",
            *(self.id, self.name, self.user, vhost.name),
        )

    def _arm_timer(self, action: H.ArmTimer) -> None:
        self._hs_timer = self.loop.call_later(action.seconds, self._handshake_timeout)

    def _cancel_timer(self, action: H.CancelTimer) -> None:
        if self._hs_timer is not None:
            self._hs_timer.cancel()
            self._hs_timer = None

    def _close_socket(self, action: H.CloseSocket) -> None:
        self._shutdown(action.reason, action.reset)

    def _handshake_timeout(self) -> None:
        self._hs_timer = None
        if not self.closed:
            log.error("closing AMQP connection %s (%s): handshake timeout", self.id, self.name)
            self._out.clear()
            self._run(self.handshake.timed_out())

    def _is_loopback(self) -> bool:
        peer = self.transport.get_extra_info("peername")
        if not isinstance(peer, tuple):
            return True  # unix socket / in-memory transport
        host = str(peer[0])
        return host.startswith("127.") or host in ("::1", "::ffff:127.0.0.1", "localhost")

    def check_access(self, kind: str, resource: str, name: str) -> None:
        """rabbit_access_control:check_resource_access: 403 unless the user's `kind` regex
        (configure, write or read) in this vhost matches `name`."""
        self.broker.auth.check(self.user, self.vhost_name, kind, resource, name)

    #: Channel-0 methods, channel.open and the assembler's verdicts, by type (any other channel-0
    #: command goes to the handshake).
    _events: ClassVar[dict[type[Any], Callable[[Connection, int, Any], None]]] = {
        ProtocolHeader: _on_header,
        FrameFailure: _on_frame_failure,
        Crash: _on_crash,
        C.ChannelOpen: _on_channel_open,
        C.ConnectionClose: _on_close,
        C.ConnectionCloseOk: _on_close_ok,
        C.ConnectionUpdateSecret: _on_update_secret,
    }

    #: How each of the handshake's actions is performed.
    _actions: ClassVar[dict[type[Any], Callable[[Connection, Any], None]]] = {
        H.Send: _send,
        H.Authenticate: _authenticate,
        H.Tuned: _tuned,
        H.OpenVhost: _open_vhost,
        H.ArmTimer: _arm_timer,
        H.CancelTimer: _cancel_timer,
        H.CloseSocket: _close_socket,
    }


__all__ = ["CLOSE_OK_TIMEOUT", "SILENT_CLOSE_DELAY", "Connection", "Transport"]
