"""Payloads of the server's synchronous replies (declare-ok, consume-ok...) and of the connection's
own notices (blocked, unblocked); `broker.protocol.methods` frames them.

Hand-packed rather than built with pamqp command objects because pamqp validates names against
the spec's strict pattern, while RabbitMQ (and so hashbroker) accepts any UTF-8 name.
"""

from __future__ import annotations

import struct

from broker.protocol.methods import shortstr, simple_payload

_U32 = struct.Struct(">I")


def connection_close_ok() -> bytes:
    return simple_payload(10, 51)


def connection_blocked(reason: str) -> bytes:
    return simple_payload(10, 60, shortstr(reason))


def connection_unblocked() -> bytes:
    return simple_payload(10, 61)


def connection_update_secret_ok() -> bytes:
    return simple_payload(10, 71)


def channel_open_ok() -> bytes:
    return simple_payload(20, 11, b"\x00\x00\x00\x00")  # reserved longstr


def exchange_declare_ok() -> bytes:
    return simple_payload(40, 11)


def exchange_delete_ok() -> bytes:
    return simple_payload(40, 21)


def exchange_bind_ok() -> bytes:
    return simple_payload(40, 31)


def exchange_unbind_ok() -> bytes:
    return simple_payload(40, 51)


def queue_declare_ok(name: str, messages: int, consumers: int) -> bytes:
    return simple_payload(50, 11, shortstr(name) + _U32.pack(messages) + _U32.pack(consumers))


def queue_bind_ok() -> bytes:
    return simple_payload(50, 21)


def queue_purge_ok(count: int) -> bytes:
    return simple_payload(50, 31, _U32.pack(count))


def queue_delete_ok(count: int) -> bytes:
    return simple_payload(50, 41, _U32.pack(count))


def queue_unbind_ok() -> bytes:
    return simple_payload(50, 51)


def basic_qos_ok() -> bytes:
    return simple_payload(60, 11)


def basic_consume_ok(tag: str) -> bytes:
    return simple_payload(60, 21, shortstr(tag))


def basic_cancel_ok(tag: str) -> bytes:
    return simple_payload(60, 31, shortstr(tag))


def basic_cancel(tag: str) -> bytes:
    """Server-initiated cancel (consumer_cancel_notify), nowait set."""
    return simple_payload(60, 30, shortstr(tag) + b"\x01")


def basic_get_empty() -> bytes:
    return simple_payload(60, 72, b"\x00")  # reserved cluster-id shortstr


def basic_recover_ok() -> bytes:
    return simple_payload(60, 111)


def confirm_select_ok() -> bytes:
    return simple_payload(85, 11)


def tx_select_ok() -> bytes:
    return simple_payload(90, 11)


def tx_commit_ok() -> bytes:
    return simple_payload(90, 21)


def tx_rollback_ok() -> bytes:
    return simple_payload(90, 31)


def channel_flow_ok(active: bool) -> bytes:
    return simple_payload(20, 21, b"\x01" if active else b"\x00")


def channel_close_ok() -> bytes:
    return simple_payload(20, 41)
