"""Stream-protocol (port 5552) codec fuzzing, on bench/fuzz.py's harness.

    python bench/fuzz_stream.py --seconds 300          # starts `hashbroker serve --stream-port ...`

Each input is a fresh connection: a handshake (peer properties, SASL handshake and authenticate,
tune, open; now and then with odd credentials, mechanisms, frame_max, heartbeat or vhost), then
generated commands (create and delete stream with odd arguments, declare publisher, publish with
simple entries and sub-entry batches, query publisher sequence, subscribe with every offset type
and odd values and properties, credit, store and query offset, unsubscribe, metadata, route and
partitions of a super stream, heartbeat, close), built with broker.streamproto.frames' encoders.
Most inputs are then mutated as bench/fuzz.py mutates AMQP streams (bit flips, length fields set
to extremes, insertions, deletions, splices); some are cut short, carry a frame larger than the
negotiated frame_max or announce one past the broker's hard limit.

Neighbours: a raw-codec stream client publishing one message at a time and reading it back from
its subscription (confirm and delivery), and bench/fuzz.py's AMQP publisher/consumer and
management client (which lists every queue, so a stream the fuzzer created must render). The summary
and exit status are bench/fuzz.py's (`RESULT unhandled=N stalls=N failures=N ...`).
"""

from __future__ import annotations

import contextlib
import itertools
import random
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.fuzz import (  # noqa: E402
    FAILURE_SECONDS,
    AmqpNeighbour,
    Fuzzer,
    ManagementNeighbour,
    Neighbour,
    Target,
    main,
    mutate,
    recv_some,
    recv_until_closed,
)
from broker.streamproto import frames as F  # noqa: E402
from broker.streamproto.constants import Code, Key, OffsetType  # noqa: E402

NEIGHBOUR_STREAM = "fuzz-neighbour-stream"
STREAMS = ("fzs-1", "fzs-2", "fz-super-0", "fz-super-1", "nope", "", "amq.x", "s" * 300)
SUPER = "fz-super"
ODD_STRINGS = (
    "",
    "0",
    "1",
    "-1",
    "x",
    "1h",
    "10s",
    "7D",
    "999999999999999999999",
    "1e3",
    "\u00e9",
    "a" * 300,
)
STREAM_ARGS = (
    "max-length-bytes",
    "max-age",
    "stream-max-segment-size-bytes",
    "queue-leader-locator",
    "initial-cluster-size",
    "x-queue-type",
    "x-other",
)
SUBSCRIBE_PROPERTIES = ("chunk_selector", "single-active-consumer", "name", "super-stream", "filter.0", "x")


def amqp10_message(body: bytes) -> bytes:
    """A message as stream clients publish it: one AMQP 1.0 data section."""
    if len(body) < 256:
        return b"\x00\x53\x75\xa0" + bytes((len(body),)) + body
    return b"\x00\x53\x75\xb0" + struct.pack(">I", len(body)) + body


def handshake_frames(user: str, password: str, vhost: str = "/", frame_max: int = 1_048_576) -> list[bytes]:
    """The frames of a client that does not wait for the answers (the broker judges each frame)."""
    return [
        F.PeerProperties(1, {"product": "fuzz", "version": "1"}).to_bytes(),
        F.SaslHandshake(2).to_bytes(),
        F.SaslAuthenticate(3, "PLAIN", f"\0{user}\0{password}".encode()).to_bytes(),
        F.Tune(frame_max, 0, answer=True).to_bytes(),
        F.Open(4, vhost).to_bytes(),
    ]


def server_frames(data: bytes) -> list[F.Command]:
    """What the server sent, parsed as a client reads it (a cut last frame is left out)."""
    decoder = F.FrameDecoder(1 << 31)
    decoder.feed(data)
    return [F.parse(body, from_server=True) for body in decoder.frames()]


