"""The firehose scenario shared by the live-compared and the hashbroker-only trace tests.

The trace messages are read with a raw-socket basic.get and their content header decoded by
`amqpwire`, so every header's wire type (signedint vs long, longstr, array, table) is part of the
observation: client libraries would turn them all into plain ints and strings.
"""

from __future__ import annotations

import re
import struct
import uuid
from typing import Any

import pika
from pamqp import commands

from amqpwire.fields import Field, FieldTable
from broker.protocol import properties as P
from tests.differential_support import ALL_PROPERTIES, RawAmqp
from tests.management_support import call, q

_FRAME = struct.Struct(">BHI")
# "127.0.0.1:54321 -> 127.0.0.1:5672": RabbitMQ's connection name, compared by its shape
_CONN_NAME = re.compile(r"^\d+\.\d+\.\d+\.\d+:\d+ -> \d+\.\d+\.\d+\.\d+:\d+$")
# a direct reply-to address: opaque, each broker encodes its own channel identity
_REPLY_TO = re.compile(r"amq\.rabbitmq\.reply-to\.\S+")


def typed(value: Field) -> Any:
    """A field as [type, value] with containers typed all the way down."""
    if value.type == "table":
        return ["table", [[k, typed(v)] for k, v in value.value]]
    if value.type == "array":
        return ["array", [typed(v) for v in value.value]]
    raw = value.value
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    return [value.type, raw]


def _read_frame(raw: RawAmqp) -> tuple[int, int, bytes]:
    while True:
        if len(raw.buf) >= 7:
            kind, channel, size = _FRAME.unpack_from(raw.buf)
            if len(raw.buf) >= 8 + size:
                payload = raw.buf[7 : 7 + size]
                raw.buf = raw.buf[8 + size :]
                if kind == 8:  # heartbeat
                    continue
                return kind, channel, payload
        chunk = raw.sock.recv(65536)
        if not chunk:
            raise ConnectionError("EOF")
        raw.buf += chunk


def _shortstr(data: bytes, pos: int) -> tuple[str, int]:
    n = data[pos]
    return data[pos + 1 : pos + 1 + n].decode(), pos + 1 + n


def raw_get(raw: RawAmqp, channel: int, queue: str) -> dict[str, Any] | None:
    """basic.get (no-ack) on a raw connection: the message with typed properties, None when empty."""
    raw.send(channel, commands.Basic.Get(queue=queue, no_ack=True))
    _kind, _ch, method = _read_frame(raw)
    class_id, method_id = struct.unpack_from(">HH", method)
    if (class_id, method_id) == (60, 72):
        return None
    assert (class_id, method_id) == (60, 71), method
    pos = 4 + 8
    redelivered = bool(method[pos])
    exchange, pos = _shortstr(method, pos + 1)
    routing_key, pos = _shortstr(method, pos)
    _kind, _ch, head = _read_frame(raw)
    (size,) = struct.unpack_from(">Q", head, 4)
    props = bytes(head[12:])
    body = b""
    while len(body) < size:
        _kind, _ch, chunk = _read_frame(raw)
        body += chunk
    properties: dict[str, Any] = {}
    for name, span in P.locate(props).items():
        value = P.decode_value(props, name, span)
        properties[name] = typed(Field("table", value)) if isinstance(value, FieldTable) else value
    return {
        "exchange": exchange,
        "routing_key": routing_key,
        "redelivered": redelivered,
        "properties": properties,
        "body": body.decode("utf-8", "replace"),
    }


def normalise(obs: Any, names: dict[str, str]) -> Any:
    """Replace generated names, the node name and connection names by placeholders."""
    if isinstance(obs, dict):
        return {k: normalise(v, names) for k, v in obs.items()}
    if isinstance(obs, list):
        if len(obs) == 2 and obs[0] == "longstr" and isinstance(obs[1], str) and _CONN_NAME.match(obs[1]):
            return ["longstr", "<connection>"]
        return [normalise(v, names) for v in obs]
    if isinstance(obs, str):
        for real in sorted(names, key=len, reverse=True):
            obs = obs.replace(real, names[real])
        return _REPLY_TO.sub("amq.rabbitmq.reply-to.<id>", obs)
    return obs


