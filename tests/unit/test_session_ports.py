"""The session through fake ports: a Connection and its channels driven with bytes, with a fake
implementation of every protocol in broker.session.ports (no Broker, no socket, no event loop).

Each fake records what the session asked of it, so a test shows which port a behaviour goes
through: logins and permissions (`AccessControl`), blocked publishers (`AlarmView`), direct
reply-to (`ReplyRegistry`), what the store must keep of deliveries (`MessageLedger`), closed
connections (`Server.connection_lost`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from pamqp import commands, frame, header
from pamqp.body import ContentBody

from amqpwire.errors import AmqpError, access_refused
from amqpwire.fields import FieldTable
from broker.entities.clock import ManualClock
from broker.entities.message import StoredMessage
from broker.entities.queues.catalog import Entry, Queue
from broker.entities.vhost import VHost
from broker.session.connection import Connection
from broker.session.limiter import Limiter
from broker.session.ports import ReplyTarget, Server, Timer
from broker.session.unacked import UnackedTracker
from exchanges.compat import Compat

FRAME_MAX = 4096

# -- the fakes ---------------------------------------------------------------------------------------


@dataclass
class FakeSettings:
    channel_max: int = 64
    frame_max: int = 8192
    heartbeat: int = 0
    max_message_size: int = 1 << 20
    loopback_users: tuple[str, ...] = ("guest",)
    silent_close_delay: float = 3.0


@dataclass
class FakeAccess:
    passwords: dict[str, str] = field(default_factory=lambda: {"guest": "guest", "alice": "pw"})
    permissions: set[tuple[str, str]] = field(default_factory=lambda: {("/", "guest"), ("/", "alice")})
    refused: set[tuple[str, str]] = field(default_factory=set)  # (kind, name) the user may not use
    version: int = 0
    checks: list[tuple[str, str, str, str, str]] = field(default_factory=list)

    def check_credentials(self, name: str, password: str) -> bool:
        return self.passwords.get(name) == password

    def check(self, user: str, vhost: str, kind: str, resource: str, name: str) -> None:
        self.checks.append((user, vhost, kind, resource, name))
        if (kind, name) in self.refused:
            raise access_refused(
                f"access to {resource} '{name}' in vhost '{vhost}' refused for user '{user}'"
            )


@dataclass
class FakeAlarms:
    blocked_by: frozenset[str] = frozenset()
    flow: bool = False
    reason: str = ""


@dataclass
class FakeNode:
    local: str = "rabbit@fake-node"


@dataclass
class RecordingLedger:
    calls: list[tuple[str, str, bytes, bool]] = field(default_factory=list)

    def delivered(self, queue: Queue, entry: Entry, no_ack: bool) -> None:
        self.calls.append(("delivered", queue.name, entry.msg.body, no_ack))

    def settled(self, queue: Queue, entries: Sequence[Entry]) -> None:
        self.calls.extend(("settled", queue.name, e.msg.body, False) for e in entries)


class FakeServer:
    """Every member of broker.session.ports.Server, in memory."""

    def __init__(self, clock: ManualClock) -> None:
        self.settings = FakeSettings()
        self.auth = FakeAccess()
        self.alarms = FakeAlarms()
        self.cluster = FakeNode()
        self.host = "127.0.0.1"
        self.port = 5672
        self.vhosts: dict[str, VHost] = {"/": VHost("/", Compat.for_version("3.10.8"), clock)}
        self.ledger: RecordingLedger | None = RecordingLedger()
        self.replies: dict[str, ReplyTarget] = {}
        self.lost: list[object] = []
        self._suffixes = itertools.count(1)

    def register_reply_channel(self, channel: ReplyTarget) -> str:
        suffix = f"s{next(self._suffixes)}"
        self.replies[suffix] = channel
        return suffix

    def unregister_reply_channel(self, suffix: str) -> None:
        self.replies.pop(suffix, None)

    def reply_channel_exists(self, suffix: str) -> bool:
        ch = self.replies.get(suffix)
        return ch is not None and ch.open

    def deliver_reply(self, msg: StoredMessage) -> bool:
        ch = self.replies.get(msg.routing_key.removeprefix("amq.rabbitmq.reply-to."))
        if ch is None or not ch.open:
            return False
        ch.deliver_direct_reply(msg)
        return True

    def connection_lost(self, conn: object) -> None:
        self.lost.append(conn)


class FakeLoop:
    """broker.session.ports.Scheduler on the manual clock (what is called soon runs on `run`)."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.soon: list[Callable[[], object]] = []

    def call_soon(self, fn: Callable[..., object], *args: Any) -> None:
        self.soon.append(lambda: fn(*args))

    def call_later(self, delay: float, fn: Callable[..., object], *args: Any) -> Timer:
        def run() -> None:
            fn(*args)

        return self.clock.call_later(delay, run)

    def run(self) -> None:
        while self.soon:
            self.soon.pop(0)()


