"""A transactional publish to an x-delayed-message exchange is held when it is published.

rabbit_channel routes a publish when it is published and delivers it at tx.commit; the plugin takes
the delay inside the exchange type's route/2. So the message is held, and released when due, even
if the transaction is rolled back; a mandatory one is returned at commit (routed to no queue)."""

from __future__ import annotations

import time

import pika

from broker.embedded import BrokerThread


def test_held_at_publish_in_a_transaction() -> None:
    with BrokerThread(host="127.0.0.1", port=0) as b:
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        ch = conn.channel()
        ch.exchange_declare("dx", "x-delayed-message", arguments={"x-delayed-type": "direct"})
        ch.queue_declare("dq")
        ch.queue_bind("dq", "dx", "k")
        returned: list[bytes] = []
        ch.add_on_return_callback(lambda _ch, _m, _p, body: returned.append(body))
        ch.tx_select()
        ch.basic_publish("dx", "k", b"rolled back", pika.BasicProperties(headers={"x-delay": 200}))
        ch.tx_rollback()
        ch.basic_publish(
            "dx", "k", b"committed", pika.BasicProperties(headers={"x-delay": 200}), mandatory=True
        )
        assert ch.queue_declare("dq", passive=True).method.message_count == 0  # (the publishes are in)
        assert b.call(b.broker.policies.delayed_count) == 2  # both held already
        ch.tx_commit()
        conn.process_data_events(0.1)
        assert returned == [b"committed"]
        assert ch.queue_declare("dq", passive=True).method.message_count == 0
        time.sleep(0.4)
        got = sorted(ch.basic_get("dq", auto_ack=True)[2] for _ in range(2))
        assert got == [b"committed", b"rolled back"]
        conn.close()
