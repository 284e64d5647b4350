"""Payloads of the server's synchronous replies (declare-ok, consume-ok...) and of the connection's
own notices (blocked, unblocked); `broker.protocol.methods` frames them.

Hand-packed rather than built with pamqp command objects because pamqp validates names against
the spec's strict pattern, while RabbitMQ (and so hashbroker) accepts any UTF-8 name.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from broker.protocol.methods import shortstr, simple_payload

_U32 = struct.Struct(">I")


def _fixed(class_id: int, method_id: int, fields: bytes = b"") -> Callable[[], bytes]:
    """A reply without variable fields: its payload, packed once."""
    payload = simple_payload(class_id, method_id, fields)

    def reply() -> bytes:
        return payload

    return reply


connection_close_ok = _fixed(10, 51)
connection_unblocked = _fixed(10, 61)
connection_update_secret_ok = _fixed(10, 71)
channel_open_ok = _fixed(20, 11, b"\x00\x00\x00\x00")  # reserved longstr
exchange_declare_ok = _fixed(40, 11)
exchange_delete_ok = _fixed(40, 21)
exchange_bind_ok = _fixed(40, 31)
exchange_unbind_ok = _fixed(40, 51)
queue_bind_ok = _fixed(50, 21)
queue_unbind_ok = _fixed(50, 51)
basic_qos_ok = _fixed(60, 11)
basic_get_empty = _fixed(60, 72, b"\x00")  # reserved cluster-id shortstr
basic_recover_ok = _fixed(60, 111)
confirm_select_ok = _fixed(85, 11)
tx_select_ok = _fixed(90, 11)
tx_commit_ok = _fixed(90, 21)
tx_rollback_ok = _fixed(90, 31)
channel_close_ok = _fixed(20, 41)


def connection_blocked(reason: str) -> bytes:
    return simple_payload(10, 60, shortstr(reason))


def queue_declare_ok(name: str, messages: int, consumers: int) -> bytes:
    return simple_payload(50, 11, shortstr(name) + _U32.pack(messages) + _U32.pack(consumers))


def queue_purge_ok(count: int) -> bytes:
    return simple_payload(50, 31, _U32.pack(count))


def queue_delete_ok(count: int) -> bytes:
    return simple_payload(50, 41, _U32.pack(count))


def basic_consume_ok(tag: str) -> bytes:
    return simple_payload(60, 21, shortstr(tag))


def basic_cancel_ok(tag: str) -> bytes:
    return simple_payload(60, 31, shortstr(tag))


def basic_cancel(tag: str) -> bytes:
    """Server-initiated cancel (consumer_cancel_notify), nowait set."""
    return simple_payload(60, 30, shortstr(tag) + b"\x01")


def channel_flow_ok(active: bool) -> bytes:
    return simple_payload(20, 21, b"\x01" if active else b"\x00")