class MemoryTransport:
    def __init__(self, peer: tuple[str, int]) -> None:
        self.peer = peer
        self.out = bytearray()
        self.closed = False
        self.reading = True

    def write(self, data: bytes) -> None:
        self.out += data

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.peer if name == "peername" else default


# -- a client speaking bytes ---------------------------------------------------------------------------


class Client:
    """Bytes in, decoded frames out: (channel, pamqp frame) pairs since the last call."""

    def __init__(self, server: Server, peer: tuple[str, int] = ("127.0.0.1", 40000)) -> None:
        self.clock = ManualClock()
        self.loop = FakeLoop(self.clock)
        self.transport = MemoryTransport(peer)
        self.conn = Connection(server, self.transport, self.loop)
        self._read = 0

    def send(self, data: bytes) -> list[tuple[int, Any]]:
        self.conn.data_received(data)
        self.loop.run()
        return self.received()

    def received(self) -> list[tuple[int, Any]]:
        out: list[tuple[int, Any]] = []
        data = bytes(self.transport.out[self._read :])
        self._read = len(self.transport.out)
        while data:
            used, channel, value = frame.unmarshal(data)
            out.append((channel, value))
            data = data[used:]
        return out

    def login(
        self, user: str = "guest", password: str = "guest", capabilities: tuple[str, ...] = ()
    ) -> list[tuple[int, Any]]:
        props: Any = {"capabilities": dict.fromkeys(capabilities, True)}
        return self.send(
            b"AMQP\x00\x00\x09\x01"
            + m(0, commands.Connection.StartOk(client_properties=props, response=f"\0{user}\0{password}"))
            + m(0, commands.Connection.TuneOk(channel_max=64, frame_max=FRAME_MAX, heartbeat=0))
            + m(0, commands.Connection.Open(virtual_host="/"))
        )

    def open(self, *channels: int) -> None:
        replies = self.send(b"".join(m(ch, commands.Channel.Open()) for ch in channels))
        assert [type(v) for _c, v in replies] == [commands.Channel.OpenOk] * len(channels)


def m(channel: int, method: Any) -> bytes:
    return frame.marshal(method, channel)


def publish(channel: int, body: bytes, routing_key: str, **props: Any) -> bytes:
    return (
        m(channel, commands.Basic.Publish(exchange="", routing_key=routing_key))
        + frame.marshal(header.ContentHeader(0, len(body), commands.Basic.Properties(**props)), channel)
        + frame.marshal(ContentBody(body), channel)
    )


def methods(frames: list[tuple[int, Any]]) -> list[tuple[int, str]]:
    return [(ch, v.name) for ch, v in frames if hasattr(v, "name") and "." in v.name]


def bodies(frames: list[tuple[int, Any]]) -> list[bytes]:
    return [v.value for _ch, v in frames if isinstance(v, ContentBody)]


@pytest.fixture
def server() -> FakeServer:
    return FakeServer(ManualClock())


# -- the connection: handshake, logins, alarms, closing ---------------------------------------------


def test_the_handshake_offers_the_server_settings_and_node(server: FakeServer) -> None:
    client = Client(server)
    start = client.send(b"AMQP\x00\x00\x09\x01")
    ((_ch, start_method),) = start
    assert start_method.server_properties["cluster_name"] == "rabbit@fake-node"
    tune = client.send(m(0, commands.Connection.StartOk(response="\0guest\0guest")))
    ((_ch, tune_method),) = tune
    assert (tune_method.channel_max, tune_method.frame_max, tune_method.heartbeat) == (64, 8192, 0)
    client.send(
        m(0, commands.Connection.TuneOk(channel_max=64, frame_max=FRAME_MAX, heartbeat=0))
        + m(0, commands.Connection.Open(virtual_host="/"))
    )
    assert client.conn.state == "running" and client.conn.user == "guest"
    assert client.conn.name == "127.0.0.1:40000 -> 127.0.0.1:5672"


