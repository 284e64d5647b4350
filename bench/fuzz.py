"""Mutation fuzzing of a running broker while innocent neighbour clients keep working.

    python bench/fuzz.py --seconds 300                      # starts `hashbroker serve` on free ports
    python bench/fuzz.py --seconds 300 --modes http          # one fuzzer only
    python bench/fuzz.py --seconds 60 --port 5672 --management-port 15672 --no-serve

Three fuzzers take turns on `--workers` threads, each input on a fresh connection:

* `amqp`: streams recorded from what real clients send (the handshake, channel.open, declares with
  argument tables, publishes with every property and a nested headers table, gets, acks, qos,
  consumes, cancels, closes), built with pamqp, then mutated (bit flips, byte changes, inserted or
  deleted bytes, length fields set to extreme values, frames duplicated or spliced from another
  stream), mostly after the handshake so that the session layer is reached.
* `queues`: an interactive client drives quorum, stream and classic queues with generated commands:
  declares with random x-arguments of every field type, consumers with odd `x-stream-offset`
  values, basic.get/ack/nack/reject/recover on them, delivery limits and dead-lettering from one
  queue type to another; a closed channel is acknowledged and reopened so that a session goes deep.
* `http`: management API requests on the paths of broker/management/routes.py with random methods,
  bad percent-encoding, odd query strings, malformed, huge, deeply nested or odd JSON bodies, bad
  or missing credentials, header floods, chunked bodies, and slow or truncated delivery.

Neighbours, on their own connections and threads for the whole run: an AMQP publisher whose
message a consumer on another connection must receive, and a management client reading the
overview and the neighbour's queue, each about five times a second. A round trip over `--stall`
seconds is a stall; one that fails (or takes over 10 s) is a failure.

Counted: how each input ended, the unhandled exceptions in the broker's log (every logged
traceback, grouped by exception and innermost frame; the AMQP connection's last-resort handler
logs one with each 541 INTERNAL_ERROR it sends), neighbour stalls and failures. The last line is
`RESULT unhandled=N stalls=N busy_stalls=N failures=N max_latency=S`; the exit status is 0 only
when unhandled, stalls and failures are 0. Each stall says how much CPU the broker's main thread
used during it and how long it waited for a CPU (/proc/PID/schedstat): `busy_stalls` counts those
in which the broker ran for half the threshold or more, i.e. its own work held the neighbour up
rather than the machine's load. bench/fuzz_stream.py runs the stream-protocol fuzzer on the same harness.
"""

from __future__ import annotations

import argparse
import base64
import collections
import contextlib
import datetime
import decimal
import http.client
import json
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pamqp import commands, frame, header
from pamqp.body import ContentBody
from pamqp.exceptions import UnmarshalingException

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

HANDSHAKE_END_MARK = "after-open"
NEIGHBOUR_QUEUE = "fuzz-neighbour"
FAILURE_SECONDS = 10.0


# -- the broker under test ---------------------------------------------------------------------


@dataclass
class Target:
    """Where the broker listens (0: that listener is not fuzzed) and how to log in."""

    host: str = "127.0.0.1"
    port: int = 5672
    management_port: int = 0
    stream_port: int = 0
    user: str = "guest"
    password: str = "guest"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def serve(target: Target, log_path: Path) -> subprocess.Popen[bytes]:
    """`hashbroker serve` on target's ports (free ones where 0), logging at DEBUG to `log_path`."""
    target.port = target.port or free_port()
    cmd = [sys.executable, "-m", "broker.cli.main", "serve", "--port", str(target.port)]
    cmd += ["--data-dir", ":memory:"]
    if target.management_port >= 0:
        target.management_port = target.management_port or free_port()
        cmd += ["--management-port", str(target.management_port)]
    if target.stream_port >= 0:
        target.stream_port = target.stream_port or free_port()
        cmd += ["--stream-port", str(target.stream_port)]
    env = {**os.environ, "HASHBROKER_LOG_LEVEL": "DEBUG"}
    proc = subprocess.Popen(cmd, env=env, stderr=log_path.open("wb"), cwd=ROOT)
    for port in (target.port, target.management_port, target.stream_port):
        if port > 0:
            wait_port(port)
    return proc


# -- mutation ----------------------------------------------------------------------------------


