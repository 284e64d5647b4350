"""The connection state machine replays RabbitMQ 3.10.8's recorded sessions byte for byte.

Each recorded scenario runs on a new `StreamConnection` against one in-memory broker (the state
carries over between scenarios as it did on RabbitMQ: the publish scenario writes the stream the
subscribe scenario reads). After each client frame, our output must be the frames RabbitMQ sent
before the client's next frame; the peer-properties answer (RabbitMQ's version strings) is compared
by its code only. Chunk timestamps come from the recording (the log's clock replays them), so the
deliveries compare whole, CRC and all. A fake monotonic clock runs heartbeats and timeouts.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from amqpwire.fields import Field, FieldTable
from broker.streamproto import chunk as C
from broker.streamproto import convert
from broker.streamproto import frames as F
from broker.streamproto.connection import State, StreamConnection
from broker.streamproto.constants import Code, Key
from broker.streamproto.memory import MemoryBroker, MemoryUser

DATA = Path(__file__).parent.parent / "data" / "stream_protocol" / "rabbitmq_3.10.8.json"
RECORDED = json.loads(DATA.read_text())
STREAM = "rec-" + RECORDED["stream_suffix"]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _split(out: bytes) -> list[bytes]:
    frames, pos = [], 0
    while pos < len(out):
        (size,) = struct.unpack_from(">I", out, pos)
        frames.append(out[pos : pos + 4 + size])
        pos += 4 + size
    return frames


def _normal(frame: bytes) -> bytes:
    """The peer-properties answer compared by key, correlation id and code only."""
    if frame[4:6] == b"\x80\x11":
        return frame[4:14]
    return frame


def _recorded_stamps() -> dict[int, int]:
    """Chunk first offset -> the timestamp RabbitMQ wrote, from every recorded delivery."""
    stamps: dict[int, int] = {}
    for steps in RECORDED["scenarios"].values():
        for st in steps:
            if st["dir"] == "s2c" and st.get("hex", "")[8:12] == "0008":
                d = C.decode(F.parse(bytes.fromhex(st["hex"])[4:], from_server=True).chunk)
                stamps[d.first_offset] = d.timestamp
    return stamps


@pytest.fixture(scope="module")
def broker() -> MemoryBroker:
    b = MemoryBroker(host="localhost", port=5552)
    stamps = _recorded_stamps()

    def clock_ms() -> int:
        log = b.streams.get(("/", STREAM))
        return stamps.get(log.next_offset if log is not None else 0, 0)

    b.clock_ms = clock_ms
    return b


def replay(broker: MemoryBroker, name: str, clock: Clock | None = None) -> StreamConnection:
    clock = clock or Clock()
    conn = StreamConnection(broker, peer_host="127.0.0.1", clock=clock)
    steps = RECORDED["scenarios"][name]
    i = 0
    while i < len(steps):
        st = steps[i]
        assert st["dir"] == "c2s", st
        raw = bytes.fromhex(st["hex"]) + b"\0" * st.get("zero_fill", 0)
        conn.receive_data(raw)
        i += 1
        expected: list[bytes] = []
        closed = raw[4:6] == b"\x00\x16"  # after its close request the client went away (and RabbitMQ stops)
        while i < len(steps) and steps[i]["dir"] == "s2c":
            s2c = steps[i]
            if s2c.get("closed"):
                closed = True
            elif "hex" in s2c:
                expected.append(bytes.fromhex(s2c["hex"]))
            i += 1
        got = _split(conn.data_to_send())
        if "heartbeat (server)" in " ".join(s.get("note", "") for s in steps[i - len(expected) : i]):
            clock.now += 1.0
            conn.tick()
            got += _split(conn.data_to_send())
        assert [_normal(f) for f in got] == [_normal(f) for f in expected], (name, st["note"])
        if closed and not conn.closed:
            clock.now += 10.0  # the close-response wait (close_sent) times out
            conn.tick()
        assert conn.closed == closed, (name, st["note"])
    return conn


ORDER = [
    "handshake",
    "heartbeat",
    "auth_failure",
    "auth_mechanism",
    "open_unknown_vhost",
    "pre_auth_unknown",
    "create_delete_metadata",
    "publish",
    "subscribe",
]


def test_replay_in_order(broker: MemoryBroker) -> None:
    for name in ORDER:
        replay(broker, name)


def test_amqp091_written_records_read_over_the_stream_protocol(broker: MemoryBroker) -> None:
    """What RabbitMQ stored for two AMQP 0-9-1 publishes (converted here) is delivered with the
    recorded bytes; the channel's writer id makes a 45-byte trailer (not sent)."""
    if ("/", STREAM) not in broker.streams:
        test_replay_in_order(broker)
    log = broker.streams[("/", STREAM)]
    props = {
        "content_type": "application/json",
        "content_encoding": "utf-8",
        "headers": FieldTable(
            [
                ("h-str", Field("longstr", b"v")),
                ("h-int", Field("signedint", 7)),
                ("h-bool", Field("bool", True)),
                ("h-long", Field("long", 2**40)),
            ]
        ),
        "delivery_mode": 2,
        "priority": 3,
        "correlation_id": "corr",
        "reply_to": "rq",
        "expiration": "60000",
        "message_id": "mid",
        "timestamp": 1_700_000_000,
        "type": "t",
        "user_id": "guest",
        "app_id": "app",
    }
    writer = "w" * 35
    first = convert.from_amqp091(props, b"from 0-9-1", exchange="", routing_key=STREAM)
    second = convert.from_amqp091({}, b"via amq.direct", exchange="amq.direct", routing_key="to-stream")
    log.append([(1, first)], writer, lambda ids: None)
    log.append([(2, second)], writer, lambda ids: None)
    replay(broker, "amqp091_written_read_over_5552")
    replay(broker, "unknown_frame")
    replay(broker, "malformed_frame")
    replay(broker, "frame_too_large")
    replay(broker, "delete")