def test_a_wrong_password_is_refused_by_the_access_port(server: FakeServer) -> None:
    client = Client(server)
    out = client.login("alice", "wrong", capabilities=("authentication_failure_close",))
    (close,) = [v for _c, v in out if isinstance(v, commands.Connection.Close)]
    assert close.reply_code == 403 and "ACCESS_REFUSED" in close.reply_text
    assert client.conn.user == ""
    assert not client.transport.closed  # held for ?SILENT_CLOSE_DELAY unless the client answers
    client.clock.advance(3.0)
    assert client.transport.closed
    answering = Client(server)  # close-ok ends the wait at once, as on RabbitMQ
    answering.login("alice", "wrong", capabilities=("authentication_failure_close",))
    assert not answering.transport.closed
    answering.send(frame.marshal(commands.Connection.CloseOk(), 0))
    assert answering.transport.closed
    silent = Client(server)  # a client that did not ask to be told: nothing, then a reset
    assert methods(silent.login("alice", "wrong")) == [(0, "Connection.Start")]
    assert not silent.transport.closed and not silent.transport.reading
    silent.clock.advance(3.0)
    assert silent.transport.closed and silent.conn in server.lost


def test_a_loopback_user_from_another_host_is_refused(server: FakeServer) -> None:
    remote = Client(server, peer=("10.1.2.3", 5555))
    out = remote.login("guest", "guest", capabilities=("authentication_failure_close",))
    assert any(isinstance(v, commands.Connection.Close) and v.reply_code == 403 for _c, v in out)
    other = Client(server, peer=("10.1.2.3", 5556))
    other.login("alice", "pw")
    assert other.conn.state == "running"


def test_a_user_without_a_permission_on_the_vhost_cannot_open_it(server: FakeServer) -> None:
    server.auth.permissions.discard(("/", "alice"))
    client = Client(server)
    out = client.login("alice", "pw")
    (close,) = [v for _c, v in out if isinstance(v, commands.Connection.Close)]
    assert close.reply_code == 530
    assert close.reply_text == "NOT_ALLOWED - access to vhost '/' refused for user 'alice'"


def test_a_publisher_under_an_alarm_is_blocked_and_no_longer_read(server: FakeServer) -> None:
    client = Client(server)
    client.login(capabilities=("connection.blocked",))
    client.open(1)
    client.send(m(1, commands.Queue.Declare(queue="q")))
    server.alarms.blocked_by = frozenset({"memory"})
    server.alarms.reason = "low on memory"
    out = client.send(publish(1, b"x", "q"))
    assert methods(out) == [(0, "Connection.Blocked")]
    assert out[0][1].reason == "low on memory"
    assert not client.transport.reading and client.conn.state == "blocked"
    assert server.vhosts["/"].queues["q"].count == 1  # the message that arrived is taken


def test_closing_tells_the_server_the_connection_is_gone(server: FakeServer) -> None:
    client = Client(server)
    client.login()
    out = client.send(m(0, commands.Connection.Close(200, "bye", 0, 0)))
    assert methods(out) == [(0, "Connection.CloseOk")]
    assert server.lost == [client.conn]  # the connection is over at once ...
    assert not client.transport.closed  # ... but the socket is the client's to close, as on RabbitMQ
    client.clock.advance(30.0)  # one the client keeps is reset after 30 s (RabbitMQ: 30.00 s)
    assert client.transport.closed


# -- channels: permissions, consumers, acks and the ledger ---------------------------------------------


def test_a_refused_permission_closes_the_channel_with_the_access_ports_text(server: FakeServer) -> None:
    server.auth.refused.add(("configure", "secret"))
    client = Client(server)
    client.login()
    client.open(1)
    out = client.send(m(1, commands.Queue.Declare(queue="secret")))
    (close,) = [v for _c, v in out if isinstance(v, commands.Channel.Close)]
    assert close.reply_code == 403
    assert (
        close.reply_text == "ACCESS_REFUSED - access to queue 'secret' in vhost '/' refused for user 'guest'"
    )
    assert ("guest", "/", "configure", "queue", "secret") in server.auth.checks
    assert "secret" not in server.vhosts["/"].queues


