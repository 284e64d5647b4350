"""Every path into queues that persists, across a clean restart (data_dir store).

A persistent message that reaches a durable queue is kept whichever way it got there: basic.publish
(the default exchange, a fan-out with exchange-to-exchange and alternate-exchange routes, CC/BCC
copies stored without their BCC), a transaction's commit (routed when published, kept only once
committed), dead-lettering (expiry, reject, drop-head overflow, a reject-publish-dlx refusal, and a
quorum queue's at-least-once forwarding) and a management publish. Transient messages, and
persistent ones in transient queues, are not.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pika
import pytest

from broker.embedded import BrokerThread
from tests.management_support import call, mgmt_base, take_all
from tests.management_support import confirming_channel as channel

PERSISTENT = pika.BasicProperties(delivery_mode=2)


def bodies(ch: Any, queue: str) -> list[bytes]:
    return [body for body, _headers in take_all(ch, queue)]


def wait_for(ch: Any, queue: str, n: int) -> None:
    deadline = time.monotonic() + 5
    while ch.queue_declare(queue, passive=True).method.message_count < n:
        assert time.monotonic() < deadline, f"{queue} never held {n}"
        time.sleep(0.02)


def basic_publish(b: BrokerThread, ch: Any) -> Callable[[Any], None]:
    ch.exchange_declare("fan", "fanout", durable=True)
    ch.exchange_declare("inner", "direct", durable=True)
    ch.exchange_declare("ae", "fanout", durable=True)
    ch.exchange_declare("with-ae", "direct", durable=True, arguments={"alternate-exchange": "ae"})
    for q in ("d1", "d2", "d3", "cc", "bcc", "lost"):
        ch.queue_declare(q, durable=True)
    ch.queue_declare("transient", durable=False)
    ch.queue_bind("d1", "fan")
    ch.queue_bind("transient", "fan")
    ch.exchange_bind("inner", "fan")  # exchange-to-exchange
    ch.queue_bind("d2", "inner", "k")
    ch.queue_bind("d3", "ae")
    ch.basic_publish("", "d1", b"default", PERSISTENT)
    ch.basic_publish("", "d1", b"transient message")
    ch.basic_publish("fan", "k", b"fanned", PERSISTENT)
    ch.basic_publish("with-ae", "unbound", b"alternate", PERSISTENT)
    ch.exchange_declare("cc-x", "direct", durable=True)
    ch.queue_bind("cc", "cc-x", "cc")
    ch.queue_bind("bcc", "cc-x", "bcc")
    ch.queue_bind("lost", "cc-x", "main")
    headers = {"CC": ["cc"], "BCC": ["bcc"]}
    ch.basic_publish("cc-x", "main", b"copied", pika.BasicProperties(delivery_mode=2, headers=headers))

    def after(ch: Any) -> None:
        assert bodies(ch, "d1") == [b"default", b"fanned"]
        assert bodies(ch, "d2") == [b"fanned"]
        assert bodies(ch, "d3") == [b"alternate"]
        for q in ("cc", "bcc", "lost"):
            got = take_all(ch, q)
            assert [body for body, _h in got] == [b"copied"]
            assert got[0][1] == {"CC": ["cc"]}  # stored as delivered: without its BCC
        with pytest.raises(pika.exceptions.ChannelClosedByBroker):
            ch.queue_declare("transient", passive=True)

    return after


def tx_commit(b: BrokerThread, ch: Any) -> Callable[[Any], None]:
    ch.exchange_declare("tx-fan", "fanout", durable=True)
    ch.queue_declare("first", durable=True)
    ch.queue_declare("second", durable=True)
    ch.queue_bind("first", "tx-fan")
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    tx = conn.channel()
    tx.tx_select()
    tx.basic_publish("tx-fan", "", b"committed", PERSISTENT)
    ch.queue_unbind("first", "tx-fan")  # routed when published: the commit still reaches `first`
    ch.queue_bind("second", "tx-fan")
    tx.tx_commit()
    tx.basic_publish("tx-fan", "", b"rolled back", PERSISTENT)
    tx.tx_rollback()
    tx.basic_publish("", "second", b"never committed", PERSISTENT)
    conn.close()  # an open transaction is dropped with its channel

    def after(ch: Any) -> None:
        assert bodies(ch, "first") == [b"committed"]
        assert bodies(ch, "second") == []

    return after


def classic_dead_letters(b: BrokerThread, ch: Any) -> Callable[[Any], None]:
    ch.exchange_declare("dlx", "direct", durable=True)
    ch.queue_declare("dlq", durable=True)
    ch.queue_bind("dlq", "dlx", "dl")
    dead = {"x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "dl"}
    ch.queue_declare("ttl", durable=True, arguments={**dead, "x-message-ttl": 0})
    ch.queue_declare("capped", durable=True, arguments={**dead, "x-max-length": 1})
    ch.queue_declare(
        "refusing", durable=True, arguments={**dead, "x-max-length": 1, "x-overflow": "reject-publish-dlx"}
    )
    ch.queue_declare("src", durable=True, arguments=dead)
    ch.basic_publish("", "ttl", b"expired", PERSISTENT)
    ch.basic_publish("", "capped", b"dropped", PERSISTENT)
    ch.basic_publish("", "capped", b"kept", PERSISTENT)
    ch.basic_publish("", "refusing", b"accepted", PERSISTENT)
    with pytest.raises(pika.exceptions.NackError):
        ch.basic_publish("", "refusing", b"refused", PERSISTENT)
    ch.basic_publish("", "src", b"rejected", PERSISTENT)
    method, _props, _body = ch.basic_get("src")
    ch.basic_reject(method.delivery_tag, requeue=False)
    wait_for(ch, "dlq", 4)

    def after(ch: Any) -> None:
        got = {body: headers["x-death"][0]["reason"] for body, headers in take_all(ch, "dlq")}
        assert got == {
            b"expired": "expired",
            b"dropped": "maxlen",
            b"refused": "maxlen",
            b"rejected": "rejected",
        }
        assert bodies(ch, "capped") == [b"kept"] and bodies(ch, "refusing") == [b"accepted"]

    return after


def quorum_dead_letters(b: BrokerThread, ch: Any) -> Callable[[Any], None]:
    ch.exchange_declare("qdlx", "direct", durable=True)
    ch.queue_declare("qdlq", durable=True)
    ch.queue_bind("qdlq", "qdlx", "qq")
    args = {
        "x-queue-type": "quorum",
        "x-dead-letter-exchange": "qdlx",
        "x-dead-letter-strategy": "at-least-once",
        "x-overflow": "reject-publish",
    }
    ch.queue_declare("qq", durable=True, arguments=args)
    ch.basic_publish("", "qq", b"forwarded", PERSISTENT)
    ch.basic_publish("", "qq", b"stays", PERSISTENT)
    method, _props, body = ch.basic_get("qq")
    assert body == b"forwarded"
    ch.basic_reject(method.delivery_tag, requeue=False)
    wait_for(ch, "qdlq", 1)

    def after(ch: Any) -> None:
        got = take_all(ch, "qdlq")
        assert [(body, h["x-death"][0]["reason"]) for body, h in got] == [(b"forwarded", "rejected")]
        assert bodies(ch, "qq") == [b"stays"]

    return after


def management_publish(b: BrokerThread, ch: Any) -> Callable[[Any], None]:
    ch.queue_declare("via-http", durable=True)
    base = mgmt_base(b)
    for payload, mode in (("kept", 2), ("transient", 1)):
        msg = {
            "routing_key": "via-http",
            "payload": payload,
            "payload_encoding": "string",
            "properties": {"delivery_mode": mode},
        }
        assert call(base, "POST", "/api/exchanges/%2F/amq.default/publish", body=msg) == (
            200,
            {"routed": True},
        )

    def after(ch: Any) -> None:
        assert bodies(ch, "via-http") == [b"kept"]

    return after


@pytest.mark.parametrize(
    "path", [basic_publish, tx_commit, classic_dead_letters, quorum_dead_letters, management_publish]
)
def test_a_persistent_message_in_a_durable_queue_survives_a_restart(
    tmp_path: Path, path: Callable[[BrokerThread, Any], Callable[[Any], None]]
) -> None:
    data = tmp_path / "data"
    with channel(data) as (b, ch):
        after = path(b, ch)
    with channel(data) as (_b, ch):
        after(ch)
