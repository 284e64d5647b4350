"""A scripted session and a recorder of what it makes `amq.rabbitmq.event` publish, for any broker.

The recorder binds a server-named queue to `amq.rabbitmq.event` with `#` and reads the deliveries
off a raw socket, so each header keeps its AMQP type (client libraries decode them to Python
values). `normalized` turns a recording into what two brokers must agree on: the events of this
session only (by the names it used, and the connections and channels they lead to), with
timestamps, ports, process ids and consumer tags replaced by placeholders (pids numbered by first
appearance, so identity still counts). RabbitMQ deletes a vhost's exchanges in its table's hash
order, and applies a policy to its queues in that order too: those runs are compared sorted by
name.
"""

from __future__ import annotations

import contextlib
import re
import struct
import threading
import time
import uuid
from typing import Any

import pika
import pika.exceptions
import requests
from pamqp import commands

from amqpwire.fields import Field, FieldTable
from broker.protocol.properties import decode_value, locate
from tests.differential_support import RawAmqp

EXCHANGE = "amq.rabbitmq.event"


def typed(f: Any) -> Any:
    if isinstance(f, Field):
        v = f.value
        if isinstance(v, FieldTable):
            return [f.type, [[k, typed(x)] for k, x in v]]
        if isinstance(v, list | tuple):
            return [f.type, [typed(x) for x in v]]
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        return [f.type, v]
    return repr(f)


class Recorder:
    """Consumes every event the broker publishes while it runs."""

    def __init__(self, host: str, port: int) -> None:
        self.raw = RawAmqp(host, port)
        raw = self.raw
        raw.send(1, commands.Channel.Open())
        raw.expect(commands.Channel.OpenOk)
        raw.send(1, commands.Queue.Declare(queue="", exclusive=True))
        queue = self.queue = raw.expect(commands.Queue.DeclareOk).queue
        raw.send(1, commands.Queue.Bind(queue=queue, exchange=EXCHANGE, routing_key="#"))
        raw.expect(commands.Queue.BindOk)
        raw.send(1, commands.Basic.Consume(queue=queue, no_ack=True))
        raw.expect(commands.Basic.ConsumeOk)
        self.events: list[dict[str, Any]] = []
        self._stop = False
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        buf = self.raw.buf
        sock = self.raw.sock
        sock.settimeout(0.2)
        key = ""
        while not self._stop:
            while len(buf) >= 7:
                kind, _ch, size = struct.unpack(">BHI", buf[:7])
                if len(buf) < 8 + size:
                    break
                payload, buf = buf[7 : 7 + size], buf[8 + size :]
                if kind == 1 and payload[:4] == b"\x00\x3c\x00\x3c":  # basic.deliver
                    p = payload[4:]
                    p = p[1 + p[0] :][9:]  # consumer tag, delivery tag, redelivered
                    p = p[1 + p[0] :]  # exchange
                    key = p[1 : 1 + p[0]].decode()
                elif kind == 2:
                    props = bytes(payload[12:])
                    values = {k: decode_value(props, k, s) for k, s in locate(props).items()}
                    headers = values.pop("headers", FieldTable())
                    self.events.append(
                        {
                            "key": key,
                            "properties": sorted(values),
                            "delivery_mode": values.get("delivery_mode"),
                            "headers": [[k, typed(v)] for k, v in headers],
                        }
                    )
            try:
                chunk = sock.recv(65536)
            except (TimeoutError, OSError):
                continue
            if not chunk:
                break
            buf += chunk

    def stop(self, settle: float = 1.0) -> list[dict[str, Any]]:
        time.sleep(settle)
        self._stop = True
        self._thread.join(5)
        with contextlib.suppress(OSError):
            self.raw.sock.close()
        return self.events


