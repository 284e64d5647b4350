"""Record byte exchanges of RabbitMQ 3.10.8's stream protocol (port 5552) as JSON test data.

Run by hand against the reference broker (`rabbitmq-plugins enable rabbitmq_stream`):

    .venv/bin/python tests/data/stream_protocol/record_oracle.py [host] [port]

The frames are packed here with `struct`, independently of `broker.streamproto`, so the recordings
check the codec rather than repeat it. Each scenario is a list of steps: `{"dir": "c2s" | "s2c",
"hex": ..., "note": ...}`, a frame's bytes including its 4-byte size; `"closed": true` marks the
server closing the socket. Values that change between runs (timestamps, the server's version and
platform strings) stay as RabbitMQ sent them: the unit tests decode them rather than compare them.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pika

HERE = Path(__file__).parent
HOST = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1"
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 5552
SUFFIX = uuid.uuid4().hex[:6]


def s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">H", len(raw)) + raw


def frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def req(key: int, corr: int, payload: bytes = b"") -> bytes:
    return frame(struct.pack(">HHI", key, 1, corr) + payload)


def cmd(key: int, payload: bytes = b"") -> bytes:
    return frame(struct.pack(">HH", key, 1) + payload)


def str_map(d: dict[str, str]) -> bytes:
    return struct.pack(">I", len(d)) + b"".join(s(k) + s(v) for k, v in d.items())


class Raw:
    """One socket; every frame sent and received is kept in `steps`."""

    def __init__(self) -> None:
        self.sock = socket.create_connection((HOST, PORT), timeout=5)
        self.steps: list[dict[str, Any]] = []
        self.buf = b""
        self.corr = 0

    def next_corr(self) -> int:
        self.corr += 1
        return self.corr

    def send(self, data: bytes, note: str = "") -> None:
        if len(data) > 65536:  # kept short: the head, then the zero bytes that follow it
            head = data.rstrip(b"\0")
            self.steps.append(
                {"dir": "c2s", "hex": head.hex(), "zero_fill": len(data) - len(head), "note": note}
            )
        else:
            self.steps.append({"dir": "c2s", "hex": data.hex(), "note": note})
        self.sock.sendall(data)

    def recv(self, note: str = "", timeout: float = 5.0) -> bytes | None:
        """One frame (size included), or None when the server closed the socket."""
        self.sock.settimeout(timeout)
        while True:
            if len(self.buf) >= 4:
                (size,) = struct.unpack(">I", self.buf[:4])
                if len(self.buf) >= 4 + size:
                    out, self.buf = self.buf[: 4 + size], self.buf[4 + size :]
                    self.steps.append({"dir": "s2c", "hex": out.hex(), "note": note})
                    return out
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                self.steps.append({"dir": "s2c", "timeout": timeout, "note": note})
                return None
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self.steps.append({"dir": "s2c", "closed": True, "note": note})
                return None
            self.buf += chunk

    def quiet(self, seconds: float = 0.5) -> bool:
        """True when nothing arrives within `seconds` (the socket stays open)."""
        self.sock.settimeout(seconds)
        try:
            chunk = self.sock.recv(65536)
        except TimeoutError:
            return True
        if not chunk:
            self.steps.append({"dir": "s2c", "closed": True, "note": "closed"})
            return False
        self.buf += chunk
        return False

    def peer_properties_and_sasl(self) -> None:
        """Peer properties (none) and the SASL mechanisms, correlation ids 1 and 2, as a client
        that then authenticates by hand does."""
        self.send(req(17, 1, str_map({})), "peer properties")
        self.recv("peer properties response")
        self.send(req(18, 2), "sasl handshake")
        self.recv("sasl handshake response")

    def sasl_authenticate(self, mechanism: str, response: bytes | None, note: str) -> None:
        """sasl authenticate, correlation id 3 (after `peer_properties_and_sasl`); a None response is
        sent as length -1."""
        blob = struct.pack(">i", -1) if response is None else struct.pack(">I", len(response)) + response
        self.send(req(19, 3, s(mechanism) + blob), note)

    def handshake(
        self, user: str = "guest", password: str = "guest", vhost: str = "/", heartbeat: int = 0
    ) -> None:
        self.send(req(17, self.next_corr(), str_map({"product": "hashbroker-recorder"})), "peer properties")
        self.recv("peer properties response")
        self.send(req(18, self.next_corr()), "sasl handshake")
        self.recv("sasl handshake response")
        plain = b"\0" + user.encode() + b"\0" + password.encode()
        self.send(
            req(19, self.next_corr(), s("PLAIN") + struct.pack(">I", len(plain)) + plain), "sasl authenticate"
        )
        self.recv("sasl authenticate response")
        tune = self.recv("tune (server)")
        assert tune is not None
        frame_max, _hb = struct.unpack(">II", tune[8:16])
        self.send(cmd(20, struct.pack(">II", frame_max, heartbeat)), "tune (client)")
        self.send(req(21, self.next_corr(), s(vhost)), "open")
        self.recv("open response")

    def ask(self, data: bytes, note: str, answer: str) -> bytes | None:
        """Send `data`, then receive one frame: the answer (None when the socket closed)."""
        self.send(data, note)
        return self.recv(answer)

    def close(self) -> None:
        try:
            self.send(req(22, self.next_corr(), struct.pack(">H", 1) + s("OK")), "close")
            self.recv("close response")
        finally:
            self.sock.close()


def amqp10_data(body: bytes) -> bytes:
    """A message that is one data section (what the clients send for a plain body)."""
    return (
        b"\x00\x53\x75"
        + (b"\xa0" + bytes([len(body)]) if len(body) < 256 else b"\xb0" + struct.pack(">I", len(body)))
        + body
    )


def amqp10_full() -> bytes:
    """A message with properties, application properties and a data section."""
    props_fields = [
        b"\xa1\x04m-01",  # message-id utf8
        b"\xa0\x05guest",  # user-id binary
        b"\x40",  # to
        b"\x40",  # subject
        b"\xa1\x05reply",  # reply-to
        b"\xa1\x04c-01",  # correlation-id
        b"\xa3\x0atext/plain",  # content-type symbol
        b"\xa3\x04gzip",  # content-encoding
        b"\x40",  # absolute-expiry-time
        b"\x83" + struct.pack(">q", 1_700_000_000_000),  # creation-time
    ]
    body = b"".join(props_fields)
    props = b"\x00\x53\x73\xc0" + bytes([len(body) + 1, len(props_fields)]) + body
    ap_pairs = [
        (b"\xa1\x03str", b"\xa1\x05value"),
        (b"\xa1\x04long", b"\x81" + struct.pack(">q", -5)),
        (b"\xa1\x03int", b"\x71" + struct.pack(">i", 70000)),
        (b"\xa1\x04bool", b"\x41"),
        (b"\xa1\x03bin", b"\xa0\x02\x01\x02"),
        (b"\xa1\x06double", b"\x82" + struct.pack(">d", 1.5)),
    ]
    ap_body = b"".join(k + v for k, v in ap_pairs)
    ap = b"\x00\x53\x74\xc1" + bytes([len(ap_body) + 1, 2 * len(ap_pairs)]) + ap_body
    return props + ap + amqp10_data(b"full body")


def publish_payload(pid: int, messages: list[tuple[int, bytes]]) -> bytes:
    body = struct.pack(">BI", pid, len(messages))
    for pub_id, msg in messages:
        body += struct.pack(">QI", pub_id, len(msg)) + msg
    return body


def sub_batch(pub_id: int, records: list[bytes]) -> bytes:
    inner = b"".join(struct.pack(">I", len(r)) + r for r in records)
    return struct.pack(">QBHII", pub_id, 0x80, len(records), len(inner), len(inner)) + inner


def subscribe(
    corr: int, sub: int, stream: str, spec: bytes, credit: int, props: dict[str, str] | None = None
) -> bytes:
    tail = str_map(props) if props else b""
    return req(7, corr, struct.pack(">B", sub) + s(stream) + spec + struct.pack(">H", credit) + tail)


def query_by_reference(
    c: Raw, key: int, references: tuple[str, str], stream: str, note: str, answers: tuple[str, str]
) -> None:
    """Request `key` (a query by publisher or consumer reference) for a known and an unknown
    reference on `stream`, then for the known one on a missing stream."""
    known, unknown = references
    c.ask(req(key, c.next_corr(), s(known) + s(stream)), note, answers[0])
    c.ask(req(key, c.next_corr(), s(unknown) + s(stream)), "query an unknown reference", answers[1])
    missing = req(key, c.next_corr(), s(known) + s(f"missing-{SUFFIX}"))
    c.ask(missing, "query on a missing stream", "stream does not exist")


def drain(c: Raw, note: str, seconds: float = 0.7) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if c.recv(note, timeout=max(0.05, end - time.monotonic())) is None:
            if "timeout" in c.steps[-1]:
                c.steps.pop()
            return


def main() -> None:
    out: dict[str, Any] = {"rabbitmq": "3.10.8", "stream_suffix": SUFFIX, "scenarios": {}}
    sc = out["scenarios"]
    stream = f"rec-{SUFFIX}"

    c = Raw()
    c.handshake()
    c.send(cmd(23), "heartbeat (client)")
    c.quiet(0.3)
    c.close()
    sc["handshake"] = c.steps

    c = Raw()
    c.handshake(heartbeat=1)
    c.recv("heartbeat (server) within about a second", timeout=3)
    c.close()
    sc["heartbeat"] = c.steps

    c = Raw()
    c.peer_properties_and_sasl()
    c.sasl_authenticate("PLAIN", b"\0guest\0wrong", "authenticate, wrong password")
    c.recv("authentication failure")
    c.recv("then?", timeout=2)
    sc["auth_failure"] = c.steps

    c = Raw()
    c.peer_properties_and_sasl()
    c.sasl_authenticate("CRAM-MD5", None, "authenticate, unknown mechanism")
    c.recv("mechanism not supported")
    c.recv("then?", timeout=2)
    sc["auth_mechanism"] = c.steps

    c = Raw()
    c.peer_properties_and_sasl()
    c.sasl_authenticate("PLAIN", b"\0guest\0guest", "authenticate")
    c.recv("ok")
    tune = c.recv("tune")
    assert tune is not None
    c.send(cmd(20, tune[8:16]), "tune")
    c.ask(req(21, 4, s(f"no-such-vhost-{SUFFIX}")), "open an unknown vhost", "vhost access failure")
    c.recv("then?", timeout=2)
    sc["open_unknown_vhost"] = c.steps

    c = Raw()
    c.send(req(15, 1, struct.pack(">I", 0)), "metadata before authentication")
    c.recv("then?", timeout=2)
    sc["pre_auth_unknown"] = c.steps

    c = Raw()
    c.handshake()
    args = {"max-length-bytes": "1000000", "max-age": "1h", "stream-max-segment-size-bytes": "500000"}
    c.ask(req(13, c.next_corr(), s(stream) + str_map(args)), "create with arguments", "create ok")
    c.ask(
        req(13, c.next_corr(), s(stream) + str_map(args)),
        "create again, same arguments",
        "stream already exists",
    )
    c.ask(
        req(13, c.next_corr(), s(stream) + str_map({"max-age": "2h"})),
        "create again, other arguments",
        "precondition failed",
    )
    c.ask(req(13, c.next_corr(), s("amq.reserved") + str_map({})), "create amq.*", "precondition failed")
    c.ask(req(13, c.next_corr(), s("") + str_map({})), "create an empty name", "precondition failed")
    c.ask(
        req(13, c.next_corr(), s(f"bad-age-{SUFFIX}") + str_map({"max-age": "1X"})),
        "create, bad max-age",
        "precondition failed",
    )
    c.send(
        req(14, c.next_corr(), s(f"bad-age-{SUFFIX}")),
        "delete it: the stream protocol does not check max-age",
    )
    c.recv("ok")
    c.send(
        req(13, c.next_corr(), s(f"bad-loc-{SUFFIX}") + str_map({"queue-leader-locator": "nowhere"})),
        "bad locator",
    )
    c.recv("precondition failed")
    c.send(
        req(13, c.next_corr(), s(f"bad-size-{SUFFIX}") + str_map({"initial-cluster-size": "0"})),
        "cluster size 0",
    )
    c.recv("precondition failed")
    c.ask(
        req(13, c.next_corr(), s(f"unk-arg-{SUFFIX}") + str_map({"foo": "bar"})),
        "an unknown argument",
        "ignored: ok",
    )
    c.ask(req(14, c.next_corr(), s(f"unk-arg-{SUFFIX}")), "delete it", "ok")
    c.ask(req(14, c.next_corr(), s(f"missing-{SUFFIX}")), "delete a missing stream", "stream does not exist")
    c.ask(
        req(15, c.next_corr(), struct.pack(">I", 2) + s(stream) + s(f"missing-{SUFFIX}")),
        "metadata",
        "metadata response",
    )
    c.ask(
        req(24, c.next_corr(), s("rk") + s(f"no-super-{SUFFIX}")),
        "route, no such super stream",
        "route response",
    )
    c.ask(
        req(25, c.next_corr(), s(f"no-super-{SUFFIX}")),
        "partitions, no such super stream",
        "partitions response",
    )
    c.close()
    sc["create_delete_metadata"] = c.steps

    # publishing
    c = Raw()
    c.handshake()
    c.ask(
        req(1, c.next_corr(), struct.pack(">B", 0) + s("ref-a") + s(stream)),
        "declare publisher 0, ref-a",
        "ok",
    )
    c.ask(
        req(1, c.next_corr(), struct.pack(">B", 0) + s("") + s(stream)),
        "declare publisher 0 again",
        "precondition failed",
    )
    c.ask(
        req(1, c.next_corr(), struct.pack(">B", 1) + s("ref-a") + s(stream)),
        "same reference, other id",
        "precondition failed",
    )
    c.ask(
        req(1, c.next_corr(), struct.pack(">B", 2) + s("") + s(f"missing-{SUFFIX}")),
        "missing stream",
        "stream does not exist",
    )
    msgs = [(1, amqp10_data(b"m1")), (2, amqp10_data(b"m2")), (3, amqp10_full())]
    c.ask(cmd(2, publish_payload(0, msgs)), "publish 3", "confirm")
    c.ask(
        cmd(2, publish_payload(0, [(2, amqp10_data(b"dup"))])),
        "publish a duplicate publishing id",
        "confirm of the duplicate",
    )
    batch = sub_batch(4, [amqp10_data(b"b1"), amqp10_data(b"b2"), amqp10_data(b"b3")])
    c.ask(cmd(2, struct.pack(">BI", 0, 1) + batch), "publish a sub-entry batch (uncompressed)", "confirm")
    c.ask(
        cmd(2, publish_payload(9, [(1, amqp10_data(b"x"))])),
        "publish with an undeclared publisher",
        "publish error",
    )
    query_by_reference(
        c, 5, ("ref-a", "ref-unknown"), stream, "query publisher sequence", ("sequence", "sequence 0")
    )
    c.send(
        frame(struct.pack(">HHB", 10, 1, 0)[:4] + s("consumer-1") + s(stream) + struct.pack(">Q", 3)),
        "store offset 3",
    )
    c.quiet(0.3)
    query_by_reference(c, 11, ("consumer-1", "consumer-x"), stream, "query offset", ("offset 3", "no offset"))
    c.ask(
        cmd(2, publish_payload(0, [(10, amqp10_data(b"after-tracking"))])),
        "publish after store offset",
        "confirm",
    )
    c.ask(req(6, c.next_corr(), struct.pack(">B", 0)), "delete publisher", "ok")
    c.ask(req(6, c.next_corr(), struct.pack(">B", 0)), "delete it again", "publisher does not exist")
    c.close()
    sc["publish"] = c.steps

    # consuming
    c = Raw()
    c.handshake()
    c.ask(subscribe(c.next_corr(), 1, stream, struct.pack(">H", 1), 10), "subscribe first, credit 10", "ok")
    drain(c, "deliver")
    c.ask(
        subscribe(c.next_corr(), 1, stream, struct.pack(">H", 1), 10),
        "same subscription id",
        "subscription id already exists",
    )
    c.ask(
        subscribe(c.next_corr(), 2, f"missing-{SUFFIX}", struct.pack(">H", 1), 10),
        "missing stream",
        "stream does not exist",
    )
    c.ask(cmd(9, struct.pack(">BH", 77, 1)), "credit an unknown subscription", "credit response")
    c.ask(req(12, c.next_corr(), struct.pack(">B", 1)), "unsubscribe", "ok")
    c.ask(req(12, c.next_corr(), struct.pack(">B", 1)), "unsubscribe again", "subscription id does not exist")
    c.ask(
        subscribe(c.next_corr(), 3, stream, struct.pack(">HQ", 4, 1), 1), "subscribe offset 1, credit 1", "ok"
    )
    drain(c, "deliver (one chunk: credit 1)")
    c.send(cmd(9, struct.pack(">BH", 3, 2)), "credit 2")
    drain(c, "deliver")
    c.ask(subscribe(c.next_corr(), 4, stream, struct.pack(">H", 2), 5), "subscribe last", "ok")
    drain(c, "deliver")
    c.ask(subscribe(c.next_corr(), 5, stream, struct.pack(">H", 3), 5), "subscribe next", "ok")
    drain(c, "nothing")
    ts = int(time.time() * 1000) - 3_600_000
    c.send(
        subscribe(c.next_corr(), 6, stream, struct.pack(">Hq", 5, ts), 5), "subscribe timestamp an hour ago"
    )
    c.recv("ok")
    drain(c, "deliver")
    c.send(
        subscribe(c.next_corr(), 7, stream, struct.pack(">Hq", 5, ts + 7_200_000), 5),
        "timestamp in the future",
    )
    c.recv("ok")
    drain(c, "nothing")
    c.ask(subscribe(c.next_corr(), 8, stream, struct.pack(">HQ", 4, 1000), 5), "offset past the end", "ok")
    drain(c, "nothing")
    c.ask(req(1, c.next_corr(), struct.pack(">B", 0) + s("") + s(stream)), "declare publisher", "ok")
    c.send(cmd(2, publish_payload(0, [(1, amqp10_data(b"live"))])), "publish one")
    drain(c, "confirm and deliveries to subscriptions 4? 5, 6, 7")
    c.send(
        subscribe(c.next_corr(), 9, stream, struct.pack(">H", 1), 5, {"chunk_selector": "all"}),
        "subscribe first, chunk_selector all",
    )
    c.recv("ok")
    drain(c, "deliver, tracking chunks too")
    c.close()
    sc["subscribe"] = c.steps

    # AMQP 0-9-1 interplay: what 5552 wrote read over 0-9-1, and the reverse
    params = pika.ConnectionParameters(HOST, 5672, credentials=pika.PlainCredentials("guest", "guest"))
    conn = pika.BlockingConnection(params)
    ch = conn.channel()
    ch.basic_qos(prefetch_count=100)
    got: list[dict[str, Any]] = []

    def on_msg(chan: Any, method: Any, props: Any, body: bytes) -> None:
        got.append(
            {
                "exchange": method.exchange,
                "routing_key": method.routing_key,
                "body": body.hex(),
                "properties": {
                    k: (v if not isinstance(v, bytes) else v.hex())
                    for k, v in vars(props).items()
                    if v is not None and k != "headers"
                },
                "headers": {k: repr(v) for k, v in (props.headers or {}).items()},
            }
        )
        chan.basic_ack(method.delivery_tag)

    tag = ch.basic_consume(stream, on_msg, arguments={"x-stream-offset": "first"})
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and len(got) < 8:
        conn.process_data_events(time_limit=0.2)
    out["amqp091_reads_of_5552_messages"] = got
    ch.basic_cancel(tag)
    ch = conn.channel()
    props = pika.BasicProperties(
        content_type="application/json",
        content_encoding="utf-8",
        headers={"h-str": "v", "h-int": 7, "h-bool": True, "h-long": 2**40},
        delivery_mode=2,
        priority=3,
        correlation_id="corr",
        reply_to="rq",
        expiration="60000",
        message_id="mid",
        timestamp=1_700_000_000,
        type="t",
        user_id="guest",
        app_id="app",
    )
    ch.basic_publish("", stream, b"from 0-9-1", props)
    ch.basic_publish("amq.direct", "nowhere", b"unrouted")
    ch.queue_bind(stream, "amq.direct", "to-stream")
    ch.basic_publish("amq.direct", "to-stream", b"via amq.direct", pika.BasicProperties())
    ch.queue_unbind(stream, "amq.direct", "to-stream")
    time.sleep(0.5)
    conn.close()

    c = Raw()
    c.handshake()
    c.send(
        subscribe(c.next_corr(), 1, stream, struct.pack(">HQ", 4, 9), 10),
        "subscribe offset 9: the 0-9-1 messages",
    )
    c.recv("ok")
    drain(c, "deliver")
    c.close()
    sc["amqp091_written_read_over_5552"] = c.steps

    # errors after open
    c = Raw()
    c.handshake()
    c.ask(frame(struct.pack(">HHI", 0x50, 1, 99)), "unknown key after open", "close request from the server")
    c.recv("then? (no close response sent)", timeout=12)
    sc["unknown_frame"] = c.steps

    c = Raw()
    c.handshake()
    c.send(frame(struct.pack(">HHIB", 1, 1, 5, 0) + b"\x00"), "truncated declare publisher")
    close_req = c.recv("close request from the server")
    if close_req is not None:
        corr = struct.unpack(">I", close_req[8:12])[0]
        c.send(frame(struct.pack(">HHIH", 0x8016, 1, corr, 1)), "close response")
        c.recv("then?", timeout=2)
    sc["malformed_frame"] = c.steps

    c = Raw()
    c.handshake()
    big = b"\x00" * (1_200_000)
    c.ask(req(1, c.next_corr(), struct.pack(">B", 0) + s("") + s(stream)), "declare publisher", "ok")
    c.send(cmd(2, publish_payload(0, [(1, amqp10_data(big))])), "a publish larger than frame_max (1 MiB)")
    c.recv("then?", timeout=3)
    sc["frame_too_large"] = c.steps

    c = Raw()
    c.handshake()
    c.ask(req(14, c.next_corr(), s(stream)), "delete the stream", "ok")
    c.close()
    sc["delete"] = c.steps

    path = HERE / "rabbitmq_3.10.8.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