def firehose_scenario(api: str, amqp_port: int, node: str) -> list[Any]:
    """Tracing on in a fresh vhost; publishes and deliveries of every kind; the trace queue's content.

    `api` is the management base URL, `node` the broker's node name (replaced by "<node>").
    """
    run = uuid.uuid4().hex[:8]
    vhost = f"tracer-test-{run}"
    x, w, t = f"tracer-x-{run}", f"tracer-w-{run}", f"tracer-t-{run}"
    names = {vhost: "<vhost>", x: "<x>", w: "<w>", t: "<t>", node: "<node>"}
    assert call(api, "PUT", f"/api/vhosts/{q(vhost)}")[0] in (201, 204)
    try:
        everything = {"configure": ".*", "write": ".*", "read": ".*"}
        assert call(api, "PUT", f"/api/permissions/{q(vhost)}/guest", everything)[0] in (201, 204)
        before = call(api, "GET", f"/api/vhosts/{q(vhost)}")[1]["tracing"]
        trace_x = call(api, "GET", f"/api/exchanges/{q(vhost)}/amq.rabbitmq.trace")[1]
        # RabbitMQ names the vhost's creator; hashbroker does not record who made a vhost
        trace_x.pop("user_who_performed_action", None)
        assert call(api, "PUT", f"/api/vhosts/{q(vhost)}", {"tracing": True})[0] == 204
        after = call(api, "GET", f"/api/vhosts/{q(vhost)}")[1]["tracing"]
        guest = pika.PlainCredentials("guest", "guest")
        params = pika.ConnectionParameters("127.0.0.1", amqp_port, vhost, guest)
        conn = pika.BlockingConnection(params)
        try:
            messages = _traffic(conn, x, w, t)
        finally:
            conn.close()
        raw = RawAmqp("127.0.0.1", amqp_port, vhost=vhost)
        try:
            raw.open_channel(1)
            traces = []
            while (m := raw_get(raw, 1, t)) is not None:
                traces.append(m)
        finally:
            raw.close()
        assert call(api, "PUT", f"/api/vhosts/{q(vhost)}", {"tracing": False})[0] == 204
        off = call(api, "GET", f"/api/vhosts/{q(vhost)}")[1]["tracing"]
        return normalise([before, after, off, trace_x, messages, traces], names)
    finally:  # RabbitMQ keeps a deleted vhost's name in its list of traced vhosts: off first
        call(api, "PUT", f"/api/vhosts/{q(vhost)}", {"tracing": False})
        call(api, "DELETE", f"/api/vhosts/{q(vhost)}")


def _traffic(conn: pika.BlockingConnection, x: str, w: str, t: str) -> list[Any]:
    ch = conn.channel()
    ch.confirm_delivery()
    ch.queue_declare(t)
    ch.queue_bind(t, "amq.rabbitmq.trace", "#")
    ch.exchange_declare(x, "direct")
    ch.queue_declare(w)
    ch.queue_bind(w, x, "k")
    headers = {"s": "v", "n": 7, "big": 1 << 40, "b": True, "l": ["a", 1], "t": {"in": "ner"}}
    rich = pika.BasicProperties(headers=headers, **ALL_PROPERTIES)
    ch.basic_publish(x, "k", b"rich", rich)
    ch.basic_publish(x, "nowhere", b"unroutable")
    ch.basic_publish("", w, b"default")
    ch.basic_publish(x, "k", b"cc", pika.BasicProperties(headers={"CC": ["k", "other"]}))
    ch.basic_publish(x, "nowhere", b"bcc", pika.BasicProperties(headers={"BCC": ["k"], "h": 1}))
    ch.basic_publish(x, "k", b"late", pika.BasicProperties(timestamp=(1 << 40) + 5, priority=0))
    ch2 = conn.channel()
    out = []
    method, _props, body = ch2.basic_get(w)
    out.append(body.decode())
    ch2.basic_reject(method.delivery_tag, requeue=True)
    method, _props, body = ch2.basic_get(w)
    out.append([body.decode(), method.redelivered])
    ch2.basic_ack(method.delivery_tag)
    got: list[str] = []

    def on_message(c: Any, m: Any, _p: Any, b: bytes) -> None:
        got.append(b.decode())
        c.basic_ack(m.delivery_tag)

    ch2.basic_consume(w, on_message)
    deadline = 50
    while len(got) < 4 and deadline:
        conn.process_data_events(0.1)
        deadline -= 1
    out.append(got)
    ch2.close()
    # direct reply-to: the request's reply_to is rewritten before the trace; the reply is traced as
    # a publish to the default exchange, its delivery to the reply consumer is not traced
    replies: list[bytes] = []
    rpc = conn.channel()
    rpc.basic_consume("amq.rabbitmq.reply-to", lambda _c, _m, _p, b: replies.append(b), auto_ack=True)
    rpc.basic_publish("", w, b"request", pika.BasicProperties(reply_to="amq.rabbitmq.reply-to"))
    for _ in range(50):
        method, props, _body = ch.basic_get(w, auto_ack=True)
        if method is not None:
            break
        conn.process_data_events(0.1)
    ch.basic_publish("", props.reply_to, b"reply")
    for _ in range(50):
        if replies:
            break
        conn.process_data_events(0.1)
    out.append([b.decode() for b in replies])
    # 8 publishes and 7 deliveries: wait until their 15 trace messages are in the trace queue
    for _ in range(50):
        if ch.queue_declare(t, passive=True).method.message_count >= 15:
            break
        conn.process_data_events(0.1)
    return out