def test_amqp091_reads_of_stream_records_are_as_recorded(broker: MemoryBroker) -> None:
    """The records stream clients wrote, read back over AMQP 0-9-1: exchange "", the stream's name
    as routing key, properties and headers as RabbitMQ gave them to pika."""
    stamps = _recorded_stamps()
    assert stamps
    records: list[bytes] = []
    for st in RECORDED["scenarios"]["publish"]:
        if st["dir"] == "c2s" and st.get("hex", "")[8:12] == "0002":
            cmd = F.parse(bytes.fromhex(st["hex"])[4:])
            assert isinstance(cmd, F.Publish)
            if cmd.publisher_id != 0 or "duplicate" in st["note"]:
                continue
            for _pid, entry in cmd.entries():
                records.extend(entry.records() if isinstance(entry, F.SubBatch) else [entry])
    seen = RECORDED["amqp091_reads_of_5552_messages"][: len(records)]
    for rec, obs in zip(records, seen, strict=True):
        m = convert.to_amqp091(rec, stream=STREAM)
        assert (m.exchange, m.routing_key, m.body.hex()) == (obs["exchange"], obs["routing_key"], obs["body"])
        want = {k: v for k, v in obs["properties"].items()}
        assert {k: v for k, v in m.props.items() if k != "headers"} == want
        headers = {k for k in obs["headers"] if k != "x-stream-offset"}
        assert set((m.props.get("headers") or FieldTable()).to_python()) == headers


def _open(broker: MemoryBroker, clock: Clock | None = None, user: str = "guest") -> StreamConnection:
    conn = StreamConnection(broker, peer_host="127.0.0.1", clock=clock or Clock())
    password = broker.users[user].password
    plain = b"\0" + user.encode() + b"\0" + password.encode()
    for cmd in (
        F.PeerProperties(1, {}),
        F.SaslHandshake(2),
        F.SaslAuthenticate(3, "PLAIN", plain),
        F.Tune(1_048_576, 0),
        F.Open(4, "/"),
    ):
        conn.receive_data(cmd.to_bytes())
    assert conn.state is State.OPEN
    conn.data_to_send()
    return conn


def _answers(conn: StreamConnection, *cmds: F.Command) -> list[F.Command]:
    for c in cmds:
        conn.receive_data(c.to_bytes())
    return [F.parse(f[4:], from_server=True) for f in _split(conn.data_to_send())]


def test_permissions_refuse_with_access_refused() -> None:
    b = MemoryBroker()
    b.users["limited"] = MemoryUser("pw", permissions={"/": ("^$", "^$", "^$")})
    b.create_stream("guest", "/", "s", {})
    conn = _open(b, user="limited")
    out = _answers(
        conn,
        F.CreateStream(5, "t", {}),
        F.DeleteStream(6, "s"),
        F.DeclarePublisher(7, 0, "", "s"),
        F.Subscribe(8, 0, "s", F.OffsetSpec(F.OffsetType.FIRST), 1),
        F.QueryOffset(9, "r", "s"),
        F.QueryPublisherSequence(10, "r", "s"),
    )
    assert [getattr(c, "code", None) for c in out] == [Code.ACCESS_REFUSED] * 6


def test_credits_block_reading_until_confirms_return_them() -> None:
    """Publishing beyond the initial credits pauses reading; confirms returning more than the
    unblocking threshold resume it."""
    b = MemoryBroker()
    b.create_stream("guest", "/", "s", {})
    conn = _open(b)
    conn.config = conn.config.__class__(initial_credits=10, credits_required_for_unblocking=4)
    conn.credits = 10
    held: list[tuple[list[int], object]] = []
    log = b.streams[("/", "s")]
    real_append = log.append

    def slow_append(entries, writer, confirm):  # type: ignore[no-untyped-def]
        real_append(entries, writer, lambda ids: held.append((ids, confirm)))

    log.append = slow_append  # type: ignore[method-assign]
    _answers(conn, F.DeclarePublisher(5, 0, "", "s"))
    conn.receive_data(F.Publish.build(0, [(i, b"x") for i in range(10)]).to_bytes())
    assert conn.reading_paused
    for ids, callback in held:
        callback(ids)  # type: ignore[operator]
    assert not conn.reading_paused
    confirm = next(c for c in _answers(conn) if isinstance(c, F.PublishConfirm))
    assert confirm.publishing_ids == tuple(range(10))


