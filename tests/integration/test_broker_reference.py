"""The seed topology through pika: 100,000 routing keys over x-consistent-hash with weights 1,1,2,2 must
give exactly the per-queue counts recorded from RabbitMQ 3.10.8."""

from __future__ import annotations

from typing import Any

import pika
import pytest

from broker.cli.demo import RABBITMQ_3_10_8_COUNTS, report


@pytest.mark.slow
def test_chx_weights_1_1_2_2_matches_reference(hashbroker: str, reference: dict[str, Any]) -> None:
    topo = reference["big"]["chx_weights_1_1_2_2"]
    conn = pika.BlockingConnection(pika.URLParameters(hashbroker))
    ch = conn.channel()
    ch.exchange_declare(topo["exchange"], topo["exchange_type"])
    order = [b["queue"] for b in topo["bindings_in_order"]]
    for name in order:
        ch.queue_declare(name)
    for b in topo["bindings_in_order"]:
        ch.queue_bind(b["queue"], topo["exchange"], b["binding_key"])
    for i in range(100_000):
        ch.basic_publish(topo["exchange"], str(i), b"")
    counts = {name: ch.queue_declare(name, passive=True).method.message_count for name in order}
    conn.close()
    assert counts == topo["per_queue_counts"]


def test_demo_constant_matches_reference(reference: dict[str, Any]) -> None:
    recorded = reference["big"]["chx_weights_1_1_2_2"]["counts_list_in_binding_order"]
    assert list(RABBITMQ_3_10_8_COUNTS.values()) == recorded
    text, same = report(dict(RABBITMQ_3_10_8_COUNTS))
    assert same and "IDENTICAL" in text
