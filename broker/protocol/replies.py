"""Payloads of the server's synchronous replies (declare-ok, consume-ok...) and of the connection's
own notices (blocked, unblocked); `broker.protocol.methods` frames them.

Hand-packed rather than built with pamqp command objects because pamqp validates names against
the spec's strict pattern, while RabbitMQ (and so hashbroker) accepts any UTF-8 name.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TypeVar

from broker.protocol.methods import shortstr, simple_payload

_U32 = struct.Struct(">I")
T = TypeVar("T")


def _fixed(class_id: int, method_id: int, fields: bytes = b"") -> Callable[[], bytes]:
    """A reply without variable fields: its payload, packed once."""
    payload = simple_payload(class_id, method_id, fields)

    def reply() -> bytes:
        return payload

    return reply


def _fixed_of(class_id: int, *method_ids: int) -> tuple[Callable[[], bytes], ...]:
    """The replies of one AMQP class that carry no fields, one per method id, in order."""
    return tuple(_fixed(class_id, method_id) for method_id in method_ids)


def _one_field(class_id: int, method_id: int, encode: Callable[[T], bytes]) -> Callable[[T], bytes]:
    """A reply with one field, `encode`d behind the (class, method) ids packed once."""
    head = simple_payload(class_id, method_id)

    def reply(value: T) -> bytes:
        return head + encode(value)

    return reply


def _bit(value: bool) -> bytes:
    return b"\x01" if value else b"\x00"


connection_close_ok, connection_unblocked, connection_update_secret_ok = _fixed_of(10, 51, 61, 71)
channel_open_ok = _fixed(20, 11, b"\x00\x00\x00\x00")  # reserved longstr
channel_close_ok = _fixed(20, 41)
exchange_declare_ok, exchange_delete_ok, exchange_bind_ok, exchange_unbind_ok = _fixed_of(40, 11, 21, 31, 51)
queue_bind_ok, queue_unbind_ok = _fixed_of(50, 21, 51)
basic_qos_ok, basic_recover_ok = _fixed_of(60, 11, 111)
basic_get_empty = _fixed(60, 72, b"\x00")  # reserved cluster-id shortstr
confirm_select_ok = _fixed(85, 11)
tx_select_ok, tx_commit_ok, tx_rollback_ok = _fixed_of(90, 11, 21, 31)

connection_blocked = _one_field(10, 60, shortstr)  # the reason
channel_flow_ok = _one_field(20, 21, _bit)  # active
queue_purge_ok = _one_field(50, 31, _U32.pack)  # the message count
queue_delete_ok = _one_field(50, 41, _U32.pack)  # the message count
basic_consume_ok = _one_field(60, 21, shortstr)  # the consumer tag
basic_cancel_ok = _one_field(60, 31, shortstr)  # the consumer tag


def queue_declare_ok(name: str, messages: int, consumers: int) -> bytes:
    return simple_payload(50, 11, shortstr(name) + _U32.pack(messages) + _U32.pack(consumers))


def basic_cancel(tag: str) -> bytes:
    """Server-initiated cancel (consumer_cancel_notify), nowait set."""
    return simple_payload(60, 30, shortstr(tag) + b"\x01")
