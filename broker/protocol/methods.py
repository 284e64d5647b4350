"""Decoding of client-sent methods and encoding of the hot server-sent ones.

Client methods are decoded here from a compact field spec rather than with pamqp because pamqp
turns field tables into plain dicts, losing the wire types RabbitMQ compares (headers-exchange
binding arguments, "inequivalent arg ... of type 'signedint'" texts). Rare server methods are encoded
with pamqp (see `encode_method`); per-message ones (deliver, get-ok, return, confirm ack/nack) are
packed by hand because they run once per message.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from amqpwire.errors import AmqpError
from amqpwire.fields import FieldDecodeError, FieldTable
from broker.protocol.framing import FRAME_END_BYTE, FRAME_METHOD, ReaderCrash, erl_binary, frame_error

# Field kinds: s shortstr, S longstr, o octet, h short, l long, L longlong, b bit, t table
_SPECS: dict[tuple[int, int], tuple[str, str, tuple[str, ...]]] = {
    (10, 11): ("connection.start_ok", "tsSs", ("client_properties", "mechanism", "response", "locale")),
    (10, 21): ("connection.secure_ok", "S", ("response",)),
    (10, 31): ("connection.tune_ok", "hlh", ("channel_max", "frame_max", "heartbeat")),
    (10, 40): ("connection.open", "ssb", ("virtual_host", "capabilities", "insist")),
    (10, 50): ("connection.close", "hshh", ("reply_code", "reply_text", "class_id", "method_id")),
    (10, 51): ("connection.close_ok", "", ()),
    (10, 70): ("connection.update_secret", "Ss", ("new_secret", "reason")),
    (20, 10): ("channel.open", "s", ("out_of_band",)),
    (20, 20): ("channel.flow", "b", ("active",)),
    (20, 21): ("channel.flow_ok", "b", ("active",)),
    (20, 40): ("channel.close", "hshh", ("reply_code", "reply_text", "class_id", "method_id")),
    (20, 41): ("channel.close_ok", "", ()),
    (40, 10): (
        "exchange.declare",
        "hssbbbbbt",
        (
            "ticket",
            "exchange",
            "type",
            "passive",
            "durable",
            "auto_delete",
            "internal",
            "nowait",
            "arguments",
        ),
    ),
    (40, 20): ("exchange.delete", "hsbb", ("ticket", "exchange", "if_unused", "nowait")),
    (40, 30): (
        "exchange.bind",
        "hsssbt",
        ("ticket", "destination", "source", "routing_key", "nowait", "arguments"),
    ),
    (40, 40): (
        "exchange.unbind",
        "hsssbt",
        ("ticket", "destination", "source", "routing_key", "nowait", "arguments"),
    ),
    (50, 10): (
        "queue.declare",
        "hsbbbbbt",
        ("ticket", "queue", "passive", "durable", "exclusive", "auto_delete", "nowait", "arguments"),
    ),
    (50, 20): ("queue.bind", "hsssbt", ("ticket", "queue", "exchange", "routing_key", "nowait", "arguments")),
    (50, 30): ("queue.purge", "hsb", ("ticket", "queue", "nowait")),
    (50, 40): ("queue.delete", "hsbbb", ("ticket", "queue", "if_unused", "if_empty", "nowait")),
    (50, 50): ("queue.unbind", "hssst", ("ticket", "queue", "exchange", "routing_key", "arguments")),
    (60, 10): ("basic.qos", "lhb", ("prefetch_size", "prefetch_count", "global_")),
    (60, 20): (
        "basic.consume",
        "hssbbbbt",
        ("ticket", "queue", "consumer_tag", "no_local", "no_ack", "exclusive", "nowait", "arguments"),
    ),
    (60, 30): ("basic.cancel", "sb", ("consumer_tag", "nowait")),
    (60, 40): ("basic.publish", "hssbb", ("ticket", "exchange", "routing_key", "mandatory", "immediate")),
    (60, 70): ("basic.get", "hsb", ("ticket", "queue", "no_ack")),
    (60, 80): ("basic.ack", "Lb", ("delivery_tag", "multiple")),
    (60, 90): ("basic.reject", "Lb", ("delivery_tag", "requeue")),
    (60, 100): ("basic.recover_async", "b", ("requeue",)),
    (60, 110): ("basic.recover", "b", ("requeue",)),
    (60, 120): ("basic.nack", "Lbb", ("delivery_tag", "multiple", "requeue")),
    (85, 10): ("confirm.select", "b", ("nowait",)),
    (90, 10): ("tx.select", "", ()),
    (90, 20): ("tx.commit", "", ()),
    (90, 30): ("tx.rollback", "", ()),
}

# Methods only a server may send: a client sending one gets "unimplemented method" (503), as the
# channel process in RabbitMQ has no clause for them.
SERVER_ONLY: dict[tuple[int, int], str] = {
    (10, 10): "connection.start",
    (10, 20): "connection.secure",
    (10, 30): "connection.tune",
    (10, 41): "connection.open_ok",
    (10, 60): "connection.blocked",
    (10, 61): "connection.unblocked",
    (10, 71): "connection.update_secret_ok",
    (20, 11): "channel.open_ok",
    (40, 11): "exchange.declare_ok",
    (40, 21): "exchange.delete_ok",
    (40, 31): "exchange.bind_ok",
    (40, 51): "exchange.unbind_ok",
    (50, 11): "queue.declare_ok",
    (50, 21): "queue.bind_ok",
    (50, 31): "queue.purge_ok",
    (50, 41): "queue.delete_ok",
    (50, 51): "queue.unbind_ok",
    (60, 11): "basic.qos_ok",
    (60, 21): "basic.consume_ok",
    (60, 31): "basic.cancel_ok",
    (60, 50): "basic.return",
    (60, 60): "basic.deliver",
    (60, 71): "basic.get_ok",
    (60, 72): "basic.get_empty",
    (60, 111): "basic.recover_ok",
    (85, 11): "confirm.select_ok",
    (90, 11): "tx.select_ok",
    (90, 21): "tx.commit_ok",
    (90, 31): "tx.rollback_ok",
}

CONTENT_METHODS = frozenset({(60, 40)})


class Method(NamedTuple):
    """A decoded client method: ids, RabbitMQ's dotted name and the field values by name."""

    class_id: int
    method_id: int
    name: str
    args: dict[str, Any]


