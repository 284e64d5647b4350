"""Property tests: any header table a client may send (names of arbitrary bytes, values of every
field type, nested tables and arrays, duplicates) goes through publish, delivery, reject to a
dead-letter queue, expiry, basic.get on classic and quorum queues and the management "get messages"
without closing any connection, and comes back with its bytes intact (dead-lettering adds the
x-death entries and sorts the table by name bytes, as rabbit_misc:set_table_value does).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pamqp import commands as C

from broker.embedded import BrokerThread
from tests.robustness.header_bytes_support import RawClient, table_entries
from tests.robustness.test_header_bytes import DEATH_KEYS, Target, management_get, wait_get

# Values are written in the canonical form the broker writes back (booleans as 0/1, longs as 'l'),
# so equal bytes mean "intact". NaN and infinities are left out: RabbitMQ refuses them at publish.
_FIXED = {b"b": ">b", b"B": ">B", b"s": ">h", b"u": ">H", b"I": ">i", b"i": ">I", b"l": ">q", b"T": ">Q"}


def _fixed(tag: bytes, fmt: str) -> st.SearchStrategy[bytes]:
    size = struct.calcsize(fmt)
    lo, hi = (
        (0, 2 ** (8 * size) - 1) if fmt[1].isupper() else (-(2 ** (8 * size - 1)), 2 ** (8 * size - 1) - 1)
    )
    return st.integers(lo, hi).map(lambda n: tag + struct.pack(fmt, n))


def _sized(tag: bytes, body: bytes) -> bytes:
    return tag + struct.pack(">I", len(body)) + body


names = st.binary(min_size=0, max_size=20).filter(
    lambda k: not k.startswith(b"x-") and k not in (b"CC", b"BCC")
)
scalars = st.one_of(
    *(_fixed(tag, fmt) for tag, fmt in _FIXED.items()),
    st.binary(max_size=30).map(lambda b: _sized(b"S", b)),
    st.binary(max_size=30).map(lambda b: _sized(b"x", b)),
    st.booleans().map(lambda v: b"t" + bytes([v])),
    st.tuples(st.integers(0, 255), st.integers(0, 2**32 - 1)).map(lambda d: b"D" + struct.pack(">BI", *d)),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(lambda f: b"f" + struct.pack(">f", f)),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda f: b"d" + struct.pack(">d", f)),
    st.just(b"V"),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(st.tuples(names, inner), max_size=4).map(
            lambda es: _sized(b"F", b"".join(bytes([len(k)]) + k + v for k, v in es))
        ),
        st.lists(inner, max_size=4).map(lambda vs: _sized(b"A", b"".join(vs))),
    ),
    max_leaves=12,
)
tables = st.lists(st.tuples(names, values), min_size=1, max_size=6).map(
    lambda es: b"".join(bytes([len(k)]) + k + v for k, v in es)
)

PROPERTY_SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def broker() -> Iterator[Target]:
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        yield Target(b.port, f"http://127.0.0.1:{b.broker.management.port}")


@pytest.fixture(scope="module")
def clients(broker: Target) -> Iterator[tuple[RawClient, RawClient]]:
    """A publisher (the only one sending odd headers) and a bystander that gets, rejects and reads."""
    publisher, bystander = broker.client(), broker.client()
    yield publisher, bystander
    publisher.close()
    bystander.close()


def _dead_lettered(sent: bytes) -> list[tuple[bytes, bytes, bytes]]:
    """The entries expected after dead-lettering, without the x-death ones' values."""
    return sorted(table_entries(sent), key=lambda e: e[0])


def _check_dead_letter(got_headers: bytes | None, sent: bytes) -> None:
    assert got_headers is not None
    entries = table_entries(got_headers)
    kept = [e for e in entries if e[0] not in DEATH_KEYS]
    assert kept == _dead_lettered(sent)
    assert sorted(e[0] for e in entries if e[0] in DEATH_KEYS) == DEATH_KEYS


def _declare(c: RawClient, **arguments: Any) -> tuple[str, str]:
    q = "hdr-prop-" + uuid.uuid4().hex[:8]
    c.call(1, C.Queue.Declare(queue=q + "-dlq", auto_delete=False), C.Queue.DeclareOk)
    args = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": q + "-dlq", **arguments}
    c.call(
        1,
        C.Queue.Declare(queue=q, durable=args.get("x-queue-type") == "quorum", arguments=args),
        C.Queue.DeclareOk,
    )
    return q, q + "-dlq"


def _delete(c: RawClient, *queues: str) -> None:
    for q in queues:
        c.call(1, C.Queue.Delete(queue=q), C.Queue.DeleteOk)


def _all_alive(*cs: RawClient) -> None:
    for c in cs:
        assert c.alive(1), "a connection was closed"


@PROPERTY_SETTINGS
@given(headers=tables)
def test_get_reject_and_management(
    broker: Target, clients: tuple[RawClient, RawClient], headers: bytes
) -> None:
    publisher, bystander = clients
    q, dlq = _declare(bystander)
    try:
        publisher.publish(1, q, b"body", headers)
        _all_alive(publisher)
        status, shown = management_get(broker.management, q)
        assert status == 200 and len(shown) == 1
        got = wait_get(bystander, q, no_ack=False)  # the management get requeued it
        assert got.headers == headers
        bystander.send(1, C.Basic.Reject(delivery_tag=got.method.delivery_tag, requeue=False))
        _check_dead_letter(wait_get(bystander, dlq).headers, headers)
        _all_alive(publisher, bystander)
    finally:
        _delete(bystander, q, dlq)


@PROPERTY_SETTINGS
@given(headers=tables)
def test_expiry_and_overflow(clients: tuple[RawClient, RawClient], headers: bytes) -> None:
    publisher, bystander = clients
    q, dlq = _declare(bystander, **{"x-message-ttl": 20})
    full, full_dlq = _declare(bystander, **{"x-max-length": 1})
    try:
        publisher.publish(1, q, b"body", headers)
        publisher.publish(1, full, b"body", headers)
        _all_alive(publisher)
        bystander.publish(1, full, b"push", None)  # pushes the odd message out of the full queue
        _check_dead_letter(wait_get(bystander, dlq).headers, headers)
        _check_dead_letter(wait_get(bystander, full_dlq).headers, headers)
        _all_alive(publisher, bystander)
    finally:
        _delete(bystander, q, dlq, full, full_dlq)


@PROPERTY_SETTINGS
@given(headers=tables)
def test_quorum_get_and_delivery_limit(clients: tuple[RawClient, RawClient], headers: bytes) -> None:
    publisher, bystander = clients
    q, dlq = _declare(bystander, **{"x-queue-type": "quorum", "x-delivery-limit": 0})
    try:
        publisher.publish(1, q, b"body", headers)
        _all_alive(publisher)
        got = wait_get(bystander, q, no_ack=False)
        entries = table_entries(got.headers or b"")
        assert [e for e in entries if e[0] != b"x-delivery-count"] == sorted(
            table_entries(headers), key=lambda e: e[0]
        )
        bystander.send(1, C.Basic.Nack(delivery_tag=got.method.delivery_tag, requeue=True))
        dead = wait_get(bystander, dlq)
        assert dead.headers is not None
        kept = [e for e in table_entries(dead.headers) if e[0] not in DEATH_KEYS]
        assert kept == sorted(table_entries(headers), key=lambda e: e[0])
        _all_alive(publisher, bystander)
    finally:
        _delete(bystander, q, dlq)