class StreamFuzz(Fuzzer):
    """Generated and mutated stream-protocol connections (see the module docstring)."""

    name = "stream"
    _setup_lock = threading.Lock()
    _setup_done = False

    def __init__(self, target: Target, rng: random.Random, timeout: float) -> None:
        super().__init__(target, rng, timeout)
        self.corr = itertools.count(10)
        with StreamFuzz._setup_lock:
            if not StreamFuzz._setup_done:
                super_stream(target)
                StreamFuzz._setup_done = True

    def _handshake(self) -> list[bytes]:
        rng = self.rng
        t = self.target
        frames = handshake_frames(t.user, t.password, frame_max=rng.choice((1_048_576, 1_048_576, 4096, 0)))
        r = rng.random()
        if r < 0.04:
            frames[2] = F.SaslAuthenticate(3, "PLAIN", f"\0{t.user}\0wrong".encode()).to_bytes()
        elif r < 0.08:
            mech = rng.choice(("AMQPLAIN", "EXTERNAL", "", "PLAIN"))
            data = rng.choice((None, b"", b"\0\0", b"\0guest", b"\x00\x00\x00\x05LOGIN", b"\xff" * 20))
            frames[2] = F.SaslAuthenticate(3, mech, data).to_bytes()
        elif r < 0.11:
            frames[3] = F.Tune(rng.choice((0, 1, 8, 2**32 - 1)), rng.choice((0, 1, 2**32 - 1))).to_bytes()
        elif r < 0.14:
            frames[4] = F.Open(4, rng.choice(("nope", "", "/" * 300))).to_bytes()
        elif r < 0.17:
            props = {rng.choice(("", "a" * 300, "product")): rng.choice(ODD_STRINGS) for _ in range(3)}
            frames[0] = F.PeerProperties(1, props).to_bytes()
        elif r < 0.2:
            i = rng.randrange(len(frames))
            frames.insert(rng.randrange(len(frames)), frames[i])  # a step twice or out of order
        return frames

    def _entries(self) -> list[tuple[int, F.Entry]]:
        rng = self.rng
        out: list[tuple[int, F.Entry]] = []
        for _ in range(rng.choice((1, 1, 2, 5, 30))):
            pid = rng.choice((next(self.corr), 0, 1, 2**63, 2**64 - 1))
            if rng.random() < 0.7:
                body = amqp10_message(rng.choice((b"m", b"", b"x" * rng.randrange(1, 3000))))
                out.append((pid, body if rng.random() > 0.1 else bytes(rng.randrange(256) for _ in range(9))))
                continue
            records = [amqp10_message(b"r%d" % i) for i in range(rng.randrange(0, 6))]
            data = b"".join(struct.pack(">I", len(r)) + r for r in records)
            compression = 0 if rng.random() < 0.7 else rng.randrange(1, 8)
            count = len(records) if rng.random() < 0.8 else rng.choice((0, 1, 65535))
            size = len(data) if rng.random() < 0.8 else rng.choice((0, 2**32 - 1))
            out.append((pid, F.SubBatch(compression, count, size, data)))
        return out

    def _command(self) -> bytes:
        rng = self.rng
        corr = next(self.corr)
        stream = rng.choice(STREAMS)
        sid = rng.choice((0, 1, 2, 255))
        op = rng.randrange(18)
        cmd: F.Command
        if op == 0:
            cmd = F.CreateStream(
                corr,
                rng.choice(("fzs-1", "fzs-2", "fzs-3", "", "amq.no")),
                {rng.choice(STREAM_ARGS): rng.choice(ODD_STRINGS) for _ in range(rng.randrange(4))},
            )
        elif op == 1:
            cmd = F.DeleteStream(corr, rng.choice(("fzs-1", "fzs-2", "fzs-3", "nope")))
        elif op == 2:
            cmd = F.DeclarePublisher(
                corr, rng.choice((0, 1, 255)), rng.choice(("", "ref", "r" * 300)), stream
            )
        elif op in (3, 4, 5):
            entries = self._entries()
            publish = F.Publish.build(rng.choice((0, 0, 1, 7)), entries)
            if rng.random() < 0.1:
                publish = F.Publish(
                    publish.publisher_id, rng.choice((0, len(entries) + 1, 2**32 - 1)), publish.messages
                )
            return publish.to_bytes()
        elif op == 6:
            cmd = F.QueryPublisherSequence(corr, rng.choice(("", "ref")), stream)
        elif op == 7:
            cmd = F.DeletePublisher(corr, rng.choice((0, 1, 255)))
        elif op in (8, 9):
            kind = rng.choice(list(OffsetType))
            value = rng.choice((0, 1, 5, 2**63 - 1, 2**64 - 1)) if kind == OffsetType.OFFSET else 0
            if kind == OffsetType.TIMESTAMP:
                value = rng.choice((0, -1, int(time.time() * 1000), 2**63 - 1, -(2**63)))
            props = {
                rng.choice(SUBSCRIBE_PROPERTIES): rng.choice(("user_data", "all", "true", SUPER, "x"))
                for _ in range(rng.randrange(3))
            }
            cmd = F.Subscribe(
                corr, sid, stream, F.OffsetSpec(kind, value), rng.choice((0, 1, 10, 65535)), props
            )
        elif op == 10:
            return F.Credit(sid, rng.choice((1, 0, -1, 32767, -32768))).to_bytes()
        elif op == 11:
            offset = rng.choice((0, 1, 2**64 - 1))
            return F.StoreOffset(rng.choice(("ref", "", "r" * 300)), stream, offset).to_bytes()
        elif op == 12:
            cmd = F.QueryOffset(corr, rng.choice(("ref", "")), stream)
        elif op == 13:
            cmd = F.Unsubscribe(corr, sid)
        elif op == 14:
            cmd = F.Metadata(corr, tuple(rng.sample(STREAMS, rng.randrange(0, 4))))
        elif op == 15:
            cmd = rng.choice(
                (
                    F.Route(corr, rng.choice(("0", "1", "", "x")), rng.choice((SUPER, "nope"))),
                    F.Partitions(corr, rng.choice((SUPER, "nope", ""))),
                )
            )
        elif op == 16:
            return F.Heartbeat().to_bytes()
        else:
            # a command of another key or version, or a response a client never sends
            key = rng.choice(
                (rng.randrange(0, 40), Key.PUBLISH_CONFIRM, Key.DELIVER, Key.METADATA_UPDATE, Key.TUNE)
            )
            version = 1 if rng.random() < 0.7 else rng.choice((0, 2, 65535))
            key |= 0x8000 if rng.random() < 0.2 else 0
            return F.frame(
                struct.pack(">HHI", key, version, corr)
                + bytes(rng.randrange(256) for _ in range(rng.randrange(8)))
            )
        return cmd.to_bytes()

    def generate(self) -> tuple[bytes, bytes]:
        """(handshake, the rest): the rest mutated, or the whole, or cut, or oversized."""
        rng = self.rng
        head = b"".join(self._handshake())
        body = [self._command() for _ in range(rng.randrange(2, 25))]
        if rng.random() < 0.05:  # larger than the negotiated frame_max (accepted, as RabbitMQ does)
            big = amqp10_message(b"B" * rng.choice((1_100_000, 3_000_000)))
            body.append(F.Publish.build(0, [(1, big)]).to_bytes())
        if rng.random() < 0.8:
            body.append(F.Close(next(self.corr), 1, "bye").to_bytes())
        rest = b"".join(body)
        r = rng.random()
        if r < 0.1:
            return b"", mutate(rng, head + rest, body)
        if r < 0.7:
            rest = mutate(rng, rest, body)
        elif r < 0.78:
            rest = rest[: rng.randrange(len(rest) + 1)]
        elif r < 0.82:  # a size past the hard limit, or one that never completes
            rest += (
                struct.pack(">I", rng.choice((2**31, 2**32 - 1, 64 * 1024 * 1024 + 1, 1 << 20))) + b"\x00\x02"
            )
        return head, rest

    def one(self) -> str:
        head, rest = self.generate()
        self.current = f"stream {rest[:200]!r} ({len(rest)} bytes after the handshake)"
        try:
            sock = socket.create_connection((self.target.host, self.target.stream_port), timeout=self.timeout)
        except OSError as exc:
            return f"stream connect failed {type(exc).__name__}"
        with sock:
            with contextlib.suppress(OSError):
                sock.sendall(head + rest)
            got, closed = recv_until_closed(sock)
        end = "silent close" if closed else "open (client gave up)"
        for cmd in server_frames(got):
            if isinstance(cmd, F.Close):
                end = f"close {cmd.code} {cmd.reason}"
            elif isinstance(cmd, F.CodeResponse):
                known = cmd.request_key in Key._value2member_map_
                self.replies[f"{Key(cmd.request_key).name if known else cmd.request_key} {cmd.code}"] += 1
        return f"stream {end}"