def run_session(host: str, port: int, http: str, prefix: str) -> None:
    """Declares, binds, a consumer, a policy, a user with a failed login, a vhost: the same
    against any broker (`http`: its management API base, `http://host:port/api`)."""
    auth = ("guest", "guest")
    user, vhost = f"{prefix}.u", f"{prefix}.v"
    conn = pika.BlockingConnection(
        pika.ConnectionParameters(host, port, client_properties={"connection_name": prefix})
    )
    try:
        ch = conn.channel()
        q, x = f"{prefix}.q", f"{prefix}.x"
        ch.queue_declare(q)
        ch.queue_declare(q)
        ch.exchange_declare(x, "direct")
        ch.queue_bind(q, x, "rk")
        tag = ch.basic_consume(q, lambda *a: None, consumer_tag=f"{prefix}.c")
        ch.basic_cancel(tag)
        ch.queue_unbind(q, x, "rk")
        ch.exchange_delete(x)
        ch.queue_delete(q)
        policy = {
            "pattern": f"^{prefix}\\.none$",
            "definition": {"max-length": 5},
            "apply-to": "queues",
            "priority": 1,
        }
        requests.put(f"{http}/policies/%2F/{prefix}.p", json=policy, auth=auth, timeout=10).raise_for_status()
        requests.delete(f"{http}/policies/%2F/{prefix}.p", auth=auth, timeout=10).raise_for_status()
        requests.put(
            f"{http}/users/{user}", json={"password": "pw1", "tags": "monitoring"}, auth=auth, timeout=10
        ).raise_for_status()
        requests.put(
            f"{http}/users/{user}", json={"password": "pw2", "tags": "management"}, auth=auth, timeout=10
        ).raise_for_status()
        perms = {"configure": ".*", "write": ".*", "read": ".*"}
        requests.put(f"{http}/permissions/%2F/{user}", json=perms, auth=auth, timeout=10).raise_for_status()
        refused = pika.ConnectionParameters(
            host,
            port,
            credentials=pika.PlainCredentials(user, "wrong"),
            client_properties={"connection_name": f"{prefix}.refused"},
        )
        with contextlib.suppress(pika.exceptions.ProbableAuthenticationError):
            pika.BlockingConnection(refused).close()
        requests.delete(f"{http}/permissions/%2F/{user}", auth=auth, timeout=10).raise_for_status()
        requests.delete(f"{http}/users/{user}", auth=auth, timeout=10).raise_for_status()
        requests.put(f"{http}/vhosts/{vhost}", auth=auth, timeout=10).raise_for_status()
        requests.delete(f"{http}/vhosts/{vhost}", auth=auth, timeout=10).raise_for_status()
        ch.close()
    finally:
        conn.close()
        for path in (f"users/{user}", f"vhosts/{vhost}"):
            requests.delete(f"{http}/{path}", auth=auth, timeout=10)


