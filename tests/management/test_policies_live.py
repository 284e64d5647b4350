"""Policies applied for real, through the management API (`hashbroker ctl set_policy`)."""

from __future__ import annotations

import pika

from broker.embedded import BrokerThread


def test_policy_applies_to_existing_and_new_queues_and_exchanges() -> None:
    with BrokerThread(port=0) as bt:
        conn = pika.BlockingConnection(pika.URLParameters(bt.url))
        ch = conn.channel()
        ch.queue_declare("pol.a")
        policies = bt.broker.policies
        bt.call(policies.set, "low", "^pol[.]", {"max-length": 5}, 0, "queues")
        bt.call(policies.set, "high", "^pol[.]a", {"max-length": 2, "message-ttl": 60000}, 10, "queues")
        ch.queue_declare("pol.b", arguments={"x-max-length": 3})
        for n in range(10):
            ch.basic_publish("", "pol.a", str(n).encode())
            ch.basic_publish("", "pol.b", str(n).encode())
        assert ch.queue_declare("pol.a", passive=True).method.message_count == 2  # highest priority wins
        assert ch.queue_declare("pol.b", passive=True).method.message_count == 3  # min(policy 5, arg 3)
        # alternate-exchange from a policy, for an exchange declared before the policy
        ch.exchange_declare("pol.x", "direct")
        ch.queue_declare("pol.ae.q")
        ch.queue_bind("pol.ae.q", "amq.fanout")
        bt.call(policies.set, "ae", "^pol[.]x$", {"alternate-exchange": "amq.fanout"}, 0, "exchanges")
        ch.basic_publish("pol.x", "nowhere", b"ae")
        assert ch.queue_declare("pol.ae.q", passive=True).method.message_count == 1
        bt.call(policies.clear, "ae")
        ch.basic_publish("pol.x", "nowhere", b"ae")
        assert ch.queue_declare("pol.ae.q", passive=True).method.message_count == 1
        conn.close()


def test_management_store_is_the_broker_engine() -> None:
    with BrokerThread(port=0, management_port=0) as bt:
        api_obj = bt.broker.management
        assert api_obj is not None
        assert bt.broker.policies.applied is True
        # the management API stores and reads policies through the broker's engine, no copy of its own
        assert api_obj.api.policies is bt.broker.policies