def super_stream(target: Target) -> None:
    """A super stream of two partitions (streams bound to a direct exchange with their order), so
    that route and partitions have something to find."""
    import pika

    params = pika.ConnectionParameters(
        target.host, target.port, credentials=pika.PlainCredentials(target.user, target.password)
    )
    conn = pika.BlockingConnection(params)
    ch = conn.channel()
    ch.exchange_declare(SUPER, "direct", durable=True)
    for i in range(2):
        name = f"{SUPER}-{i}"
        ch.queue_declare(name, durable=True, arguments={"x-queue-type": "stream"})
        ch.queue_bind(name, SUPER, routing_key=str(i), arguments={"x-stream-partition-order": i})
    conn.close()


class StreamClient:
    """A raw-codec stream client: `request` sends a command and waits for its answer."""

    def __init__(self, target: Target, timeout: float) -> None:
        self.sock = socket.create_connection((target.host, target.stream_port), timeout=timeout)
        self.decoder = F.FrameDecoder(1 << 31)
        self.pending: list[F.Command] = []
        for data in handshake_frames(target.user, target.password):
            self.sock.sendall(data)
        opened = self.wait(lambda c: isinstance(c, F.OpenResponse), timeout)
        assert isinstance(opened, F.OpenResponse) and opened.code == Code.OK, opened

    def send(self, cmd: F.Command) -> None:
        self.sock.sendall(cmd.to_bytes())

    def wait(self, match: Any, timeout: float) -> F.Command:
        deadline = time.monotonic() + timeout
        while True:
            for i, cmd in enumerate(self.pending):
                if match(cmd):
                    return self.pending.pop(i)
            if time.monotonic() > deadline:
                raise TimeoutError(f"no answer; pending {self.pending[-3:]}")
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = recv_some(self.sock)
            if chunk == b"":
                raise ConnectionError("the broker closed the connection")
            if chunk:
                self.decoder.feed(chunk)
                self.pending += [F.parse(b, from_server=True) for b in self.decoder.frames()]
                del self.pending[:-100]

    def close(self) -> None:
        self.sock.close()