def run_cascades(host: str, port: int, http: str, prefix: str) -> None:
    """What goes without being asked: a deleted queue's bindings and its auto-delete exchange, an
    auto-delete exchange left without bindings, an auto-delete queue left without consumers, an
    exclusive queue and the consumers of a closing channel and connection, a channel closed by an
    error; and management's queue and user variants."""
    auth = ("guest", "guest")
    user = f"{prefix}.u"
    conn = pika.BlockingConnection(
        pika.ConnectionParameters(host, port, client_properties={"connection_name": prefix})
    )
    try:
        ch = conn.channel()
        q, x, y = f"{prefix}.q", f"{prefix}.x", f"{prefix}.y"
        ch.exchange_declare(x, "topic", auto_delete=True)
        ch.queue_declare(q, arguments={"x-max-length": 3})
        ch.queue_bind(q, x, "a.#")
        ch.queue_bind(q, "amq.topic", "b")
        ch.queue_delete(q)
        ch.exchange_declare(y, "fanout", auto_delete=True)
        ch.queue_declare(q)
        ch.queue_bind(q, y)
        ch.queue_unbind(q, y)
        ch.queue_delete(q)
        ch.queue_declare(f"{prefix}.ad", auto_delete=True)
        tag = ch.basic_consume(f"{prefix}.ad", lambda *a: None, consumer_tag=f"{prefix}.c1")
        ch.basic_cancel(tag)
        ch.queue_declare(f"{prefix}.ex", exclusive=True)
        ch.basic_consume(f"{prefix}.ex", lambda *a: None, consumer_tag=f"{prefix}.c2")
        ch2 = conn.channel()
        with contextlib.suppress(pika.exceptions.ChannelClosedByBroker):
            ch2.queue_declare(f"{prefix}.missing", passive=True)
        ch3 = conn.channel()
        ch3.queue_declare(f"{prefix}.q3")
        ch3.basic_consume(f"{prefix}.q3", lambda *a: None, consumer_tag=f"{prefix}.c3")
        ch3.close()
        ch3 = conn.channel()
        ch3.queue_delete(f"{prefix}.q3")
        ch3.close()
        requests.put(
            f"{http}/queues/%2F/{prefix}.mq", json={"durable": False}, auth=auth, timeout=10
        ).raise_for_status()
        requests.delete(f"{http}/queues/%2F/{prefix}.mq", auth=auth, timeout=10).raise_for_status()
        requests.put(
            f"{http}/users/{user}", json={"password": "pw", "tags": ""}, auth=auth, timeout=10
        ).raise_for_status()
        stored = requests.get(f"{http}/users/{user}", auth=auth, timeout=10).json()
        with_hash = {"password_hash": stored["password_hash"], "tags": "administrator"}
        requests.put(f"{http}/users/{user}", json=with_hash, auth=auth, timeout=10).raise_for_status()
        requests.put(
            f"{http}/users/{user}", json={"tags": "monitoring"}, auth=auth, timeout=10
        ).raise_for_status()
        for configure in (".*", ""):
            perms = {"configure": configure, "write": ".*", "read": ".*"}
            requests.put(
                f"{http}/permissions/%2F/{user}", json=perms, auth=auth, timeout=10
            ).raise_for_status()
        requests.delete(f"{http}/users/{user}", auth=auth, timeout=10).raise_for_status()
    finally:
        conn.close()
        for path in (f"users/{user}", f"queues/%2F/{prefix}.q3", f"queues/%2F/{prefix}.q"):
            requests.delete(f"{http}/{path}", auth=auth, timeout=10)


def run_policies(host: str, port: int, http: str, prefix: str) -> None:
    """A policy set on a queue and an exchange, changed (two keys in its definition), cleared."""
    auth = ("guest", "guest")
    conn = pika.BlockingConnection(
        pika.ConnectionParameters(host, port, client_properties={"connection_name": prefix})
    )
    try:
        ch = conn.channel()
        ch.queue_declare(f"{prefix}.q")
        ch.queue_declare(f"{prefix}.q2", arguments={"x-queue-type": "quorum"}, durable=True)
        ch.exchange_declare(f"{prefix}.x", "direct")
        policy: dict[str, Any] = {
            "pattern": f"^{prefix}\\.",
            "definition": {"max-length": 5},
            "apply-to": "all",
            "priority": 1,
        }
        url = f"{http}/policies/%2F/{prefix}.p"
        requests.put(url, json=policy, auth=auth, timeout=10).raise_for_status()
        policy["definition"] = {"max-length": 6, "message-ttl": 1000}
        requests.put(url, json=policy, auth=auth, timeout=10).raise_for_status()
        requests.put(url, json=policy, auth=auth, timeout=10).raise_for_status()  # the same again
        requests.delete(url, auth=auth, timeout=10).raise_for_status()
        ch.queue_delete(f"{prefix}.q")
        ch.queue_delete(f"{prefix}.q2")
        ch.exchange_delete(f"{prefix}.x")
        ch.close()
    finally:
        conn.close()
        for path in (f"policies/%2F/{prefix}.p", f"queues/%2F/{prefix}.q", f"queues/%2F/{prefix}.q2"):
            requests.delete(f"{http}/{path}", auth=auth, timeout=10)


SESSIONS = {"session": run_session, "cascades": run_cascades, "policies": run_policies}


