"""The Spark bridge's driver-side pieces against a real hashbroker (no Spark needed): the sink's
topology is durable when its messages are persistent, `queue_counts` patterns search names as
RabbitMQ's `use_regex` does, and a wrong password is reported as such."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pamqp")

from broker.embedded import BrokerThread
from spark_bridge._amqp import AmqpAddress, AmqpConnection
from spark_bridge.counts import collect_queue_counts
from spark_bridge.errors import BrokerUnavailableError
from spark_bridge.options import Binding, SinkOptions
from spark_bridge.topology import declare_topology, passive_counts
from spark_bridge.wire import encode_properties


def test_durable_follows_the_delivery_mode_unless_given() -> None:
    assert SinkOptions.parse({"uri": "amqp://x"}).durable is True
    assert SinkOptions.parse({"uri": "amqp://x", "deliveryMode": "transient"}).durable is False
    assert SinkOptions.parse({"uri": "amqp://x", "deliveryMode": "1", "durable": "true"}).durable is True
    assert SinkOptions.parse({"uri": "amqp://x", "durable": "false"}).durable is False


def test_a_persistent_sinks_topology_and_messages_survive_a_restart(tmp_path: Path) -> None:
    bindings = '[{"queue": "orders.eu", "key": "eu"}]'
    options = SinkOptions.parse({"uri": "amqp://x", "exchange": "orders", "bindings": bindings})
    with (
        BrokerThread(port=0, data_dir=str(tmp_path)) as broker,
        AmqpConnection(AmqpAddress.parse(broker.url), connection_name="test") as conn,
    ):
        declare_topology(conn, "orders", "direct", {}, options.bindings, durable=options.durable)
        conn.select_confirms()
        flags, props = encode_properties(delivery_mode=options.delivery_mode)
        prefix = conn.encode_publish_prefix("orders")
        for n in range(10):
            conn.publish(prefix, b"eu", False, flags, props, f"row {n}".encode())
        conn.flush_and_wait(10)
    with BrokerThread(port=0, data_dir=str(tmp_path)) as broker:
        assert [c.messages_ready for c in passive_counts(broker.url, ["orders.eu"])] == [10]


@pytest.fixture
def managed() -> BrokerThread:
    with BrokerThread(port=0, management_port=0) as broker:
        yield broker


def test_queue_counts_patterns_search_like_use_regex(managed: BrokerThread) -> None:
    with AmqpConnection(AmqpAddress.parse(managed.url), connection_name="test") as conn:
        bindings = [Binding(q, q) for q in ("orders.eu", "orders.us", "audit.orders.log", "42")]
        declare_topology(conn, "", "direct", {}, bindings)
    url = f"http://127.0.0.1:{managed.broker.management.port}"
    names = [row[0] for row in collect_queue_counts(managed.url, r"^orders\.", management_url=url)]
    assert names == ["orders.eu", "orders.us"]
    unanchored = [row[0] for row in collect_queue_counts(managed.url, "orders", management_url=url)]
    assert unanchored == ["audit.orders.log", "orders.eu", "orders.us"]
    assert [row[0] for row in collect_queue_counts(managed.url, "^4", management_url=url)] == ["42"]


def test_a_wrong_password_says_access_refused(managed: BrokerThread) -> None:
    wrong = managed.url.replace("guest:guest", "guest:wrong")
    with pytest.raises(BrokerUnavailableError, match=r"access refused .*\(wrong user or password\?\).*403"):
        AmqpConnection(AmqpAddress.parse(wrong), connection_name="test").connect()