def test_disk_alarm_refuses_new_publishers() -> None:
    b = MemoryBroker()
    b.create_stream("guest", "/", "s", {})
    conn = _open(b)
    conn.set_resource_alarm(True)
    (resp,) = _answers(conn, F.DeclarePublisher(5, 0, "", "s"))
    assert isinstance(resp, F.CodeResponse) and resp.code == Code.PRECONDITION_FAILED
    assert not conn.reading_paused  # a connection without publishers always reads (should_unblock)


def test_deleting_a_stream_tells_other_connections() -> None:
    b = MemoryBroker()
    b.create_stream("guest", "/", "s", {})
    reader, deleter = _open(b), _open(b)
    _answers(reader, F.Subscribe(5, 1, "s", F.OffsetSpec(F.OffsetType.FIRST), 1))
    (resp,) = _answers(deleter, F.DeleteStream(5, "s"))
    assert isinstance(resp, F.CodeResponse) and resp.code == Code.OK
    assert _answers(reader) == [F.MetadataUpdate(Code.STREAM_NOT_AVAILABLE, "s")]
    assert reader.subscriptions == {}


def test_no_credit_no_reads() -> None:
    """A subscription without credit reads nothing from the log, whatever is published."""
    b = MemoryBroker()
    b.create_stream("guest", "/", "s", {})
    conn = _open(b)
    _answers(
        conn, F.Subscribe(5, 1, "s", F.OffsetSpec(F.OffsetType.FIRST), 0), F.DeclarePublisher(6, 0, "", "s")
    )
    for i in range(50):
        conn.receive_data(F.Publish.build(0, [(i, b"m")]).to_bytes())
    out = _answers(conn)
    assert not any(isinstance(c, F.Deliver) for c in out)
    delivered = [c for c in _answers(conn, F.Credit(1, 3)) if isinstance(c, F.Deliver)]
    assert [C.decode(d.chunk).first_offset for d in delivered] == [0, 1, 2]


def test_handshake_step_timeout_closes() -> None:
    clock = Clock()
    conn = StreamConnection(MemoryBroker(), peer_host="127.0.0.1", clock=clock)
    conn.receive_data(F.PeerProperties(1, {}).to_bytes())
    clock.now += 9.9
    conn.tick()
    assert not conn.closed
    clock.now += 0.2
    conn.tick()
    assert conn.closed


def test_missed_heartbeats_close() -> None:
    clock = Clock()
    conn = StreamConnection(MemoryBroker(), peer_host="127.0.0.1", clock=clock)
    for cmd in (
        F.PeerProperties(1, {}),
        F.SaslHandshake(2),
        F.SaslAuthenticate(3, "PLAIN", b"\0guest\0guest"),
        F.Tune(1_048_576, 2),
        F.Open(4, "/"),
    ):
        conn.receive_data(cmd.to_bytes())
    conn.data_to_send()
    clock.now += 1.0
    conn.tick()
    assert _split(conn.data_to_send()) == [F.Heartbeat().to_bytes()]
    clock.now += 3.1
    conn.tick()
    assert conn.closed


def test_loopback_only_user_from_elsewhere() -> None:
    conn = StreamConnection(MemoryBroker(), peer_host="10.1.2.3", clock=Clock())
    out = _answers(
        conn, F.PeerProperties(1, {}), F.SaslHandshake(2), F.SaslAuthenticate(3, "PLAIN", b"\0guest\0guest")
    )
    assert isinstance(out[-1], (F.SaslAuthenticateResponse, F.CodeResponse))
    assert out[-1].code == Code.SASL_AUTHENTICATION_FAILURE_LOOPBACK  # type: ignore[attr-defined]
    assert conn.closed


def test_a_frame_above_the_hard_limit_closes_with_frame_too_large() -> None:
    b = MemoryBroker()
    conn = _open(b)
    conn.receive_data(struct.pack(">I", conn.config.frame_limit + 1) + b"\0" * 10)
    (close,) = [F.parse(f[4:]) for f in _split(conn.data_to_send())]
    assert isinstance(close, F.Close) and close.code == Code.FRAME_TOO_LARGE
    assert conn.state is State.CLOSE_SENT
    conn.receive_data(F.CodeResponse(close.corr, Code.OK, Key.CLOSE).to_bytes())
    assert conn.closed