def record(
    host: str, port: int, http: str, session: str = "session", settle: float = 1.0
) -> list[dict[str, Any]]:
    """Run a session on a broker with its event exchange on; the normalized events (`settle`:
    how long to wait for the last ones: RabbitMQ publishes them from another process)."""
    prefix = "hb-events-" + uuid.uuid4().hex[:8]
    recorder = Recorder(host, port)
    time.sleep(0.3)
    try:
        SESSIONS[session](host, port, http, prefix)
    finally:
        events = recorder.stop(settle)
    return normalized(events, prefix, recorder.queue)


_PID = re.compile(r"^<[^<>]+\.\d+\.\d+\.\d+>$")
_CTAG = re.compile(r"amq\.ctag-[A-Za-z0-9_\-]+")
_CONN_NAME = re.compile(r"\d+\.\d+\.\d+\.\d+:\d+ -> \d+\.\d+\.\d+\.\d+:\d+")
_VOLATILE = {"timestamp_in_ms", "connected_at", "peer_port", "port"}


def _mentions(value: Any, needle: str) -> bool:
    return needle in repr(value)


def normalized(events: list[dict[str, Any]], prefix: str, queue: str) -> list[dict[str, Any]]:
    """This session's events with placeholders for what differs run to run (see the module);
    `queue`: the recorder's, whose own binding and consumer are events too (its declaration is
    not: nothing was bound yet)."""

    def header(e: dict[str, Any], name: str) -> Any:
        for k, v in e["headers"]:
            if k == name:
                return v[1]
        return None

    for e in events:  # an Erlang string (the refusal) as text, so the prefix can be found in it
        for h in e["headers"]:
            if h[0] == "error" and h[1][0] == "array":
                h[1] = ["array-of-char-codes", "".join(chr(c[1]) for c in h[1][1])]
    conns = {header(e, "pid") for e in events if e["key"] == "connection.created" and _mentions(e, prefix)}
    names = {
        header(e, "name") for e in events if e["key"] == "connection.created" and header(e, "pid") in conns
    }
    conns |= {header(e, "pid") for e in events if e["key"] == "connection.closed" and _mentions(e, prefix)}
    channels = {
        header(e, "pid") for e in events if e["key"] == "channel.created" and header(e, "connection") in conns
    }
    kept = []
    for e in events:
        key = e["key"]
        if key.startswith("channel."):
            keep = header(e, "pid") in channels
        elif key == "user.authentication.success":
            keep = header(e, "connection_name") in names
        else:
            keep = _mentions(e, prefix) or _mentions(e, queue)
        if keep:
            kept.append(e)
    pids: dict[str, str] = {}

    def scrub(name: str, v: Any) -> Any:
        if isinstance(v, list):
            return [scrub("", x) for x in v]
        if not isinstance(v, str):
            return v
        if _PID.match(v):
            return pids.setdefault(v, f"<pid{len(pids) + 1}>")
        v = _CTAG.sub("amq.ctag-*", _CONN_NAME.sub("<connection>", v))
        return v.replace(prefix, "<p>").replace(queue, "<recorder>")

    out = []
    for e in kept:
        headers = [
            [k, [t, "<volatile>"] if k in _VOLATILE else [t, scrub(k, v)]] for k, (t, v) in e["headers"]
        ]
        out.append({**e, "headers": headers})
    return _sorted_exchange_deletions(out)


def _sorted_exchange_deletions(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs of (parameter.set, exchange.deleted, parameter.cleared) sorted by exchange name, and
    runs of one queue.policy.* kind by queue: RabbitMQ walks its tables in hash order there."""
    out: list[dict[str, Any]] = []
    i = 0
    keys = [e["key"] for e in events]
    while i < len(events):
        step = 3 if keys[i : i + 3] == ["parameter.set", "exchange.deleted", "parameter.cleared"] else 1
        j = i
        while keys[j : j + step] == keys[i : i + step] and (step == 3 or keys[i].startswith("queue.policy.")):
            j += step
        if j - i > step:
            groups = [events[k : k + step] for k in range(i, j, step)]
            groups.sort(key=lambda g: repr(g[-1 if step == 1 else 1]["headers"]))
            out.extend(e for g in groups for e in g)
            i = j
        else:
            out.append(events[i])
            i += 1
    return out