_S16 = struct.Struct(">H")
_S32 = struct.Struct(">I")
_S64 = struct.Struct(">Q")
_CM = struct.Struct(">HH")


def method_ids(payload: bytes) -> tuple[int, int]:
    """(class id, method id) of a method frame payload; (0, 0) if it is too short to name one."""
    if len(payload) < 4:
        return (0, 0)
    class_id, method_id = _CM.unpack_from(payload, 0)
    return (class_id, method_id)


def method_name(class_id: int, method_id: int) -> str | None:
    spec = _SPECS.get((class_id, method_id))
    if spec is not None:
        return spec[0]
    return SERVER_ONLY.get((class_id, method_id))


def decode_method(payload: bytes) -> Method:
    """Decode a method frame payload, failing as RabbitMQ does.

    Fewer than 4 octets is analyze_frame's `error` (501 unknown_frame); ids that RabbitMQ's framing
    module does not know crash its reader (`ReaderCrash`); a server-only method decodes there but no
    handler accepts it (503); fields that do not parse are a 501 "cannot decode".
    """
    if len(payload) < 4:
        raise frame_error(FRAME_METHOD, payload, "unknown_frame")
    class_id, method_id = _CM.unpack_from(payload, 0)
    spec = _SPECS.get((class_id, method_id))
    if spec is None:
        server_name = SERVER_ONLY.get((class_id, method_id))
        if server_name is not None:
            raise AmqpError(503, "unimplemented method", hard=True)
        raise ReaderCrash(f"unknown method id {{{class_id},{method_id}}}")
    name, kinds, names = spec
    try:
        values = _decode_fields(payload, 4, kinds)
    except (IndexError, struct.error, FieldDecodeError, UnicodeDecodeError) as exc:
        raise AmqpError(501, f"cannot decode {erl_binary(payload[4:])}") from exc
    return Method(class_id, method_id, name, dict(zip(names, values, strict=True)))


