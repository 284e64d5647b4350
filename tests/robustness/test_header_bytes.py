"""A header name or value that is not UTF-8 is just bytes to RabbitMQ: a message carrying one is
dead-lettered (rejected, pushed out of a max-length queue, over a quorum delivery limit, expired),
got from a quorum queue and shown by the management "get messages" exactly as any other, and no
connection that did nothing wrong is closed. Each path runs on hashbroker and on the live RabbitMQ;
the header bytes read back must be those sent.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from pamqp import commands as C

from broker.embedded import BrokerThread
from tests.robustness.header_bytes_support import Delivered, RawClient, table_entries, table_entry

POISON = table_entry(b"k\xff\xfe", b"v\xff") + table_entry(b"ok", b"\xc3\x28")
SENT = table_entries(POISON)
DECLARED: list[str] = []
DEATH_KEYS = [b"x-death", b"x-first-death-exchange", b"x-first-death-queue", b"x-first-death-reason"]


@pytest.fixture(scope="module")
def hashbroker() -> Iterator[BrokerThread]:
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        yield b


class Target:
    def __init__(self, port: int, management: str) -> None:
        self.port = port
        self.management = management

    def client(self) -> RawClient:
        c = RawClient(self.port)
        c.open_channel(1)
        return c


@pytest.fixture(params=["hashbroker", "rabbitmq"])
def target(request: pytest.FixtureRequest) -> Target:
    if request.param == "hashbroker":
        b = request.getfixturevalue("hashbroker")
        return Target(b.port, f"http://127.0.0.1:{b.broker.management.port}")
    url = request.getfixturevalue("rabbitmq_url")
    return Target(urlsplit(url).port or 5672, "http://127.0.0.1:15672")


def declare_pair(c: RawClient, arguments: dict[str, Any]) -> tuple[str, str]:
    """A queue dead-lettering to a second one through the default exchange."""
    q = "hdr-bytes-" + uuid.uuid4().hex[:8]
    dlq = q + "-dlq"
    c.call(1, C.Queue.Declare(queue=dlq), C.Queue.DeclareOk)
    args = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq, **arguments}
    c.call(
        1,
        C.Queue.Declare(queue=q, durable=args.get("x-queue-type") == "quorum", arguments=args),
        C.Queue.DeclareOk,
    )
    DECLARED.extend([q, dlq])
    return q, dlq


def wait_get(c: RawClient, queue: str, timeout: float = 5.0, *, no_ack: bool = True) -> Delivered:
    deadline = time.monotonic() + timeout
    while True:
        got = c.get(1, queue, no_ack=no_ack)
        if got is not None:
            return got
        assert time.monotonic() < deadline, f"nothing reached {queue}"
        time.sleep(0.05)


def assert_dead_lettered(got: Delivered) -> None:
    assert got.headers is not None
    entries = table_entries(got.headers)
    assert entries[:2] == SENT  # the sent entries, bytes intact, sorted before the x- ones
    assert [key for key, _t, _v in entries[2:]] == DEATH_KEYS


def consume_and_settle(
    t: Target, admin: RawClient, arguments: dict[str, Any], settle: Any
) -> list[RawClient]:
    """Publish the message, consume it on another connection, settle it with `settle` (a method
    taking `delivery_tag`) and expect it dead-lettered."""
    q, dlq = declare_pair(admin, arguments)
    publisher = t.client()
    publisher.publish(1, q, b"x", POISON)
    consumer = t.client()
    consumer.call(1, C.Basic.Consume(queue=q), C.Basic.ConsumeOk)
    delivered = consumer.next_delivery()
    assert table_entries(delivered.headers or b"")[:2] == SENT
    consumer.send(1, settle(delivery_tag=delivered.method.delivery_tag))
    assert_dead_lettered(wait_get(admin, dlq))
    return [publisher, consumer]


def reject_path(t: Target, admin: RawClient) -> list[RawClient]:
    return consume_and_settle(t, admin, {}, lambda delivery_tag: C.Basic.Reject(delivery_tag, requeue=False))


def overflow_path(t: Target, admin: RawClient) -> list[RawClient]:
    q, dlq = declare_pair(admin, {"x-max-length": 1})
    publisher = t.client()
    publisher.publish(1, q, b"x", POISON)
    publisher.call(1, C.Basic.Qos(), C.Basic.QosOk)  # the poison is queued before the next publish
    innocent = t.client()
    innocent.publish(1, q, b"y", None)
    assert_dead_lettered(wait_get(admin, dlq))
    return [publisher, innocent]


def quorum_get_path(t: Target, admin: RawClient) -> list[RawClient]:
    q, _dlq = declare_pair(admin, {"x-queue-type": "quorum"})
    publisher = t.client()
    publisher.publish(1, q, b"x", POISON)
    getter = t.client()
    got = wait_get(getter, q)
    assert got.headers is not None
    assert table_entries(got.headers)[:2] == SENT
    return [publisher, getter]


def delivery_limit_path(t: Target, admin: RawClient) -> list[RawClient]:
    return consume_and_settle(
        t,
        admin,
        {"x-queue-type": "quorum", "x-delivery-limit": 0},
        lambda delivery_tag: C.Basic.Nack(delivery_tag, requeue=True),
    )


def expiry_path(t: Target, admin: RawClient) -> list[RawClient]:
    q, dlq = declare_pair(admin, {"x-message-ttl": 50})
    publisher = t.client()
    publisher.publish(1, q, b"x", POISON)
    assert_dead_lettered(wait_get(admin, dlq))
    return [publisher]


PATHS: dict[str, Callable[[Target, RawClient], list[RawClient]]] = {
    "reject": reject_path,
    "overflow": overflow_path,
    "quorum-get": quorum_get_path,
    "delivery-limit": delivery_limit_path,
    "expiry": expiry_path,
}


@pytest.mark.parametrize("path", list(PATHS))
def test_non_utf8_header_harms_nobody(target: Target, path: str) -> None:
    admin = target.client()
    clients: list[RawClient] = []
    try:
        clients = PATHS[path](target, admin)
        for c in [admin, *clients]:
            assert c.alive(1), "a connection that did nothing wrong was closed"
    finally:
        delete_declared(admin)
        for c in [admin, *clients]:
            c.close()


def delete_declared(c: RawClient) -> None:
    while DECLARED:
        c.call(1, C.Queue.Delete(queue=DECLARED.pop()), C.Queue.DeleteOk)


def management_get(management: str, queue: str) -> tuple[int, Any]:
    request = urllib.request.Request(
        f"{management}/api/queues/{quote('/', safe='')}/{queue}/get",
        method="POST",
        data=json.dumps({"count": 1, "ackmode": "ack_requeue_true", "encoding": "auto"}).encode(),
        headers={
            "Authorization": "Basic " + base64.b64encode(b"guest:guest").decode(),
            "content-type": "application/json",
        },
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, json.loads(response.read())


def test_management_get_shows_non_utf8_names(target: Target) -> None:
    """The name is shown with U+FFFD for each byte that does not decode, as RabbitMQ shows it."""
    c = target.client()
    try:
        q = "hdr-bytes-mgmt-" + uuid.uuid4().hex[:8]
        c.call(1, C.Queue.Declare(queue=q), C.Queue.DeclareOk)
        DECLARED.append(q)
        c.publish(1, q, b"x", POISON)
        c.call(1, C.Basic.Qos(), C.Basic.QosOk)
        status, messages = management_get(target.management, q)
        assert status == 200
        assert list(messages[0]["properties"]["headers"]) == ["k\ufffd\ufffd", "ok"]
        assert c.alive(1)
        assert table_entries(wait_get(c, q).headers or b"") == SENT
    finally:
        delete_declared(c)
        c.close()


def test_restart_keeps_non_utf8_names(tmp_path: Path) -> None:
    """A persistent message with such a header, in a durable queue and dead-lettered to a durable
    one, comes back from a clean restart with the same bytes."""
    q = "hdr-bytes-restart"
    with BrokerThread(host="127.0.0.1", port=0, data_dir=str(tmp_path)) as b:
        c = Target(b.port, "").client()
        c.call(1, C.Queue.Declare(queue=q + "-dlq", durable=True), C.Queue.DeclareOk)
        arguments: Any = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": q + "-dlq"}
        c.call(1, C.Queue.Declare(queue=q, durable=True, arguments=arguments), C.Queue.DeclareOk)
        c.publish(1, q, b"dead", POISON, persistent=True)
        c.publish(1, q, b"kept", POISON, persistent=True)
        dead = wait_get(c, q, no_ack=False)
        c.send(1, C.Basic.Reject(delivery_tag=dead.method.delivery_tag, requeue=False))
        assert_dead_lettered(wait_get(c, q + "-dlq", no_ack=False))  # left unacked: back on close
        c.close()
    with BrokerThread(host="127.0.0.1", port=0, data_dir=str(tmp_path)) as b:
        c = Target(b.port, "").client()
        try:
            kept = wait_get(c, q)
            assert (kept.body, table_entries(kept.headers or b"")) == (b"kept", SENT)
            dead = wait_get(c, q + "-dlq")
            assert dead.body == b"dead"
            assert_dead_lettered(dead)
            assert c.alive(1)
        finally:
            c.close()