class StreamNeighbour(Neighbour):
    """Publishes one message at a time on its own stream and reads it back from its subscription."""

    label = "stream neighbour"

    def connect(self) -> None:
        c = self.client = StreamClient(self.target, FAILURE_SECONDS)
        c.send(F.CreateStream(1, NEIGHBOUR_STREAM, {}))
        created = c.wait(lambda x: isinstance(x, F.CodeResponse) and x.corr == 1, FAILURE_SECONDS)
        assert isinstance(created, F.CodeResponse) and created.code in (Code.OK, Code.STREAM_ALREADY_EXISTS)
        for corr, cmd in (
            (2, F.DeclarePublisher(2, 0, "", NEIGHBOUR_STREAM)),
            (3, F.Subscribe(3, 0, NEIGHBOUR_STREAM, F.OffsetSpec(OffsetType.NEXT), 10)),
        ):
            c.send(cmd)
            answer = c.wait(
                lambda x, corr=corr: isinstance(x, F.CodeResponse) and x.corr == corr, FAILURE_SECONDS
            )
            assert isinstance(answer, F.CodeResponse) and answer.code == Code.OK, answer
        self.n = 0

    def check(self) -> None:
        c = self.client
        self.n += 1
        token = f"neighbour-{self.n}-{time.monotonic_ns()}".encode()
        c.send(F.Publish.build(0, [(self.n, amqp10_message(token))]))
        c.wait(lambda x: isinstance(x, F.PublishConfirm) and self.n in x.publishing_ids, FAILURE_SECONDS)
        c.wait(lambda x: isinstance(x, F.Deliver) and token in x.chunk, FAILURE_SECONDS)
        c.send(F.Credit(0, 1))

    def disconnect(self) -> None:
        self.client.close()


if __name__ == "__main__":
    sys.exit(
        main(
            fuzzers={"stream": StreamFuzz},
            neighbours=[StreamNeighbour, AmqpNeighbour, ManagementNeighbour],
            modes="stream",
            description=(__doc__ or "").splitlines()[0],
        )
    )