def _decode_fields(data: bytes, pos: int, kinds: str) -> list[Any]:
    out: list[Any] = []
    bit = 8
    bits = 0
    for kind in kinds:
        if kind == "b":
            if bit == 8:
                bits = data[pos]
                pos += 1
                bit = 0
            out.append(bool(bits & (1 << bit)))
            bit += 1
            continue
        bit = 8
        if kind == "s":
            n = data[pos]
            end = pos + 1 + n
            if end > len(data):
                raise IndexError
            out.append(data[pos + 1 : end].decode("utf-8", errors="surrogateescape"))
            pos = end
        elif kind == "S":
            (n,) = _S32.unpack_from(data, pos)
            end = pos + 4 + n
            if end > len(data):
                raise IndexError
            out.append(data[pos + 4 : end])
            pos = end
        elif kind == "h":
            out.append(_S16.unpack_from(data, pos)[0])
            pos += 2
        elif kind == "l":
            out.append(_S32.unpack_from(data, pos)[0])
            pos += 4
        elif kind == "L":
            out.append(_S64.unpack_from(data, pos)[0])
            pos += 8
        elif kind == "o":
            out.append(data[pos])
            pos += 1
        elif kind == "t":
            (n,) = _S32.unpack_from(data, pos)
            end = pos + 4 + n
            if end > len(data):
                raise IndexError
            out.append(FieldTable.decode(data[pos + 4 : end]))
            pos = end
    return out


# ---------------------------------------------------------------------------------------------
# Encoding


def shortstr(value: str | bytes) -> bytes:
    raw = value.encode("utf-8", errors="surrogateescape") if isinstance(value, str) else value
    if len(raw) > 255:
        raw = raw[:255]
    return bytes((len(raw),)) + raw


def method_frame(channel: int, payload: bytes) -> bytes:
    """A complete method frame around an already encoded (class, method, fields) payload."""
    return struct.pack(">BHI", FRAME_METHOD, channel, len(payload)) + payload + FRAME_END_BYTE


def encode_method(channel: int, method: Any) -> bytes:
    """Frame a pamqp command object (used for the infrequent server methods)."""
    from pamqp import frame as pamqp_frame

    return pamqp_frame.marshal(method, channel)


_DELIVER_HEAD = struct.Struct(">HH")


def deliver_payload(
    consumer_tag: bytes, delivery_tag: int, redelivered: bool, exchange: bytes, routing_key: bytes
) -> bytes:
    """basic.deliver fields; tag/exchange/key arrive pre-encoded as shortstr bytes (length included)."""
    return b"".join(
        (
            b"\x00\x3c\x00\x3c",
            consumer_tag,
            _S64.pack(delivery_tag),
            b"\x01" if redelivered else b"\x00",
            exchange,
            routing_key,
        )
    )


def get_ok_payload(
    delivery_tag: int, redelivered: bool, exchange: bytes, routing_key: bytes, message_count: int
) -> bytes:
    return b"".join(
        (
            b"\x00\x3c\x00\x47",
            _S64.pack(delivery_tag),
            b"\x01" if redelivered else b"\x00",
            exchange,
            routing_key,
            _S32.pack(message_count),
        )
    )


def return_payload(reply_code: int, reply_text: str, exchange: bytes, routing_key: bytes) -> bytes:
    return b"".join((b"\x00\x3c\x00\x32", _S16.pack(reply_code), shortstr(reply_text), exchange, routing_key))


def confirm_payload(ack: bool, delivery_tag: int, multiple: bool, requeue: bool = False) -> bytes:
    if ack:
        return b"\x00\x3c\x00\x50" + _S64.pack(delivery_tag) + (b"\x01" if multiple else b"\x00")
    flags = (1 if multiple else 0) | (2 if requeue else 0)
    return b"\x00\x3c\x00\x78" + _S64.pack(delivery_tag) + bytes((flags,))


def close_payload(
    class_id: int, reply_code: int, reply_text: str, failed_class: int, failed_method: int
) -> bytes:
    """connection.close (class 10) or channel.close (class 20)."""
    return b"".join(
        (
            _CM.pack(class_id, 50 if class_id == 10 else 40),
            _S16.pack(reply_code),
            shortstr(reply_text),
            _CM.pack(failed_class, failed_method),
        )
    )


def simple_payload(class_id: int, method_id: int, fields: bytes = b"") -> bytes:
    return _CM.pack(class_id, method_id) + fields
