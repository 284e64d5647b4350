"""Frame fuzzing: random and mutated AMQP frames after a valid handshake must never hurt the broker.

For every example a fresh raw connection completes the handshake (pamqp frames written by hand), opens
channel 1 and sends fuzz. Properties checked:

* the fuzzed connection either keeps working, or ends with connection.close carrying a 5xx code, or is
  closed by the server; it never gets a connection.close with a 2xx-4xx code;
* a concurrent healthy pika connection keeps publishing and consuming after every example;
* after the run a brand-new connection still completes a handshake.

Bounded: 200 examples, a 60 s test timeout, short socket timeouts. Runs against hashbroker; the same
harness runs against RabbitMQ (the oracle must satisfy the property too, which keeps it honest).
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import time
import uuid
from typing import Any

import pika
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pamqp import commands, frame, header
from pamqp.body import ContentBody

from tests.differential_support import RawAmqp, RawClosed, credentials, hashbroker_url, host_port, url_params

MAX_EXAMPLES = int(os.environ.get("HASHBROKER_FUZZ_EXAMPLES", "200"))
FRAME_END = b"\xce"

# pamqp validates queue/exchange names against [a-zA-Z0-9-_.:]*; other bytes come from the mutations
names = st.text(alphabet="abcxyzAZ019-_.:", max_size=20)
small = st.integers(min_value=0, max_value=70000)


def _methods() -> st.SearchStrategy[Any]:
    """Well-formed methods with arbitrary field values: the server must cope with every one."""
    bools = st.booleans()
    return st.one_of(
        st.builds(
            commands.Queue.Declare,
            queue=names,
            passive=bools,
            durable=st.just(False),
            exclusive=bools,
            auto_delete=bools,
            nowait=bools,
        ),
        st.builds(commands.Queue.Bind, queue=names, exchange=names, routing_key=names, nowait=bools),
        st.builds(commands.Queue.Delete, queue=names, if_unused=bools, if_empty=bools),
        st.builds(commands.Queue.Purge, queue=names),
        st.builds(
            commands.Exchange.Declare,
            exchange=names,
            exchange_type=st.sampled_from(
                ["direct", "fanout", "topic", "headers", "x-consistent-hash", "x-modulus-hash", "nope", ""]
            ),
            passive=bools,
            durable=st.just(False),
            auto_delete=bools,
            internal=bools,
        ),
        st.builds(commands.Exchange.Delete, exchange=names, if_unused=bools),
        st.builds(commands.Basic.Qos, prefetch_count=st.integers(0, 65535), global_=bools),
        st.builds(commands.Basic.Consume, queue=names, consumer_tag=names, no_ack=bools, exclusive=bools),
        st.builds(commands.Basic.Cancel, consumer_tag=names),
        st.builds(commands.Basic.Get, queue=names, no_ack=bools),
        st.builds(commands.Basic.Ack, delivery_tag=st.integers(0, 2**64 - 1), multiple=bools),
        st.builds(commands.Basic.Nack, delivery_tag=st.integers(0, 2**64 - 1), multiple=bools, requeue=bools),
        st.builds(commands.Basic.Reject, delivery_tag=st.integers(0, 2**64 - 1), requeue=bools),
        st.builds(commands.Basic.Recover, requeue=bools),
        st.just(commands.Tx.Select()),
        st.just(commands.Tx.Commit()),
        st.just(commands.Tx.Rollback()),
        st.just(commands.Confirm.Select()),
        st.just(commands.Channel.Flow(active=True)),
        st.just(commands.Channel.Open()),
        st.just(commands.Connection.Open()),
        st.just(commands.Connection.TuneOk(channel_max=1, frame_max=4096, heartbeat=1)),
    )


def _valid_frames() -> st.SearchStrategy[bytes]:
    """One or more marshalled frames: a method, or a full publish (method + header + bodies)."""
    method_frame = st.tuples(_methods(), st.integers(0, 3)).map(lambda mc: frame.marshal(mc[0], mc[1]))
    publish = st.builds(
        lambda x, rk, body, declared, mandatory: (
            frame.marshal(commands.Basic.Publish(exchange=x, routing_key=rk, mandatory=mandatory), 1)
            + frame.marshal(header.ContentHeader(0, declared, commands.Basic.Properties()), 1)
            + (frame.marshal(ContentBody(body), 1) if body else b"")
        ),
        st.sampled_from(["", "amq.direct", "amq.fanout", "missing"]),
        names,
        st.binary(max_size=64),
        st.integers(0, 80),
        st.booleans(),
    )
    return st.one_of(method_frame, publish)


@st.composite
def _mutated(draw: st.DrawFn) -> bytes:
    """A valid frame sequence with bit flips, truncation, insertions or a length field rewritten."""
    data = bytearray(draw(_valid_frames()))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "length", "type", "end"]))
        if not data:
            break
        pos = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "truncate":
            del data[pos:]
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "length" and len(data) >= 7:
            data[3:7] = struct.pack(">I", draw(st.sampled_from([0, 1, 7, 4095, 131072, 2**31, 2**32 - 1])))
        elif kind == "type":
            data[0] = draw(st.integers(0, 255))
        elif kind == "end":
            data[-1] = draw(st.integers(0, 255))
    return bytes(data)


def _raw_frame() -> st.SearchStrategy[bytes]:
    """A frame header with random type/channel/size claims around a random payload."""
    return st.builds(
        lambda ftype, channel, payload, claimed: (
            struct.pack(">BHI", ftype, channel, len(payload) if claimed is None else claimed)
            + payload
            + FRAME_END
        ),
        st.sampled_from([1, 2, 3, 8, 0, 4, 9, 65, 206, 255]),
        st.sampled_from([0, 1, 2, 65535]),
        st.binary(max_size=40),
        st.one_of(st.none(), st.integers(0, 2**32 - 1)),
    )


fuzz_payload = st.lists(
    st.one_of(_mutated(), _raw_frame(), st.binary(min_size=1, max_size=64), _valid_frames()),
    min_size=1,
    max_size=5,
).map(b"".join)


class Healthy:
    """A pika connection that publishes and consumes one message per check."""

    def __init__(self, url: str) -> None:
        self.conn = pika.BlockingConnection(url_params(url))
        self.ch = self.conn.channel()
        self.queue = f"hb.fuzz.healthy.{uuid.uuid4().hex[:10]}"
        self.ch.queue_declare(self.queue, exclusive=True)
        self.n = 0

    def check(self) -> None:
        self.n += 1
        body = str(self.n).encode()
        self.ch.basic_publish("", self.queue, body)
        got: list[bytes] = []
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            method, _props, data = self.ch.basic_get(self.queue, auto_ack=True)
            if method is not None:
                got.append(data)
        assert got == [body], f"healthy connection lost its message {self.n}: {got}"

    def close(self) -> None:
        if self.conn.is_open:
            self.conn.close()


def _outcome(raw: RawAmqp, quiet: float) -> tuple[str, Any]:
    """What the server did with the fuzz: ('open', frames), ('closed', frames) or ('close', code)."""
    frames = []
    while True:
        try:
            channel, value = raw.recv(quiet)
        except TimeoutError:
            return "open", frames
        except (RawClosed, OSError):
            return "closed", frames
        except Exception:
            raise
        frames.append((channel, type(value).__name__))
        if isinstance(value, commands.Connection.Close):
            with_code = value.reply_code
            with contextlib.suppress(OSError):
                raw.send(0, commands.Connection.CloseOk())
            return "close", with_code


def _fuzz(url: str) -> None:
    host, port = host_port(url)
    user, password, vhost = credentials(url)
    healthy = Healthy(url)
    seen: dict[str, int] = {}

    # explicit + generate only: shrinking would re-run examples past the time budget; a failure is
    # reported with its (unshrunk) payload, which is enough to reproduce it.
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate],
    )
    @given(payload=fuzz_payload)
    def example(payload: bytes) -> None:
        raw = RawAmqp(host, port, user=user, password=password, vhost=vhost, timeout=3)
        try:
            raw.open_channel(1)
            # the server may already have hung up on an earlier frame: that is allowed
            with contextlib.suppress(OSError):
                raw.send_bytes(payload)
            kind, detail = _outcome(raw, quiet=0.05)
            seen[kind] = seen.get(kind, 0) + 1
            if kind == "close":
                assert detail >= 500, f"connection.close with non-5xx code {detail} for payload {payload!r}"
        finally:
            raw.close()
        healthy.check()

    try:
        example()
        healthy.check()
        # a brand-new connection still completes the handshake and can declare a queue
        fresh = RawAmqp(host, port, user=user, password=password, vhost=vhost, timeout=3)
        fresh.open_channel(1)
        ok = fresh.call(1, commands.Queue.Declare(queue="", exclusive=True), commands.Queue.DeclareOk)
        assert ok.queue
        fresh.close()
    finally:
        healthy.close()
    assert sum(seen.values()) > 0


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_fuzz_frames_hashbroker(request: pytest.FixtureRequest) -> None:
    """hashbroker survives random and mutated frames; healthy clients are unaffected."""
    _fuzz(hashbroker_url(request))


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.timeout(90)
def test_fuzz_frames_rabbitmq_oracle(rabbitmq_url: str) -> None:
    """The same property holds for RabbitMQ 3.10.8 (validates the harness, not the broker)."""
    if os.environ.get("HASHBROKER_FUZZ_ORACLE", "1") == "0":
        pytest.skip("oracle fuzz disabled by HASHBROKER_FUZZ_ORACLE=0")
    _fuzz(rabbitmq_url)


def test_fuzz_strategies_produce_bytes() -> None:
    """The strategies themselves generate bytes (no broker needed): a cheap guard for the harness."""

    @settings(max_examples=30, deadline=None, database=None)
    @given(payload=fuzz_payload)
    def check(payload: bytes) -> None:
        assert isinstance(payload, bytes)

    check()
    assert socket  # socket is used by RawAmqp; keep the import explicit for readers
