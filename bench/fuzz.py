"""Mutation fuzzing of a running broker: mutated client byte streams, one connection each.

    python bench/fuzz.py --seconds 180            # starts `hashbroker serve` on a free port
    python bench/fuzz.py --seconds 180 --port 5672 --no-serve   # an already running broker

Streams are recorded from what real clients send (the handshake, channel.open, declares with
argument tables, publishes with every property and a nested headers table, gets, acks, qos,
consumes, cancels, closes), built with pamqp. Each run mutates one stream (bit flips, byte
changes, inserted or deleted bytes, length fields set to extreme values, frames duplicated or
spliced from another stream), mostly after the handshake so that the session layer is reached,
sends it on a fresh connection, then reads until the server closes or goes quiet.

Counted: how each connection ended (connection.close by reply code, a silent close, still open
when the client gave up), 541 INTERNAL_ERROR closes (a bug caught by the connection's last-resort
handler), tracebacks in the broker's log, and the health of a neighbour connection publishing
and getting a message between runs. A broker that survives prints zeros in the last three.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pamqp import commands, frame, header
from pamqp.body import ContentBody

HANDSHAKE_END_MARK = "after-open"


def handshake() -> bytes:
    """Protocol header, start-ok, tune-ok, open: the prefix every recorded stream starts with."""
    out = frame.marshal(header.ProtocolHeader(), 0)
    props = {"product": "fuzz", "capabilities": {"publisher_confirms": True, "basic.nack": True}}
    out += frame.marshal(commands.Connection.StartOk(client_properties=props, response="\0guest\0guest"), 0)
    out += frame.marshal(commands.Connection.TuneOk(channel_max=2047, frame_max=131072, heartbeat=0), 0)
    out += frame.marshal(commands.Connection.Open(virtual_host="/"), 0)
    return out


def publish(channel: int, body: bytes, props: commands.Basic.Properties, rk: str = "fz") -> bytes:
    out = frame.marshal(commands.Basic.Publish(exchange="", routing_key=rk, mandatory=True), channel)
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
    return [s1, s2, s3]


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


def run_one(port: int, data: bytes, timeout: float) -> str:
    """Send `data`, read until the server closes; returns how the connection ended."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    got = b""
    try:
        s.sendall(data)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    except TimeoutError:
        s.close()
        return closes(got) or "open (client gave up)"
    except OSError:
        pass
    s.close()
    return closes(got) or "silent close"


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


class Neighbour:
    """A well-behaved client on its own connection: publish then get, between runs."""

    def __init__(self, port: int) -> None:
        import pika

        self.conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port, heartbeat=0))
        self.ch = self.conn.channel()
        self.ch.queue_declare("fuzz-neighbour", auto_delete=True)
        self.n = 0

    def check(self) -> bool:
        self.n += 1
        body = str(self.n).encode()
        try:
            self.ch.basic_publish("", "fuzz-neighbour", body)
            _m, _p, got = self.ch.basic_get("fuzz-neighbour", auto_ack=True)
            return got == body
        except Exception:
            return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=180)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--no-serve", action="store_true", help="fuzz a broker already running on --port")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=0.5, help="seconds of silence before giving up")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    log_path = Path(tempfile.mkdtemp(prefix="hashbroker-fuzz-")) / "broker.log"
    proc = None
    port = args.port
    if not args.no_serve:
        if not port:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        env = {**os.environ, "HASHBROKER_LOG_LEVEL": "DEBUG"}
        cmd = [
            sys.executable,
            "-m",
            "broker.cli.main",
            "serve",
            "--port",
            str(port),
            "--data-dir",
            ":memory:",
        ]
        proc = subprocess.Popen(cmd, env=env, stderr=log_path.open("wb"))
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
    try:
        return fuzz(args, port, rng, proc, log_path)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


def fuzz(
    args: argparse.Namespace,
    port: int,
    rng: random.Random,
    proc: subprocess.Popen[bytes] | None,
    log_path: Path,
) -> int:
    prefix = handshake()
    recorded = streams()
    neighbour = Neighbour(port)
    ends: collections.Counter[str] = collections.Counter()
    neighbour_failures = 0
    runs = 0
    examples: dict[str, bytes] = {}
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        body = rng.choice(recorded)
        if rng.random() < 0.1:
            data = mutate(rng, prefix + body, recorded)
        else:
            data = prefix + mutate(rng, body, recorded)
        end = run_one(port, data, args.timeout)
        ends[end] += 1
        examples.setdefault(end, data)
        runs += 1
        if runs % 10 == 0 and not neighbour.check():
            neighbour_failures += 1
            neighbour = Neighbour(port)
    healthy = neighbour.check()
    if proc is not None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    log = log_path.read_bytes().decode("utf-8", "replace") if proc is not None else ""
    lines = log.splitlines()
    deliberate = sum(1 for ln in lines if ln.endswith("541 INTERNAL_ERROR"))  # as RabbitMQ's crashes
    internal = [ln for ln in lines if "541 INTERNAL_ERROR (" in ln]  # the last-resort handler's
    causes = collections.Counter(ln.partition("541 INTERNAL_ERROR (")[2][:100] for ln in internal)
    print(f"{runs} connections in {args.seconds:g} s (seed {args.seed})")
    for end, n in ends.most_common():
        print(f"  {n:6d}  {end}")
    print(f"541 closes RabbitMQ also gives (undecodable properties): {deliberate}")
    print(f"541 closes for unhandled exceptions: {len(internal)}")
    for cause, n in causes.most_common(20):
        print(f"  {n:6d}  {cause}")
    print(f"tracebacks in the broker log: {log.count('Traceback')}")
    print(f"neighbour failures: {neighbour_failures}; neighbour healthy at the end: {healthy}")
    if proc is not None:
        print(f"broker log: {log_path}")
    return 0 if not internal and "Traceback" not in log and not neighbour_failures and healthy else 1


if __name__ == "__main__":
    sys.exit(main())