def test_deliveries_and_acks_go_through_the_ledger_and_the_credit(server: FakeServer) -> None:
    client = Client(server)
    client.login()
    client.open(1)
    client.send(m(1, commands.Queue.Declare(queue="q")) + publish(1, b"one", "q") + publish(1, b"two", "q"))
    out = client.send(
        m(1, commands.Basic.Qos(prefetch_count=1)) + m(1, commands.Basic.Consume(queue="q", consumer_tag="c"))
    )
    assert methods(out) == [(1, "Basic.QosOk"), (1, "Basic.ConsumeOk"), (1, "Basic.Deliver")]
    assert bodies(out) == [b"one"]  # prefetch 1: the second waits for the ack
    assert server.ledger is not None
    assert server.ledger.calls == [("delivered", "q", b"one", False)]
    out = client.send(m(1, commands.Basic.Ack(delivery_tag=1)))
    assert bodies(out) == [b"two"] and out[0][1].delivery_tag == 2
    assert server.ledger.calls[1:] == [("settled", "q", b"one", False), ("delivered", "q", b"two", False)]
    channel = client.conn.channels[1]
    assert list(channel.unacked) == [2] and channel.limiter.unacked == 1


def test_basic_get_without_ack_tells_the_ledger_the_message_is_gone(server: FakeServer) -> None:
    client = Client(server)
    client.login()
    client.open(1)
    client.send(m(1, commands.Queue.Declare(queue="q")) + publish(1, b"hi", "q"))
    out = client.send(m(1, commands.Basic.Get(queue="q", no_ack=True)))
    assert methods(out) == [(1, "Basic.GetOk")] and bodies(out) == [b"hi"]
    assert out[0][1].message_count == 0
    assert server.ledger is not None and server.ledger.calls == [("delivered", "q", b"hi", True)]
    assert not client.conn.channels[1].unacked


def test_without_a_ledger_nothing_is_reported(server: FakeServer) -> None:
    server.ledger = None
    client = Client(server)
    client.login()
    client.open(1)
    client.send(m(1, commands.Queue.Declare(queue="q")) + publish(1, b"hi", "q"))
    out = client.send(m(1, commands.Basic.Get(queue="q")) + m(1, commands.Basic.Ack(delivery_tag=1)))
    assert methods(out) == [(1, "Basic.GetOk")]
    assert server.vhosts["/"].queues["q"].message_count == 0


def test_closing_a_channel_requeues_its_unacked_and_cancels_its_consumers(server: FakeServer) -> None:
    client = Client(server)
    client.login()
    client.open(1, 2)
    client.send(m(1, commands.Queue.Declare(queue="q")) + publish(1, b"m", "q"))
    client.send(m(1, commands.Basic.Consume(queue="q", consumer_tag="c")))
    q = server.vhosts["/"].queues["q"]
    assert (q.count, q.consumer_count) == (0, 1)
    out = client.send(m(1, commands.Channel.Close(200, "", 0, 0)))
    assert methods(out) == [(1, "Channel.CloseOk")]
    assert (q.count, q.consumer_count) == (1, 0)
    out = client.send(m(2, commands.Basic.Get(queue="q")))
    assert out[0][1].redelivered and bodies(out) == [b"m"]


def test_reject_and_recover_return_messages_through_the_tracker(server: FakeServer) -> None:
    client = Client(server)
    client.login()
    client.open(1)
    client.send(m(1, commands.Queue.Declare(queue="q")) + publish(1, b"a", "q") + publish(1, b"b", "q"))
    client.send(m(1, commands.Basic.Consume(queue="q", consumer_tag="c")))
    out = client.send(m(1, commands.Basic.Reject(delivery_tag=1, requeue=True)))
    assert bodies(out) == [b"a"] and out[0][1].redelivered and out[0][1].delivery_tag == 3
    out = client.send(m(1, commands.Basic.Recover(requeue=True)))
    assert (1, "Basic.RecoverOk") in methods(out)
    assert sorted(bodies(out)) == [b"a", b"b"]
    out = client.send(m(1, commands.Basic.Ack(delivery_tag=2)))
    (close,) = [v for _c, v in out if isinstance(v, commands.Channel.Close)]
    assert (close.reply_code, close.reply_text) == (406, "PRECONDITION_FAILED - unknown delivery tag 2")