def mutate(rng: random.Random, data: bytes, others: list[bytes]) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3, 8))):
        if not buf:
            break
        op = rng.randrange(7)
        i = rng.randrange(len(buf))
        if op == 0:
            buf[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            buf[i] = rng.choice((0, 0xFF, 0x7F, 0x80, 0xCE, rng.randrange(256)))
        elif op == 2:
            buf[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
        elif op == 3:
            del buf[i : i + rng.randrange(1, 9)]
        elif op == 4 and i + 4 <= len(buf):  # a length-looking field set to an extreme
            buf[i : i + 4] = struct.pack(
                ">I", rng.choice((0, 1, 0x7FFFFFFF, 0xFFFFFFFF, rng.randrange(1 << 16)))
            )
        elif op == 5:
            j = rng.randrange(len(buf))
            a, b = sorted((i, j))
            buf[b:b] = buf[a : min(b, a + 200)]
        else:
            other = rng.choice(others)
            k = rng.randrange(len(other))
            buf[i:i] = other[k : k + rng.randrange(1, 100)]
    return bytes(buf)


ODD_STRINGS = (
    *("", "x", "first", "last", "next", "1h", "30s", "7D", "10Y", "-1s", "0s", "1.5h", "999999999999M"),
    *("drop-head", "reject-publish", "reject-publish-dlx", "at-most-once", "at-least-once"),
    *("client-local", "balanced", "random", "quorum", "stream", "classic", "lazy", "default"),
    *("fz-dlx", "amq.direct", "\u00e9\u00e8", "\x00", "a" * 300),
)


def odd_value(rng: random.Random, depth: int = 0) -> Any:
    """A value of any AMQP field-table type, mostly the edge cases of each."""
    kind = rng.randrange(12 if depth < 2 else 9)
    if kind == 0:
        return rng.choice((0, 1, -1, 2, 10, 255, 2**31 - 1, 2**31, -(2**31), 2**63 - 1, -(2**63)))
    if kind == 1:
        return rng.randrange(-5, 100000)
    if kind == 2:
        return rng.choice(ODD_STRINGS)
    if kind == 3:
        return rng.random() < 0.5
    if kind == 4:
        return rng.choice((0.0, -0.5, 1.5, 3.4e38, -3.4e38, 2.0**63, 1e-40))
    if kind == 5:
        return decimal.Decimal(rng.choice(("1.5", "-3", "0.001", "12345678.9")))
    if kind == 6:
        return datetime.datetime(rng.choice((1970, 2000, 2038, 2106)), 1, 1)
    if kind == 7:
        return None
    if kind == 8:
        return rng.randrange(1, 20)
    if kind in (9, 10):
        return {rng.choice(("a", "x-b", "")): odd_value(rng, depth + 1) for _ in range(rng.randrange(3))}
    return [odd_value(rng, depth + 1) for _ in range(rng.randrange(4))]


# -- AMQP: mutated recorded streams ------------------------------------------------------------


def handshake(user: str = "guest", password: str = "guest") -> bytes:
    """Protocol header, start-ok, tune-ok, open: the prefix every recorded stream starts with."""
    out = frame.marshal(header.ProtocolHeader(), 0)
    props = {"product": "fuzz", "capabilities": {"publisher_confirms": True, "basic.nack": True}}
    out += frame.marshal(
        commands.Connection.StartOk(client_properties=props, response=f"\0{user}\0{password}"), 0
    )
    out += frame.marshal(commands.Connection.TuneOk(channel_max=2047, frame_max=131072, heartbeat=0), 0)
    out += frame.marshal(commands.Connection.Open(virtual_host="/"), 0)
    return out


def publish(
    channel: int, body: bytes, props: commands.Basic.Properties, rk: str = "fz", x: str = ""
) -> bytes:
    out = frame.marshal(commands.Basic.Publish(exchange=x, routing_key=rk, mandatory=True), channel)
    out += frame.marshal(header.ContentHeader(0, len(body), props), channel)
    if body:
        out += frame.marshal(ContentBody(body), channel)
    return out


def streams() -> list[bytes]:
    """The recorded sessions (everything after the handshake)."""
    rich = commands.Basic.Properties(
        content_type="application/json",
        content_encoding="gzip",
        headers={"a": 1, "b": "two", "n": {"deep": [1, 2.5, "x", {"k": True}]}, "t": -5},
        delivery_mode=2,
        priority=5,
        correlation_id="c1",
        reply_to="r",
        expiration="60000",
        message_id="m1",
        timestamp=None,
        message_type="t",
        user_id="guest",
        app_id="fuzz",
    )
    args = {"x-max-length": 10, "x-message-ttl": 1000, "x-dead-letter-exchange": "", "x-queue-mode": "lazy"}
    s1 = frame.marshal(commands.Channel.Open(), 1)
    s1 += frame.marshal(commands.Confirm.Select(), 1)
    s1 += frame.marshal(commands.Queue.Declare(queue="fz", arguments=args, auto_delete=True), 1)
    s1 += publish(1, b"hello", rich)
    s1 += publish(1, b"x" * 300, commands.Basic.Properties(headers={"k": [1, 2, 3]}))
    s1 += frame.marshal(commands.Basic.Get(queue="fz"), 1)
    s1 += frame.marshal(commands.Basic.Ack(delivery_tag=1), 1)
    s1 += frame.marshal(commands.Channel.Close(200, "bye", 0, 0), 1)
    s2 = frame.marshal(commands.Channel.Open(), 2)
    s2 += frame.marshal(commands.Basic.Qos(prefetch_count=5), 2)
    s2 += frame.marshal(
        commands.Exchange.Declare(exchange="fzx", exchange_type="headers", auto_delete=True), 2
    )
    s2 += frame.marshal(commands.Queue.Declare(queue="", exclusive=True), 2)
    s2 += frame.marshal(
        commands.Queue.Bind(queue="", exchange="fzx", arguments={"x-match": "any", "h": 1}), 2
    )
    s2 += frame.marshal(commands.Basic.Consume(queue="", consumer_tag="ct", arguments={"x-priority": 3}), 2)
    s2 += publish(2, b"body", rich, rk="")
    s2 += frame.marshal(commands.Basic.Cancel(consumer_tag="ct"), 2)
    s2 += frame.marshal(commands.Tx.Select(), 2)
    s2 += publish(2, b"t", commands.Basic.Properties(), rk="fz")
    s2 += frame.marshal(commands.Tx.Commit(), 2)
    s2 += frame.marshal(commands.Connection.Close(200, "bye", 0, 0), 0)
    s3 = frame.marshal(commands.Channel.Open(), 3)
    s3 += frame.marshal(commands.Exchange.Declare(exchange="fzh", exchange_type="x-consistent-hash"), 3)
    s3 += frame.marshal(
        commands.Queue.Declare(queue="fzq", arguments={"x-queue-type": "quorum"}, durable=True), 3
    )
    s3 += frame.marshal(commands.Queue.Delete(queue="fzq"), 3)
    s3 += frame.marshal(commands.Exchange.Delete(exchange="fzh"), 3)
    s3 += frame.marshal(commands.Basic.Recover(requeue=True), 3)
    s3 += frame.marshal(commands.Basic.Reject(delivery_tag=1, requeue=False), 3)
    s4 = frame.marshal(commands.Channel.Open(), 4)
    s4 += frame.marshal(
        commands.Queue.Declare(queue="fzs", durable=True, arguments={"x-queue-type": "stream"}), 4
    )
    s4 += publish(4, b"s", rich, rk="fzs")
    s4 += frame.marshal(commands.Basic.Qos(prefetch_count=10), 4)
    s4 += frame.marshal(
        commands.Basic.Consume(queue="fzs", consumer_tag="cs", arguments={"x-stream-offset": "first"}), 4
    )
    s4 += frame.marshal(commands.Basic.Ack(delivery_tag=1, multiple=True), 4)
    s4 += frame.marshal(commands.Basic.Cancel(consumer_tag="cs"), 4)
    return [s1, s2, s3, s4]


def recv_some(sock: socket.socket) -> bytes | None:
    """What the server sent next: b"" once it closed, None when it was quiet for the timeout."""
    try:
        return sock.recv(65536)
    except TimeoutError:
        return None
    except OSError:
        return b""


def recv_until_closed(sock: socket.socket) -> tuple[bytes, bool]:
    """Read until the server closes (True) or goes quiet for the socket's timeout (False)."""
    got = b""
    while (chunk := recv_some(sock)) is not None:
        if not chunk:
            return got, True
        got += chunk
    return got, False


def run_one(port: int, data: bytes, timeout: float) -> str:
    """Send `data`, read until the server closes; returns how the connection ended."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        with contextlib.suppress(OSError):
            s.sendall(data)
        got, closed = recv_until_closed(s)
    return closes(got) or ("silent close" if closed else "open (client gave up)")


def closes(data: bytes) -> str:
    """The reply code of the first connection.close the server sent, if any."""
    pos = 8 if data.startswith(b"AMQP") else 0
    while pos + 7 <= len(data):
        ftype, channel, size = struct.unpack_from(">BHI", data, pos)
        payload = data[pos + 7 : pos + 7 + size]
        if ftype == 1 and channel == 0 and payload[:4] == b"\x00\x0a\x00\x32" and len(payload) >= 6:
            return f"connection.close {struct.unpack_from('>H', payload, 4)[0]}"
        pos += 8 + size
    return ""


class Fuzzer:
    """One kind of input: `one()` sends one on a fresh connection and says how it ended."""

    name = ""

    def __init__(self, target: Target, rng: random.Random, timeout: float) -> None:
        self.target = target
        self.rng = rng
        self.timeout = timeout
        self.current = ""  # a short description of the input being sent, for stall reports
        self.replies: collections.Counter[str] = collections.Counter()  # what the server answered

    def one(self) -> str:
        raise NotImplementedError


class AmqpFuzz(Fuzzer):
    name = "amqp"

    def __init__(self, target: Target, rng: random.Random, timeout: float) -> None:
        super().__init__(target, rng, timeout)
        self.prefix = handshake(target.user, target.password)
        self.recorded = streams()

    def one(self) -> str:
        rng = self.rng
        body = rng.choice(self.recorded)
        if rng.random() < 0.1:
            data = mutate(rng, self.prefix + body, self.recorded)
        else:
            data = self.prefix + mutate(rng, body, self.recorded)
        self.current = f"amqp {data[len(self.prefix) :][:120]!r}"
        return run_one(self.target.port, data, self.timeout)


# -- AMQP: quorum, stream and classic queues, interactively ------------------------------------


class RawAmqpClient:
    """A raw AMQP 0-9-1 connection that sends pamqp frames and reads what comes back."""

    def __init__(self, target: Target, timeout: float) -> None:
        self.sock = socket.create_connection((target.host, target.port), timeout=timeout)
        self.buf = b""
        self.closed = False
        self.sock.sendall(handshake(target.user, target.password))

    def send(self, data: bytes) -> None:
        if not self.closed:
            try:
                self.sock.sendall(data)
            except OSError:
                self.closed = True

    def frames(self, quiet: float) -> Iterator[tuple[int, Any]]:
        """Frames until the server is quiet for `quiet` seconds or closes."""
        self.sock.settimeout(quiet)
        while not self.closed:
            while True:
                try:
                    used, channel, value = frame.unmarshal(self.buf)
                except (UnmarshalingException, ValueError, struct.error, KeyError, IndexError):
                    break
                if used <= 0:
                    break
                self.buf = self.buf[used:]
                yield channel, value
            chunk = recv_some(self.sock)
            if not chunk:
                self.closed = chunk is not None
                return
            self.buf += chunk

    def close(self) -> None:
        self.sock.close()


QUEUE_ARGS = (
    "x-queue-type",
    "x-max-length",
    "x-max-length-bytes",
    "x-overflow",
    "x-delivery-limit",
    "x-dead-letter-exchange",
    "x-dead-letter-routing-key",
    "x-dead-letter-strategy",
    "x-message-ttl",
    "x-expires",
    "x-max-age",
    "x-stream-max-segment-size-bytes",
    "x-queue-leader-locator",
    "x-initial-cluster-size",
    "x-single-active-consumer",
    "x-max-in-memory-length",
    "x-max-in-memory-bytes",
    "x-max-priority",
    "x-queue-mode",
    "x-queue-master-locator",
    "x-quorum-initial-group-size",
)
QUEUES = ("fzq-a", "fzq-b", "fzs-a", "fzs-b", "fzc-a", "fz-dl")
DLX = "fz-dlx"


class QueueTypesFuzz(Fuzzer):
    """Generated sessions on quorum, stream and classic queues (see the module docstring)."""

    name = "queues"

    def _queue_type(self, name: str) -> str:
        return {"fzq": "quorum", "fzs": "stream", "fzc": "classic"}.get(name[:3], "")

    def _args(self, name: str) -> dict[str, Any]:
        rng = self.rng
        args: dict[str, Any] = {}
        qtype = self._queue_type(name)
        if qtype and rng.random() < 0.9:
            args["x-queue-type"] = qtype
        for _ in range(rng.randrange(4)):
            key = rng.choice(QUEUE_ARGS)
            args[key] = odd_value(rng) if rng.random() < 0.3 else self._sane(key)
        if rng.random() < 0.3:
            args["x-dead-letter-exchange"] = DLX
            args["x-delivery-limit"] = rng.randrange(0, 3)
        return args

    def _sane(self, key: str) -> Any:
        rng = self.rng
        return {
            "x-dead-letter-exchange": DLX,
            "x-dead-letter-routing-key": rng.choice(QUEUES),
            "x-dead-letter-strategy": rng.choice(("at-most-once", "at-least-once")),
            "x-overflow": rng.choice(("drop-head", "reject-publish", "reject-publish-dlx")),
            "x-max-age": rng.choice(("1s", "1h", "7D")),
            "x-queue-type": rng.choice(("quorum", "stream", "classic")),
        }.get(key, rng.randrange(0, 5))

    def _offset(self) -> Any:
        rng = self.rng
        return rng.choice(
            (
                "first",
                "last",
                "next",
                0,
                1,
                -1,
                2**63 - 1,
                -(2**63),
                "1s",
                "1h",
                "999Y",
                "0s",
                "-5m",
                "10x",
                "",
                datetime.datetime(2000, 1, 1),
                datetime.datetime(2106, 1, 1),
                1.5,
                decimal.Decimal("2.5"),
                True,
                None,
                {"a": 1},
                [1],
                rng.randrange(0, 50),
            )
        )

    def _props(self) -> commands.Basic.Properties:
        rng = self.rng
        kw: dict[str, Any] = {}
        if rng.random() < 0.5:
            kw["delivery_mode"] = rng.choice((1, 2))
        if rng.random() < 0.3:
            kw["expiration"] = rng.choice(("0", "1", "100", "-1", "x", "", "99999999999999999999"))
        if rng.random() < 0.3:
            kw["priority"] = rng.choice((0, 5, 9, 10, 255))
        if rng.random() < 0.4:
            headers: dict[str, Any] = {"x-fz": odd_value(rng)}
            if rng.random() < 0.3:  # a forged death history
                headers["x-death"] = rng.choice(
                    ([{"count": odd_value(rng), "queue": "fzq-a"}], odd_value(rng))
                )
            if rng.random() < 0.2:
                headers["x-delivery-count"] = odd_value(rng)
            if rng.random() < 0.2:
                headers["x-stream-offset"] = odd_value(rng)
            kw["headers"] = headers
        if rng.random() < 0.1:
            kw["user_id"] = rng.choice(("guest", "other"))
        try:
            return commands.Basic.Properties(**kw)
        except (ValueError, TypeError):
            return commands.Basic.Properties()

    def _command(self, ch: int, tags: list[int]) -> bytes:
        rng = self.rng
        queue = rng.choice(QUEUES)
        tag = rng.choice(tags) if tags and rng.random() < 0.9 else rng.choice((0, 1, 2, 5, 1000, 2**63 - 1))
        op = rng.randrange(21)
        m: Any
        if op == 0:
            m = commands.Queue.Declare(
                queue=queue,
                durable=rng.random() < 0.85,
                exclusive=rng.random() < 0.05,
                auto_delete=rng.random() < 0.05,
                passive=rng.random() < 0.05,
                arguments=self._args(queue),
            )
        elif op == 1:
            m = commands.Exchange.Declare(
                exchange=DLX, exchange_type="fanout" if rng.random() < 0.9 else "direct", durable=True
            )
        elif op == 2:
            m = commands.Queue.Bind(queue=queue, exchange=rng.choice((DLX, "amq.fanout", "amq.direct")))
        elif op in (3, 4, 5):
            body = rng.choice((b"", b"m", b"x" * rng.randrange(1, 5000)))
            x = rng.choice(("", "", DLX, "amq.fanout"))
            return publish(ch, body, self._props(), rk=queue, x=x)
        elif op == 6:
            m = commands.Basic.Qos(
                prefetch_count=rng.choice((0, 1, 2, 10, 65535)), global_=rng.random() < 0.1
            )
        elif op in (7, 8):
            args: dict[str, Any] = {}
            if rng.random() < 0.8:
                args["x-stream-offset"] = self._offset()
            if rng.random() < 0.2:
                args["x-priority"] = odd_value(rng)
            if rng.random() < 0.1:
                args["x-cancel-on-ha-failover"] = odd_value(rng)
            m = commands.Basic.Consume(
                queue=queue,
                consumer_tag=rng.choice(("", "c1", "c2")),
                no_ack=rng.random() < 0.2,
                exclusive=rng.random() < 0.1,
                arguments=args,
            )
        elif op == 9:
            m = commands.Basic.Cancel(consumer_tag=rng.choice(("c1", "c2", "nope")))
        elif op in (10, 11):
            m = commands.Basic.Get(queue=queue, no_ack=rng.random() < 0.2)
        elif op == 12:
            m = commands.Basic.Ack(delivery_tag=tag, multiple=rng.random() < 0.3)
        elif op in (13, 14):
            m = commands.Basic.Nack(delivery_tag=tag, multiple=rng.random() < 0.3, requeue=rng.random() < 0.7)
        elif op == 15:
            m = commands.Basic.Reject(delivery_tag=tag, requeue=rng.random() < 0.7)
        elif op == 16:
            m = rng.choice((commands.Basic.Recover(requeue=rng.random() < 0.95), commands.Basic.Recover()))
        elif op == 17:
            m = rng.choice(
                (
                    commands.Queue.Purge(queue=queue),
                    commands.Queue.Delete(queue=queue, if_unused=rng.random() < 0.3),
                    commands.Queue.Unbind(queue=queue, exchange=DLX),
                )
            )
        elif op in (18, 19):
            m = rng.choice(
                (
                    commands.Tx.Select(),
                    commands.Tx.Commit(),
                    commands.Tx.Rollback(),
                    commands.Confirm.Select(),
                )
            )
        elif op == 20 and rng.random() < 0.2:
            m = commands.Channel.Flow(active=rng.random() < 0.5)
        else:
            m = commands.Queue.Declare(queue=queue, durable=True, arguments=self._args(queue))
        try:
            return frame.marshal(m, ch)
        except (ValueError, TypeError, OverflowError, struct.error) as exc:  # a value pamqp will not encode
            self.replies[f"unencodable {type(exc).__name__}"] += 1
            return b""

    def _dead_letter_chain(self, rng: random.Random) -> bytes:
        """A fresh queue of one type with a small delivery limit, dead-lettering into a queue of
        another type, its message rejected until the limit, then read from the other end."""
        source = rng.choice(("fzq-b", "fzc-a", "fzs-b"))
        qtype = rng.choice(("quorum", "stream", "classic"))
        args: dict[str, Any] = {"x-queue-type": self._queue_type(source), "x-dead-letter-exchange": DLX}
        args["x-delivery-limit"] = rng.randrange(0, 3)
        if rng.random() < 0.5:
            args["x-dead-letter-strategy"] = rng.choice(("at-least-once", "at-most-once", "x"))
            args["x-overflow"] = rng.choice(("reject-publish", "drop-head"))
        if rng.random() < 0.3:
            args["x-message-ttl"] = rng.choice((0, 1, 50))
        out = [
            commands.Queue.Delete(queue=source),
            commands.Queue.Delete(queue="fz-dl"),
            commands.Exchange.Declare(exchange=DLX, exchange_type="fanout", durable=True),
            commands.Queue.Declare(queue="fz-dl", durable=True, arguments={"x-queue-type": qtype}),
            commands.Queue.Bind(queue="fz-dl", exchange=DLX),
            commands.Queue.Declare(queue=source, durable=True, arguments=args),
        ]
        data = b"".join(frame.marshal(m, 1) for m in out)
        data += publish(1, b"dl", self._props(), rk=source)
        for tag in range(1, rng.randrange(2, 6)):
            data += frame.marshal(commands.Basic.Get(queue=source), 1)
            data += frame.marshal(commands.Basic.Reject(delivery_tag=tag, requeue=True), 1)
        data += frame.marshal(commands.Basic.Qos(prefetch_count=5), 1)
        consume = commands.Basic.Consume(
            queue="fz-dl", consumer_tag="c1", arguments={"x-stream-offset": "first"}
        )
        return data + frame.marshal(consume, 1)

    def one(self) -> str:
        rng = self.rng
        try:
            client = RawAmqpClient(self.target, self.timeout)
        except OSError as exc:
            return f"queues connect failed {type(exc).__name__}"
        try:
            return self._session(client, rng)
        finally:
            client.close()

    def _session(self, client: RawAmqpClient, rng: random.Random) -> str:
        channels = (1, 2)
        tags: dict[int, list[int]] = {ch: [] for ch in channels}
        opened = b"".join(frame.marshal(commands.Channel.Open(), ch) for ch in channels)
        client.send(opened)
        if rng.random() < 0.4:
            client.send(self._dead_letter_chain(rng))
        sent: list[bytes] = []
        for _ in range(rng.randrange(5, 40)):
            ch = rng.choice(channels)
            data = self._command(ch, tags[ch])
            if rng.random() < 0.03:
                data = mutate(rng, data, sent or [data]) if data else data
            sent.append(data)
            self.current = f"queues {data[:160]!r}"
            client.send(data)
            if rng.random() < 0.5:
                end = self._read(client, tags, quiet=0.02)
                if end:
                    return end
        client.send(frame.marshal(commands.Connection.Close(200, "bye", 0, 0), 0))
        return self._read(client, tags, quiet=self.timeout) or "queues open (client gave up)"

    def _read(self, client: RawAmqpClient, tags: dict[int, list[int]], quiet: float) -> str:
        for ch, value in client.frames(quiet):
            if isinstance(value, commands.Connection.Close):
                client.send(frame.marshal(commands.Connection.CloseOk(), 0))
                return f"queues connection.close {value.reply_code}"
            if isinstance(value, commands.Connection.CloseOk):
                return "queues closed"
            if isinstance(value, commands.Channel.Close):
                self.replies[f"channel.close {value.reply_code} {value.reply_text[:60]}"] += 1
                client.send(frame.marshal(commands.Channel.CloseOk(), ch))
                client.send(frame.marshal(commands.Channel.Open(), ch))
                tags[ch] = []
            elif isinstance(value, commands.Basic.Deliver | commands.Basic.GetOk):
                tags.setdefault(ch, []).append(value.delivery_tag)
                del tags[ch][:-20]
        return "queues silent close" if client.closed else ""


# -- management HTTP ---------------------------------------------------------------------------

SEGMENTS = (
    "%2F",
    "fzvh",
    "fzq-a",
    "fzs-a",
    "fzc-a",
    "fz-dlx",
    "amq.direct",
    "amq.default",
    "",
    "%",
    "%zz",
    "%2",
    "%C3%28",
    "%00",
    "%FF%FE",
    "a%2Fb",
    "..",
    ".",
    "x" * 300,
    "%E2%82%AC",
    "fzuser",
    "rabbit@fz",
    "fzpol",
    "e",
    "q",
    "~",
    "%25",
    "%2F%2F",
    "100",
    "-1",
)
PROTECTED = {"%2F", "guest", "rabbit@localhost", NEIGHBOUR_QUEUE}
QUERIES = (
    "",
    "?columns=name,messages",
    "?columns=",
    "?sort=name&sort_reverse=true",
    "?sort=x.y.z",
    "?page=0&page_size=0",
    "?page=-1&page_size=10",
    "?page=99999&page_size=1000000",
    "?page=1&page_size=x",
    "?name=fz&use_regex=true",
    "?name=(a%2B)%2B$&use_regex=true",
    "?name=[&use_regex=true",
    "?lengths_age=600&lengths_incr=0",
    "?msg_rates_age=-5&msg_rates_incr=x",
    "?data_rates_age=1e400&data_rates_incr=5",
    "?disable_stats=true&enable_queue_totals=true",
    "?%zz=1",
    "?a=%C3%28",
    "?pagination=true&page=2",
    "?download=x&auth=Z3Vlc3Q6Z3Vlc3Q=",
)
HTTP_METHODS = (
    "GET",
    "GET",
    "PUT",
    "PUT",
    "POST",
    "POST",
    "DELETE",
    "HEAD",
    "OPTIONS",
    "PATCH",
    "FOO",
    "get",
)


def json_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice((0, 1, -1, 2**31, 2**63, 2**64 + 1, 10**30, -(10**30)))
    if kind == 3:
        return rng.choice((0.5, -1.5, 1e308, 1e-300))
    if kind == 4:
        return rng.choice(
            ("", "x", "fzq-a", "%2F", "/", "\u00e9", "\x00", "a" * 5000, ".*", "(a+)+$", "[", "\ud800")
        )
    if kind == 5:
        return rng.choice(("1h", "base64", "string", "auto", "ack_requeue_true", "reject_requeue_false"))
    if kind == 6:
        return [json_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {
        rng.choice(("a", "name", "arguments", "x-max-length")): json_value(rng, depth + 1) for _ in range(3)
    }


def _fields(rng: random.Random, template: dict[str, Any]) -> dict[str, Any]:
    """`template` with some fields dropped and some values replaced by odd ones."""
    out: dict[str, Any] = {}
    for key, value in template.items():
        r = rng.random()
        if r < 0.15:
            continue
        out[key] = json_value(rng) if r < 0.4 else value
    if rng.random() < 0.2:
        out[rng.choice(("extra", "x", ""))] = json_value(rng)
    return out


def body_template(rng: random.Random, segs: tuple[str, ...]) -> dict[str, Any]:
    """A plausible body for the route (what the management UI would send)."""
    head = segs[0] if segs else ""
    arguments = {
        rng.choice(QUEUE_ARGS): rng.choice((json_value(rng), "quorum", "stream", 1, "1h")) for _ in range(3)
    }
    if head == "queues":
        if segs[-1] == "get":
            return {
                "count": rng.choice((1, 5, 0, -1, 1000)),
                "ackmode": rng.choice(
                    ("ack_requeue_true", "ack_requeue_false", "reject_requeue_true", "reject_requeue_false")
                ),
                "encoding": rng.choice(("auto", "base64")),
                "truncate": rng.choice((None, 0, 10, 50000)),
            }
        return {"durable": True, "auto_delete": False, "arguments": arguments, "node": "rabbit@localhost"}
    if head == "exchanges":
        if segs[-1] == "publish":
            return {
                "properties": {"delivery_mode": 2, "headers": {"a": 1}, "priority": 3, "expiration": "1000"},
                "routing_key": rng.choice(QUEUES),
                "payload": rng.choice(("hi", "aGk=", "!!", "")),
                "payload_encoding": rng.choice(("string", "base64", "x")),
            }
        return {
            "type": rng.choice(("direct", "fanout", "topic", "headers", "x-consistent-hash", "nope")),
            "durable": True,
            "auto_delete": False,
            "internal": False,
            "arguments": {"alternate-exchange": "amq.fanout", "hash-header": "h"},
        }
    if head == "bindings":
        return {"routing_key": rng.choice(("", "k", "#")), "arguments": {"x-match": "any", "h": 1}}
    if head == "users":
        return {
            "password": "pw",
            "tags": rng.choice(("administrator", "", "management,monitoring", ["policymaker"])),
            "password_hash": rng.choice(("", "not-base64!", "AAAA")),
            "hashing_algorithm": rng.choice(("rabbit_password_hashing_sha256", "md5", "nope")),
        }
    if head == "permissions":
        return {"configure": ".*", "write": rng.choice((".*", "(a+)+$", "[", "")), "read": ".*"}
    if head == "policies":
        return {
            "pattern": rng.choice(("^fz", "^fz[", "^fzq")),
            "definition": {rng.choice(("max-length", "delivery-limit", "dead-letter-exchange", "x")): 1},
            "priority": rng.choice((0, -1, "x", 10**20)),
            "apply-to": rng.choice(("queues", "exchanges", "all", "quorum_queues", "x")),
        }
    if head == "vhosts":
        return {
            "description": "d",
            "tags": "a,b",
            "tracing": rng.random() < 0.5,
            "default_queue_type": "quorum",
        }
    if head == "definitions":
        return {
            "queues": [{"name": "fzq-def", "vhost": "fzvh", "durable": True, "arguments": arguments}],
            "exchanges": [{"name": "fzx-def", "vhost": "fzvh", "type": "direct"}],
            "bindings": [
                {"source": "fzx-def", "destination": "fzq-def", "destination_type": "queue", "vhost": "fzvh"}
            ],
            "policies": [{"name": "fzp", "vhost": "fzvh", "pattern": "^fz", "definition": {"max-length": 1}}],
            "vhosts": [{"name": "fzvh"}],
            "rabbit_version": "3.10.8",
        }
    if head == "hashbroker":
        return {"name": "rabbit@fz"}
    return {}


@dataclass
class HttpInput:
    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes
    delivery: str  # normal / slow / truncated / pipelined


def _slot_values(pattern: tuple[str, ...], i: int, before: list[str]) -> tuple[str, ...]:
    """Names that exist (or could) for the `*` at position `i` of a route pattern."""
    head = pattern[0]
    if i == 1 and head in ("vhosts", "queues", "exchanges", "bindings", "policies", "permissions"):
        return ("%2F", "fzvh") if head != "vhosts" else ("fzvh", "fzvh2", "%2F")
    if i == 1 and head in ("users", "user-limits"):
        return ("fzuser", "guest")
    if head == "queues":
        return QUEUES
    if head == "exchanges" or (head == "bindings" and i == 3):
        return ("fz-dlx", "fzx", "amq.direct", "amq.topic", "amq.default", "")
    if head == "bindings":
        return {4: ("q", "e", "x")}.get(i) or (QUEUES if before[-1:] == ["q"] else ("~", "k", "fzq-a", "%25"))
    if head == "permissions":
        return ("guest", "fzuser")
    if head in ("policies", "parameters"):
        return ("fzpol", "shovel", "fzpol2")
    return SEGMENTS


class HttpFuzz(Fuzzer):
    """Management API requests (see the module docstring), each on its own raw connection."""

    name = "http"

    def __init__(self, target: Target, rng: random.Random, timeout: float) -> None:
        super().__init__(target, rng, timeout)
        from broker.management.routes import ROUTES

        self.routes = [(pattern, [*sorted(methods), "HEAD", "OPTIONS"]) for pattern, _rule, methods in ROUTES]
        setup_management(target)

    def _path(self, pattern: tuple[str, ...], method: str) -> tuple[str, tuple[str, ...]]:
        rng = self.rng
        if rng.random() < 0.05:
            odd = ("/", "/api", "/api/", "//api//overview", "/js/x.js", "/%zz", "/api/../api/overview", "*")
            return rng.choice(odd), ()
        reads = method in ("GET", "HEAD", "OPTIONS")
        segs: list[str] = []
        for p in pattern:
            if p != "*":
                segs.append(p if rng.random() > 0.02 else rng.choice(SEGMENTS))
                continue
            choices = SEGMENTS
            if rng.random() < 0.7:
                choices = _slot_values(pattern, len(segs), segs)
            segs.append(rng.choice([c for c in choices if reads or c not in PROTECTED] or ["fz"]))
        if rng.random() < 0.05:
            segs.append(rng.choice(("", "x")))
        query = rng.choice(QUERIES) if rng.random() < 0.4 else ""
        return "/api/" + "/".join(segs) + query, tuple(segs)

    def _body(self, segs: tuple[str, ...]) -> bytes:
        rng = self.rng
        r = rng.random()
        if r < 0.45:
            return json.dumps(_fields(rng, body_template(rng, segs))).encode()
        if r < 0.55:
            return json.dumps(json_value(rng)).encode()
        if r < 0.65:
            return mutate(rng, json.dumps(body_template(rng, segs)).encode(), [b'{"a":[1,{"b":null}]}'])
        if r < 0.7:
            depth = rng.choice((100, 1000, 100_000))
            return (
                b"[" * depth + b"]" * depth if rng.random() < 0.5 else b'{"a":' * depth + b"1" + b"}" * depth
            )
        if r < 0.75:
            return rng.choice(
                (b"1e400", b"NaN", b"-Infinity", b"[1e999]", b'{"a":1e309}', b"\xff\xfe{}", b'"\\ud800"')
            )
        if r < 0.78:  # huge: past and below the 16 MB limit
            size = rng.choice((1 << 20, 8 << 20, (16 << 20) + 1))
            return (
                b'{"payload":"'
                + b"x" * size
                + b'","payload_encoding":"string","routing_key":"fz","properties":{}}'
            )
        if r < 0.85:
            return bytes(rng.randrange(256) for _ in range(rng.randrange(64)))
        return b""

    def _auth(self) -> list[tuple[str, str]]:
        rng = self.rng
        t = self.target
        good = base64.b64encode(f"{t.user}:{t.password}".encode()).decode()
        r = rng.random()
        if r < 0.7:
            return [("authorization", f"Basic {good}")]
        return [
            rng.choice(
                (
                    ("authorization", "Basic " + base64.b64encode(b"guest:wrong").decode()),
                    ("authorization", "Basic !!!notbase64"),
                    ("authorization", "Basic " + base64.b64encode(b"nocolon").decode()),
                    ("authorization", "Basic " + base64.b64encode(b"\xff\xfe:\xc3\x28").decode()),
                    ("authorization", "Basic " + base64.b64encode(b"fzuser:pw").decode()),
                    ("authorization", "Bearer abc"),
                    ("authorization", "Basic"),
                    ("authorization", "Basic " + "A" * 4000),
                    ("authorization", "basic " + good),
                    ("x-no-auth", "1"),
                )
            )
        ]

    def generate(self) -> HttpInput:
        rng = self.rng
        pattern, methods = rng.choice(self.routes)
        method = rng.choice(methods) if rng.random() < 0.75 else rng.choice(HTTP_METHODS)
        path, segs = self._path(pattern, method)
        body = self._body(segs) if method not in ("GET", "HEAD") or rng.random() < 0.1 else b""
        headers = [("host", "localhost"), *self._auth()]
        if body or rng.random() < 0.1:
            headers.append(
                ("content-type", rng.choice(("application/json", "text/plain", "", "x/y; charset=zz")))
            )
        chunked = rng.random() < 0.08
        if chunked:
            headers.append(("transfer-encoding", "chunked"))
            body = self._chunked(body)
        else:
            length = len(body)
            if rng.random() < 0.06:
                length = rng.choice((0, length + 10, max(0, length - 1), 2**40))
            headers.append(("content-length", str(length)))
            if rng.random() < 0.03:
                headers.append(("content-length", str(length + 1)))
        r = rng.random()
        if r < 0.04:
            headers += [(f"x-flood-{i}", "v") for i in range(rng.choice((50, 99, 101, 500)))]
        elif r < 0.07:
            headers.append(("x-big", "v" * rng.choice((4000, 4097, 70000))))
        elif r < 0.09:
            headers.append(("expect", "100-continue"))
        elif r < 0.1:
            headers.append(("bad header", "x"))
        d = rng.random()
        delivery = "normal" if d < 0.8 else "truncated" if d < 0.9 else "slow" if d < 0.95 else "pipelined"
        return HttpInput(method, path, headers, body, delivery)

    def _chunked(self, body: bytes) -> bytes:
        """`body` as chunks of random sizes (now and then a size that is not hex, or no last chunk)."""
        rng = self.rng
        parts: list[bytes] = []
        pos = 0
        while pos < len(body):
            n = rng.randrange(1, 1 << rng.choice((4, 12, 16)))
            size = f"{n:x}" if rng.random() > 0.05 else rng.choice(("zz", "-1", "ffffffffffffffff"))
            parts += (size.encode(), b"\r\n", body[pos : pos + n], b"\r\n")
            pos += n
        return b"".join(parts) + (b"0\r\n\r\n" if rng.random() > 0.1 else b"")

    def one(self) -> str:
        req = self.generate()
        head = f"{req.method} {req.path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in req.headers)
        data = head.encode("latin-1", "replace") + b"\r\n" + req.body
        self.current = f"http {req.delivery} {head[:300]!r} body {req.body[:120]!r} ({len(req.body)} bytes)"
        if req.delivery == "pipelined":
            auth = f"{req.headers[1][0]}: {req.headers[1][1]}"
            data += f"GET /api/overview HTTP/1.1\r\nhost: x\r\n{auth}\r\n\r\n".encode("latin-1", "replace")
        try:
            sock = socket.create_connection(
                (self.target.host, self.target.management_port), timeout=self.timeout
            )
        except OSError as exc:
            return f"http connect failed {type(exc).__name__}"
        with sock:
            try:
                if req.delivery == "truncated":
                    sock.sendall(data[: self.rng.randrange(1, max(2, len(data)))])
                    if self.rng.random() < 0.5:
                        return "http truncated, client hung up"
                    sock.shutdown(socket.SHUT_WR)
                elif req.delivery == "slow":
                    pieces = self.rng.randrange(2, 12)
                    step = max(1, len(data) // pieces)
                    for i in range(0, len(data), step):
                        sock.sendall(data[i : i + step])
                        time.sleep(self.rng.uniform(0, 0.15))
                else:
                    sock.sendall(data)
            except OSError:
                pass
            got, _closed = recv_until_closed(sock)
        statuses = re.findall(rb"^HTTP/1\.1 (\d{3})", got, re.M)
        if not statuses:
            return "http no answer"
        return "http " + ",".join(s.decode() for s in statuses[:2])


def setup_management(target: Target) -> None:
    """The fuzzers' own vhost, user and permissions, so that writes reach real entities."""
    conn = http.client.HTTPConnection(target.host, target.management_port, timeout=FAILURE_SECONDS)
    token = base64.b64encode(f"{target.user}:{target.password}".encode()).decode()
    headers = {"authorization": f"Basic {token}", "content-type": "application/json"}
    perms = json.dumps({"configure": ".*", "write": ".*", "read": ".*"})
    for path, body in (
        ("/api/vhosts/fzvh", "{}"),
        ("/api/users/fzuser", json.dumps({"password": "pw", "tags": "management"})),
        (f"/api/permissions/fzvh/{target.user}", perms),
        ("/api/permissions/fzvh/fzuser", perms),
    ):
        conn.request("PUT", path, body=body, headers=headers)
        conn.getresponse().read()
    conn.close()


# -- neighbours --------------------------------------------------------------------------------


class Neighbour(threading.Thread):
    """A well-behaved client doing one round trip after another; `check()` raises on failure."""

    label = ""

    def __init__(self, target: Target, stall: float, watch: Callable[[], list[str]]) -> None:
        super().__init__(daemon=True, name=self.label)
        self.target = target
        self.stall = stall
        self.watch = watch  # what the fuzzers are sending now, recorded with a stall
        self.stop = threading.Event()
        self.rounds = 0
        self.stalls: list[tuple[float, list[str]]] = []
        self.failures: list[str] = []
        self.max_latency = 0.0
        self.connected = False
        self.detail = ""  # what the last round trip spent its time on
        self.busy_stalls = 0  # stalls in which the broker was busy (not waiting for a CPU)
        self.sched: Callable[[], tuple[float, float]] = lambda: (0.0, 0.0)

    def connect(self) -> None:
        raise NotImplementedError

    def check(self) -> None:
        raise NotImplementedError

    def disconnect(self) -> None:
        """Drop the connection after a failure (the next round connects again)."""

    def run(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            before = self.sched()
            try:
                if not self.connected:
                    self.connect()
                    self.connected = True
                self.check()
            except Exception as exc:
                self.failures.append(f"{type(exc).__name__}: {exc}"[:200])
                self.connected = False
                with contextlib.suppress(Exception):
                    self.disconnect()
            took = time.monotonic() - started
            self.rounds += 1
            self.max_latency = max(self.max_latency, took)
            if took > self.stall:
                cpu, waited = (b - a for a, b in zip(before, self.sched(), strict=True))
                when = time.strftime("%H:%M:%S", time.localtime(time.time() - took))
                cause = f"broker used {cpu:.2f} s CPU, waited {waited:.2f} s for one"
                self.stalls.append((took, [f"from {when}: {cause}; {self.detail}", *self.watch()]))
                self.busy_stalls += cpu >= self.stall / 2
            self.stop.wait(0.2)
        with contextlib.suppress(Exception):
            self.disconnect()


class AmqpNeighbour(Neighbour):
    """Publishes on one connection; a consumer on another must receive the message."""

    label = "amqp neighbour"

    def connect(self) -> None:
        import pika

        params = pika.ConnectionParameters(
            self.target.host,
            self.target.port,
            credentials=pika.PlainCredentials(self.target.user, self.target.password),
            heartbeat=0,
            blocked_connection_timeout=FAILURE_SECONDS,
            socket_timeout=FAILURE_SECONDS,
        )
        self.pub = pika.BlockingConnection(params)
        self.sub = pika.BlockingConnection(params)
        self.pch = self.pub.channel()
        self.pch.confirm_delivery()
        self.sch = self.sub.channel()
        self.sch.queue_declare(NEIGHBOUR_QUEUE, auto_delete=True)
        self.sch.queue_purge(NEIGHBOUR_QUEUE)
        self.got: list[bytes] = []
        self.sch.basic_consume(NEIGHBOUR_QUEUE, lambda _c, _m, _p, body: self.got.append(body), auto_ack=True)
        self.n = 0

    def check(self) -> None:
        self.n += 1
        body = f"n{self.n}".encode()
        self.pch.basic_publish("", NEIGHBOUR_QUEUE, body)
        deadline = time.monotonic() + FAILURE_SECONDS
        while body not in self.got:
            if time.monotonic() > deadline:
                raise TimeoutError(f"message {self.n} not delivered (got {self.got[-3:]})")
            self.sub.process_data_events(time_limit=0.01)
        self.got.clear()

    def disconnect(self) -> None:
        for conn in (getattr(self, "pub", None), getattr(self, "sub", None)):
            if conn is not None and conn.is_open:
                with contextlib.suppress(Exception):
                    conn.close()


class ManagementNeighbour(Neighbour):
    """Reads the overview, the AMQP neighbour's queue and every queue's name (whatever the fuzzers
    created must render) on one kept-alive HTTP connection."""

    label = "management neighbour"

    def connect(self) -> None:
        self.conn = http.client.HTTPConnection(
            self.target.host, self.target.management_port, timeout=FAILURE_SECONDS
        )
        token = base64.b64encode(f"{self.target.user}:{self.target.password}".encode()).decode()
        self.headers = {"authorization": f"Basic {token}"}

    def check(self) -> None:
        self.detail = ""
        for path in (
            "/api/overview",
            f"/api/queues/%2F/{quote(NEIGHBOUR_QUEUE)}",
            "/api/queues?columns=name",
        ):
            started = time.monotonic()
            self.conn.request("GET", path, headers=self.headers)
            resp = self.conn.getresponse()
            body = resp.read()
            self.detail += f"{path} {time.monotonic() - started:.2f} s ({len(body)} bytes); "
            if resp.status == 404 and "queues" in path:
                continue  # the AMQP neighbour is reconnecting: its auto-delete queue is gone
            if resp.status != 200:
                raise RuntimeError(f"GET {path}: {resp.status} {body[:100]!r}")
            json.loads(body)

    def disconnect(self) -> None:
        self.conn.close()


def scheduler_times(pid: int) -> Callable[[], tuple[float, float]]:
    """(CPU seconds, seconds spent runnable but waiting for a CPU) of the broker's main thread, from
    /proc/PID/schedstat: a stall while the broker waited for a CPU is the machine's load, one
    while it ran is the broker's own work."""

    def read() -> tuple[float, float]:
        try:
            cpu, waited, _slices = Path(f"/proc/{pid}/schedstat").read_text().split()
        except (OSError, ValueError):
            return 0.0, 0.0
        return int(cpu) / 1e9, int(waited) / 1e9

    return read


# -- the broker's log --------------------------------------------------------------------------

_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


@dataclass
class LogReport:
    unhandled: collections.Counter[str] = field(default_factory=collections.Counter)
    examples: dict[str, str] = field(default_factory=dict)
    internal_541: int = 0
    deliberate_541: int = 0


def analyse_log(text: str) -> LogReport:
    """Every log record with a traceback is an unhandled exception, keyed by the exception's
    last line and the innermost frame that raised it."""
    report = LogReport()
    records: list[list[str]] = []
    for line in text.splitlines():
        if _RECORD.match(line) or not records:
            records.append([line])
        else:
            records[-1].append(line)
        if line.endswith("541 INTERNAL_ERROR"):
            report.deliberate_541 += 1  # as RabbitMQ's crashes (undecodable properties)
        if "541 INTERNAL_ERROR (" in line:
            report.internal_541 += 1
    for rec in records:
        if not any(ln.startswith("Traceback") for ln in rec):
            continue
        frames = [ln.strip() for ln in rec if ln.startswith('  File "')]
        exc = next((ln for ln in reversed(rec) if ln and not ln.startswith(" ")), rec[-1])
        where = frames[-1].replace(str(ROOT) + "/", "") if frames else "?"
        key = f"{exc[:140]} at {where[:140]}"
        report.unhandled[key] += 1
        report.examples.setdefault(key, "\n".join(rec)[:4000])
    return report


# -- the driver --------------------------------------------------------------------------------

FuzzerFactory = Callable[[Target, random.Random, float], Fuzzer]
NeighbourFactory = Callable[[Target, float, Callable[[], list[str]]], Neighbour]
FUZZERS: dict[str, FuzzerFactory] = {"amqp": AmqpFuzz, "queues": QueueTypesFuzz, "http": HttpFuzz}


def parser(description: str, modes: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--seconds", type=float, default=180)
    ap.add_argument("--modes", default=modes, help=f"comma-separated fuzzers (default {modes})")
    ap.add_argument("--workers", type=int, default=3, help="fuzzing threads, each its own connections")
    ap.add_argument("--port", type=int, default=0, help="AMQP port (0: a free one)")
    ap.add_argument("--management-port", type=int, default=0, help="-1: no management listener")
    ap.add_argument("--stream-port", type=int, default=0, help="-1: no stream listener")
    ap.add_argument("--no-serve", action="store_true", help="fuzz a broker already running on the ports")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=0.5, help="seconds of silence before giving up")
    ap.add_argument("--stall", type=float, default=1.0, help="a neighbour round trip longer than this stalls")
    ap.add_argument("-v", "--verbose", action="store_true", help="print an example log record per exception")
    return ap


def main(
    argv: list[str] | None = None,
    *,
    fuzzers: dict[str, FuzzerFactory] | None = None,
    neighbours: list[NeighbourFactory] | None = None,
    modes: str = "amqp,queues,http",
    description: str | None = None,
) -> int:
    fuzzers = fuzzers or FUZZERS
    args = parser(description or (__doc__ or "").splitlines()[0], modes).parse_args(argv)
    target = Target(port=args.port, management_port=args.management_port, stream_port=args.stream_port)
    log_path = Path(tempfile.mkdtemp(prefix="hashbroker-fuzz-")) / "broker.log"
    proc = None if args.no_serve else serve(target, log_path)
    chosen = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in chosen if m not in fuzzers]
    if unknown:
        print(f"unknown modes {unknown}; known: {sorted(fuzzers)}", file=sys.stderr)
        return 2
    neighbour_kinds = list(neighbours or [])
    if not neighbours:
        neighbour_kinds.append(AmqpNeighbour)
        if target.management_port > 0:
            neighbour_kinds.append(ManagementNeighbour)
    try:
        return fuzz(args, target, chosen, fuzzers, neighbour_kinds, proc, log_path)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


def fuzz(
    args: argparse.Namespace,
    target: Target,
    chosen: list[str],
    fuzzers: dict[str, FuzzerFactory],
    neighbour_kinds: list[NeighbourFactory],
    proc: subprocess.Popen[bytes] | None,
    log_path: Path,
) -> int:
    workers: list[list[Fuzzer]] = [
        [fuzzers[m](target, random.Random(f"{args.seed}-{w}-{m}"), args.timeout) for m in chosen]
        for w in range(args.workers)
    ]

    def watch() -> list[str]:
        return [f.current for fs in workers for f in fs if f.current]

    neighbours = [make(target, args.stall, watch) for make in neighbour_kinds]
    for n in neighbours:
        if proc is not None:
            n.sched = scheduler_times(proc.pid)
        n.start()
    ends: collections.Counter[str] = collections.Counter()
    lock = threading.Lock()
    deadline = time.monotonic() + args.seconds
    crashes: list[str] = []

    def work(mine: list[Fuzzer]) -> None:
        turn = 0
        while time.monotonic() < deadline:
            fz = mine[turn % len(mine)]
            turn += 1
            try:
                end = fz.one()
            except Exception as exc:  # the harness's own bug: report it, keep fuzzing
                end = f"{fz.name} harness error {type(exc).__name__}"
                crashes.append(f"{exc!r} on {fz.current}")
            fz.current = ""
            with lock:
                ends[end] += 1

    threads = [threading.Thread(target=work, args=(mine,), daemon=True) for mine in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(1.0)  # the neighbours' last rounds see the broker after the last input
    for n in neighbours:
        n.stop.set()
    for n in neighbours:
        n.join(FAILURE_SECONDS * 2)
    if proc is not None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            print("broker did not stop within 30 s of SIGTERM")
    log = log_path.read_bytes().decode("utf-8", "replace") if proc is not None else ""
    report = analyse_log(log)
    total = sum(ends.values())
    print(
        f"{total} inputs in {args.seconds:g} s (modes {','.join(chosen)}, "
        f"{args.workers} workers, seed {args.seed})"
    )
    for end, n in ends.most_common(40):
        print(f"  {n:6d}  {end}")
    for fz in workers[0]:
        if fz.replies:
            print(f"{fz.name}: the server's answers the first worker saw most:")
            for reply, n in fz.replies.most_common(12):
                print(f"  {n:6d}  {reply}")
    if crashes:
        print(f"harness errors: {len(crashes)}; first: {crashes[0][:300]}")
    print(f"541 closes RabbitMQ also gives (undecodable properties): {report.deliberate_541}")
    print(f"541 closes for unhandled exceptions: {report.internal_541}")
    unhandled = sum(report.unhandled.values())
    print(f"unhandled exceptions (tracebacks in the broker log): {unhandled}")
    for key, n in report.unhandled.most_common(30):
        print(f"  {n:6d}  {key}")
        if args.verbose:
            print("          " + report.examples[key].replace("\n", "\n          "))
    stalls = sum(len(n.stalls) for n in neighbours)
    busy = sum(n.busy_stalls for n in neighbours)
    failures = sum(len(n.failures) for n in neighbours)
    max_latency = max((n.max_latency for n in neighbours), default=0.0)
    for n in neighbours:
        print(
            f"{n.label}: {n.rounds} round trips, max {n.max_latency:.3f} s, "
            f"{len(n.stalls)} over {args.stall:g} s ({n.busy_stalls} with the broker busy), "
            f"{len(n.failures)} failures"
        )
        for took, sending in n.stalls[:5]:
            print(f"    stall {took:.2f} s while sending:")
            for s in sending[:6]:
                print(f"      {s[:300]}")
        for failure in n.failures[:5]:
            print(f"    failure: {failure}")
    if proc is not None:
        print(f"broker log: {log_path}")
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"machine load average at the end (1, 5, 15 min): {load} on {os.cpu_count()} CPUs")
    print(
        f"RESULT unhandled={unhandled} stalls={stalls} busy_stalls={busy} failures={failures} "
        f"max_latency={max_latency:.3f}"
    )
    return 0 if not unhandled and not stalls and not failures else 1


if __name__ == "__main__":
    sys.exit(main())
