"""The firehose traces a management publish as RabbitMQ 3.10.8 does (observed there): through the
direct connection the management plugin publishes on, named by its process id (`<node.N.M.K>`), on
channel 1, as the HTTP user."""

from __future__ import annotations

import re
import time

import pika

from broker.embedded import BrokerThread
from tests.management_support import call, mgmt_base


def test_a_management_publish_is_traced() -> None:
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        base = mgmt_base(b)
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        ch = conn.channel()
        ch.queue_declare("traced", exclusive=True)
        ch.queue_bind("traced", "amq.rabbitmq.trace", "publish.#")
        ch.queue_declare("target")
        assert call(base, "PUT", "/api/vhosts/%2F", body={"tracing": True})[0] == 204
        msg = {"routing_key": "target", "payload": "x", "payload_encoding": "string", "properties": {}}
        assert call(base, "POST", "/api/exchanges/%2F/amq.default/publish", body=msg) == (
            200,
            {"routed": True},
        )
        deadline = time.monotonic() + 5
        while (got := ch.basic_get("traced", auto_ack=True))[0] is None:
            assert time.monotonic() < deadline, "no trace of the management publish"
            time.sleep(0.02)
        method, props, body = got
        headers = {k: v for k, v in props.headers.items() if k != "properties"}
        assert re.fullmatch(r"<rabbit@localhost\.\d+\.\d+\.\d+>", headers.pop("connection"))
        assert (method.routing_key, body) == ("publish.", b"x")
        assert headers == {
            "exchange_name": "",
            "routing_keys": ["target"],
            "node": "rabbit@localhost",
            "vhost": "/",
            "channel": 1,
            "user": "guest",
            "routed_queues": ["target"],
        }
        conn.close()