def test_direct_reply_to_goes_through_the_reply_registry(server: FakeServer) -> None:
    client = Client(server)
    client.login()
    client.open(1, 2)
    out = client.send(m(1, commands.Basic.Consume(queue="amq.rabbitmq.reply-to", no_ack=True)))
    assert methods(out) == [(1, "Basic.ConsumeOk")]
    ((suffix, target),) = server.replies.items()
    assert target is client.conn.channels[1]
    out = client.send(m(2, commands.Queue.Declare(queue=f"amq.rabbitmq.reply-to.{suffix}", passive=True)))
    assert out[0][1].message_count == 0 and out[0][1].consumer_count == 1
    out = client.send(publish(2, b"answer", f"amq.rabbitmq.reply-to.{suffix}"))
    assert methods(out) == [(1, "Basic.Deliver")] and bodies(out) == [b"answer"]
    client.send(m(1, commands.Channel.Close(200, "", 0, 0)))
    assert server.replies == {}


def test_confirms_are_flushed_through_the_outbox(server: FakeServer) -> None:
    client = Client(server)
    client.login()
    client.open(1)
    client.send(m(1, commands.Queue.Declare(queue="q")) + m(1, commands.Confirm.Select()))
    out = client.send(publish(1, b"1", "q") + publish(1, b"2", "q"))
    assert methods(out) == [(1, "Basic.Ack")]
    assert (out[0][1].delivery_tag, out[0][1].multiple) == (2, True)


def test_large_bodies_are_split_to_the_negotiated_frame_size(server: FakeServer) -> None:
    client = Client(server)
    client.login()
    client.open(1)
    body = bytes(range(256)) * 40  # 10,240 bytes: three body frames at frame_max 4,096
    client.send(m(1, commands.Queue.Declare(queue="q")))
    step = FRAME_MAX - 8
    chunks = [body[i : i + step] for i in range(0, len(body), step)]
    data = m(1, commands.Basic.Publish(exchange="", routing_key="q"))
    data += frame.marshal(header.ContentHeader(0, len(body), commands.Basic.Properties()), 1)
    data += b"".join(frame.marshal(ContentBody(c), 1) for c in chunks)
    client.send(data)
    out = client.send(m(1, commands.Basic.Get(queue="q", no_ack=True)))
    assert [len(b) for b in bodies(out)] == [4088, 4088, 2064]
    assert b"".join(bodies(out)) == body


# -- the unacked tracker on its own -----------------------------------------------------------------


def _tracker_with(n: int, server: FakeServer) -> tuple[UnackedTracker, Queue]:
    """A tracker holding basic.get deliveries 1..n of queue "t"."""
    vhost = server.vhosts["/"]
    q = Queue(vhost, "t", durable=False, exclusive_owner=None, auto_delete=False, arguments=FieldTable())
    vhost.add_queue(q)
    tracker = UnackedTracker(Limiter(), None, list)
    for i in range(n):
        _deliver(tracker, q, b"%d" % i)
    return tracker, q


def _deliver(tracker: UnackedTracker, q: Queue, body: bytes) -> int:
    q.unacked += 1
    return tracker.delivered(q, Entry(q.seq + 1, StoredMessage("", "t", b"", body), 0.0), None)


def test_collect_follows_rabbit_channel_collect_acks(server: FakeServer) -> None:
    tracker, q = _tracker_with(5, server)
    assert [t for t, _u in tracker.collect(2, False)] == [2]
    assert [t for t, _u in tracker.collect(4, True)] == [1, 3, 4]  # 2 is already gone
    with pytest.raises(AmqpError, match="unknown delivery tag 4"):
        tracker.collect(4, False)
    assert _deliver(tracker, q, b"late") == 6
    assert [t for t, _u in tracker.collect(0, True)] == [5, 6]
    assert len(tracker) == 0 and tracker.limiter.unacked == 6  # collecting frees no credit


def test_release_frees_credit_and_names_the_queues_to_wake(server: FakeServer) -> None:
    tracker, q = _tracker_with(2, server)
    items = tracker.collect(2, True)
    assert tracker.release(items) == [q]
    assert tracker.limiter.unacked == 0 and q.unacked == 0


def test_a_tag_without_an_ack_is_not_tracked(server: FakeServer) -> None:
    tracker, _q = _tracker_with(1, server)
    assert tracker.tag() == 2 and tracker.next_tag == 3 and list(tracker.unacked) == [1]


def test_no_timer_is_left_after_a_clean_close(server: FakeServer) -> None:
    client = Client(server)
    client.login()
    client.send(m(0, commands.Connection.Close(200, "", 0, 0)))
    assert client.clock.pending == 1  # only the reset of a socket the client would keep
    client.conn.connection_lost()  # the client closes its side, as it does after close-ok
    assert client.clock.pending == 0
