"""Typed client methods: one NamedTuple per AMQP method a client may send, and their decoder.

Handlers take these tuples (``cmd.queue``, ``cmd.nowait``) rather than dicts, so mypy checks every
field name. To mypy each class is a NamedTuple; at run time it is a lighter `Command` (see
`broker.protocol.command_type`). Field tables stay `FieldTable` (wire types kept: RabbitMQ
compares them typed). The `SPECS` table maps (class id, method id) to RabbitMQ's dotted name,
the field kinds and the tuple class; `decode_method` is the only decoder of method frames.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, NamedTuple

from amqpwire.errors import AmqpError, ReplyCode
from amqpwire.fields import FieldDecodeError, FieldTable
from broker.protocol.framing import FRAME_METHOD, ReaderCrash, erl_binary, frame_error

if TYPE_CHECKING:
    from typing import NamedTuple as Command
else:
    from broker.protocol.command_type import Command


class ConnectionStartOk(Command):
    """connection.start_ok (10, 11)."""

    client_properties: FieldTable
    mechanism: str
    response: bytes
    locale: str


class ConnectionSecureOk(Command):
    """connection.secure_ok (10, 21)."""

    response: bytes


class ConnectionTuneOk(Command):
    """connection.tune_ok (10, 31)."""

    channel_max: int
    frame_max: int
    heartbeat: int


class ConnectionOpen(Command):
    """connection.open (10, 40)."""

    virtual_host: str
    capabilities: str
    insist: bool


class ConnectionClose(Command):
    """connection.close (10, 50)."""

    reply_code: int
    reply_text: str
    class_id: int
    method_id: int


class ConnectionCloseOk(Command):
    """connection.close_ok (10, 51)."""


class ConnectionUpdateSecret(Command):
    """connection.update_secret (10, 70)."""

    new_secret: bytes
    reason: str


class ChannelOpen(Command):
    """channel.open (20, 10)."""

    out_of_band: str


class ChannelFlow(Command):
    """channel.flow (20, 20)."""

    active: bool


class ChannelFlowOk(Command):
    """channel.flow_ok (20, 21)."""

    active: bool


class ChannelClose(Command):
    """channel.close (20, 40)."""

    reply_code: int
    reply_text: str
    class_id: int
    method_id: int


class ChannelCloseOk(Command):
    """channel.close_ok (20, 41)."""


class ExchangeDeclare(Command):
    """exchange.declare (40, 10)."""

    ticket: int
    exchange: str
    type: str
    passive: bool
    durable: bool
    auto_delete: bool
    internal: bool
    nowait: bool
    arguments: FieldTable


class ExchangeDelete(Command):
    """exchange.delete (40, 20)."""

    ticket: int
    exchange: str
    if_unused: bool
    nowait: bool


class ExchangeBind(Command):
    """exchange.bind (40, 30)."""

    ticket: int
    destination: str
    source: str
    routing_key: str
    nowait: bool
    arguments: FieldTable


class ExchangeUnbind(Command):
    """exchange.unbind (40, 40)."""

    ticket: int
    destination: str
    source: str
    routing_key: str
    nowait: bool
    arguments: FieldTable


class QueueDeclare(Command):
    """queue.declare (50, 10)."""

    ticket: int
    queue: str
    passive: bool
    durable: bool
    exclusive: bool
    auto_delete: bool
    nowait: bool
    arguments: FieldTable


class QueueBind(Command):
    """queue.bind (50, 20)."""

    ticket: int
    queue: str
    exchange: str
    routing_key: str
    nowait: bool
    arguments: FieldTable


class QueuePurge(Command):
    """queue.purge (50, 30)."""

    ticket: int
    queue: str
    nowait: bool


class QueueDelete(Command):
    """queue.delete (50, 40)."""

    ticket: int
    queue: str
    if_unused: bool
    if_empty: bool
    nowait: bool


class QueueUnbind(Command):
    """queue.unbind (50, 50)."""

    ticket: int
    queue: str
    exchange: str
    routing_key: str
    arguments: FieldTable


class BasicQos(Command):
    """basic.qos (60, 10)."""

    prefetch_size: int
    prefetch_count: int
    global_: bool


class BasicConsume(Command):
    """basic.consume (60, 20)."""

    ticket: int
    queue: str
    consumer_tag: str
    no_local: bool
    no_ack: bool
    exclusive: bool
    nowait: bool
    arguments: FieldTable


class BasicCancel(Command):
    """basic.cancel (60, 30)."""

    consumer_tag: str
    nowait: bool


class BasicPublish(Command):
    """basic.publish (60, 40)."""

    ticket: int
    exchange: str
    routing_key: str
    mandatory: bool
    immediate: bool


class BasicGet(Command):
    """basic.get (60, 70)."""

    ticket: int
    queue: str
    no_ack: bool


class BasicAck(Command):
    """basic.ack (60, 80)."""

    delivery_tag: int
    multiple: bool


class BasicReject(Command):
    """basic.reject (60, 90)."""

    delivery_tag: int
    requeue: bool


class BasicRecoverAsync(Command):
    """basic.recover_async (60, 100)."""

    requeue: bool


class BasicRecover(Command):
    """basic.recover (60, 110)."""

    requeue: bool


class BasicNack(Command):
    """basic.nack (60, 120)."""

    delivery_tag: int
    multiple: bool
    requeue: bool


class ConfirmSelect(Command):
    """confirm.select (85, 10)."""

    nowait: bool


class TxSelect(Command):
    """tx.select (90, 10)."""


class TxCommit(Command):
    """tx.commit (90, 20)."""


class TxRollback(Command):
    """tx.rollback (90, 30)."""


class MethodSpec(NamedTuple):
    """How one client method decodes: its dotted name, field kinds and tuple class.

    Field kinds: s shortstr, S longstr, o octet, h short, l long, L longlong, b bit, t table.
    """

    name: str
    kinds: str
    cls: type[Any]


SPECS: dict[tuple[int, int], MethodSpec] = {
    (10, 11): MethodSpec("connection.start_ok", "tsSs", ConnectionStartOk),
    (10, 21): MethodSpec("connection.secure_ok", "S", ConnectionSecureOk),
    (10, 31): MethodSpec("connection.tune_ok", "hlh", ConnectionTuneOk),
    (10, 40): MethodSpec("connection.open", "ssb", ConnectionOpen),
    (10, 50): MethodSpec("connection.close", "hshh", ConnectionClose),
    (10, 51): MethodSpec("connection.close_ok", "", ConnectionCloseOk),
    (10, 70): MethodSpec("connection.update_secret", "Ss", ConnectionUpdateSecret),
    (20, 10): MethodSpec("channel.open", "s", ChannelOpen),
    (20, 20): MethodSpec("channel.flow", "b", ChannelFlow),
    (20, 21): MethodSpec("channel.flow_ok", "b", ChannelFlowOk),
    (20, 40): MethodSpec("channel.close", "hshh", ChannelClose),
    (20, 41): MethodSpec("channel.close_ok", "", ChannelCloseOk),
    (40, 10): MethodSpec("exchange.declare", "hssbbbbbt", ExchangeDeclare),
    (40, 20): MethodSpec("exchange.delete", "hsbb", ExchangeDelete),
    (40, 30): MethodSpec("exchange.bind", "hsssbt", ExchangeBind),
    (40, 40): MethodSpec("exchange.unbind", "hsssbt", ExchangeUnbind),
    (50, 10): MethodSpec("queue.declare", "hsbbbbbt", QueueDeclare),
    (50, 20): MethodSpec("queue.bind", "hsssbt", QueueBind),
    (50, 30): MethodSpec("queue.purge", "hsb", QueuePurge),
    (50, 40): MethodSpec("queue.delete", "hsbbb", QueueDelete),
    (50, 50): MethodSpec("queue.unbind", "hssst", QueueUnbind),
    (60, 10): MethodSpec("basic.qos", "lhb", BasicQos),
    (60, 20): MethodSpec("basic.consume", "hssbbbbt", BasicConsume),
    (60, 30): MethodSpec("basic.cancel", "sb", BasicCancel),
    (60, 40): MethodSpec("basic.publish", "hssbb", BasicPublish),
    (60, 70): MethodSpec("basic.get", "hsb", BasicGet),
    (60, 80): MethodSpec("basic.ack", "Lb", BasicAck),
    (60, 90): MethodSpec("basic.reject", "Lb", BasicReject),
    (60, 100): MethodSpec("basic.recover_async", "b", BasicRecoverAsync),
    (60, 110): MethodSpec("basic.recover", "b", BasicRecover),
    (60, 120): MethodSpec("basic.nack", "Lbb", BasicNack),
    (85, 10): MethodSpec("confirm.select", "b", ConfirmSelect),
    (90, 10): MethodSpec("tx.select", "", TxSelect),
    (90, 20): MethodSpec("tx.commit", "", TxCommit),
    (90, 30): MethodSpec("tx.rollback", "", TxRollback),
}

#: (class id, method id) of each command class: what an error close names.
IDS: dict[type[Any], tuple[int, int]] = {spec.cls: ids for ids, spec in SPECS.items()}

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
    spec = SPECS.get((class_id, method_id))
    if spec is not None:
        return spec.name
    return SERVER_ONLY.get((class_id, method_id))


def decode_method(payload: bytes) -> Any:
    """Decode a method frame payload into its typed tuple, failing as RabbitMQ does.

    Fewer than 4 octets is analyze_frame's `error` (501 unknown_frame); ids that RabbitMQ's framing
    module does not know crash its reader (`ReaderCrash`); a server-only method decodes there but no
    handler accepts it (503); fields that do not parse are a 501 "cannot decode".
    """
    if len(payload) < 4:
        raise frame_error(FRAME_METHOD, payload, "unknown_frame")
    class_id, method_id = _CM.unpack_from(payload, 0)
    spec = SPECS.get((class_id, method_id))
    if spec is None:
        if (class_id, method_id) in SERVER_ONLY:
            raise AmqpError(ReplyCode.COMMAND_INVALID, "unimplemented method", hard=True)
        raise ReaderCrash(f"unknown method id {{{class_id},{method_id}}}")
    try:
        values = _decode_fields(payload, 4, spec.kinds)
    except (IndexError, struct.error, FieldDecodeError, UnicodeDecodeError) as exc:
        raise AmqpError(ReplyCode.FRAME_ERROR, f"cannot decode {erl_binary(payload[4:])}") from exc
    return tuple.__new__(spec.cls, values)


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
