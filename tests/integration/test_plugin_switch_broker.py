"""A broker with a plugin disabled answers as RabbitMQ 3.10.8 without that plugin.

Its exchange type is unknown: 503 COMMAND_INVALID closing the connection, with the text RabbitMQ
gives any type no enabled plugin registers (observed on the live node). rabbitmq_prometheus is off
by default (no metrics listener); enabled, /metrics answers on its port.
"""

from __future__ import annotations

import urllib.request

import pika
import pytest
from pika.exceptions import ConnectionClosedByBroker

from broker.embedded import BrokerThread


@pytest.mark.parametrize(
    ("type_name", "plugin"),
    [("x-modulus-hash", "rabbitmq_sharding"), ("x-consistent-hash", "rabbitmq_consistent_hash_exchange")],
)
def test_a_disabled_plugins_exchange_type_is_unknown(type_name: str, plugin: str) -> None:
    with BrokerThread(host="127.0.0.1", port=0, plugins=["rabbitmq_management"]) as b:
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        with pytest.raises(ConnectionClosedByBroker) as err:
            conn.channel().exchange_declare("x", type_name)
        assert (err.value.reply_code, err.value.reply_text) == (
            503,
            f"COMMAND_INVALID - unknown exchange type '{type_name}'",
        )
    with BrokerThread(host="127.0.0.1", port=0, plugins=[plugin]) as b:
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        conn.channel().exchange_declare("x", type_name)
        conn.close()


def test_prometheus_only_when_enabled() -> None:
    with BrokerThread(host="127.0.0.1", port=0, prometheus_port=0) as b:
        assert b.broker.prometheus is None  # off by default: no 15692 listener
    with BrokerThread(host="127.0.0.1", port=0, prometheus_port=0, plugins=["rabbitmq_prometheus"]) as b:
        port = b.broker.prometheus.port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            assert b"# TYPE rabbitmq_queues gauge" in resp.read()
