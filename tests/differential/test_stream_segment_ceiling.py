"""x-stream-max-segment-size-bytes above RabbitMQ 3.10.8's ceiling (3,000,000,000) is refused with
406 once the other arguments passed their checks: the same declares on RabbitMQ and hashbroker."""

from __future__ import annotations

import uuid
from typing import Any

import pika

from broker.embedded import BrokerThread

RABBIT = 5672
BIG = 3_000_000_001
CASES: list[tuple[str, dict[str, Any], bool]] = [
    ("at the ceiling", {"x-stream-max-segment-size-bytes": 3_000_000_000}, True),
    ("one above", {"x-stream-max-segment-size-bytes": BIG}, True),
    ("2^63-1", {"x-stream-max-segment-size-bytes": 2**63 - 1}, True),
    ("above, bad max-age first", {"x-stream-max-segment-size-bytes": BIG, "x-max-age": "1X"}, True),
    ("above, unsupported arg first", {"x-stream-max-segment-size-bytes": BIG, "x-message-ttl": 5}, True),
    (
        "above, negative length first",
        {"x-stream-max-segment-size-bytes": BIG, "x-max-length-bytes": -1},
        True,
    ),
    ("above, non-durable first", {"x-stream-max-segment-size-bytes": BIG}, False),
]


def _declares(port: int) -> dict[str, str]:
    out: dict[str, str] = {}
    prefix = f"hb-seg-{uuid.uuid4().hex[:6]}"
    for label, args, durable in CASES:
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
        try:
            ch = conn.channel()
            name = f"{prefix}-{len(out)}"
            try:
                ch.queue_declare(name, durable=durable, arguments={"x-queue-type": "stream", **args})
                out[label] = "ok"
                ch.queue_delete(name)
            except pika.exceptions.ChannelClosedByBroker as e:
                out[label] = f"{e.reply_code} {e.reply_text.replace(prefix, 'Q')}"
        finally:
            if conn.is_open:
                conn.close()
    return out


def test_segment_size_ceiling_same_on_both() -> None:
    rabbit = _declares(RABBIT)
    assert (
        rabbit["one above"]
        == "406 PRECONDITION_FAILED - Exceeded max value for x-stream-max-segment-size-bytes"
    )
    with BrokerThread(host="127.0.0.1", port=0) as b:
        ours = _declares(b.port)
    assert ours == rabbit
