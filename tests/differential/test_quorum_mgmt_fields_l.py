"""py-amqp (Celery's client) writes integers beyond 32 bits with the 'L' field tag. RabbitMQ 3.10.8
accepts it in method arguments (queue.declare x-message-ttl) and message headers; a classic queue
hands the headers on byte for byte (still 'L'), a quorum queue re-encodes them (x-delivery-count is
added) and a long is then written as 'l', the table sorted by key. Observed on both brokers by
recording the tag of every field py-amqp reads."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

amqp = pytest.importorskip("amqp")
import amqp.serialization as serialization  # noqa: E402

from broker.embedded import BrokerThread  # noqa: E402

BIG = 2**40


@pytest.fixture
def tags(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Tags of the field values py-amqp decodes, in order."""
    seen: list[str] = []
    orig = serialization._read_item

    def record(buf: Any, offset: int) -> Any:
        seen.append(chr(buf[offset]))
        return orig(buf, offset)

    monkeypatch.setattr(serialization, "_read_item", record)
    return seen


def observe(host: str, tags: list[str]) -> dict[str, Any]:
    conn = amqp.Connection(host=host, userid="guest", password="guest")
    conn.connect()
    out: dict[str, Any] = {}
    try:
        ch = conn.channel()
        for label, args in (("classic", {}), ("quorum", {"x-queue-type": "quorum"})):
            name = f"ltag-{label}-{time.monotonic_ns()}"
            ch.queue_declare(
                name, durable=True, auto_delete=False, arguments={**args, "x-message-ttl": 2**33}
            )
            headers = {"big": BIG, "neg": -BIG, "arr": [BIG]}
            ch.basic_publish(amqp.Message(b"x", application_headers=headers), routing_key=name)
            msg = None
            deadline = time.monotonic() + 5
            while msg is None and time.monotonic() < deadline:
                tags.clear()
                msg = ch.basic_get(name, no_ack=True)
            assert msg is not None
            out[label] = {"headers": list(msg.headers.items()), "tags": "".join(tags)}
            ch.queue_delete(name)
    finally:
        conn.close()
    return out


@pytest.fixture
def hb() -> Iterator[BrokerThread]:
    with BrokerThread(host="127.0.0.1", port=0) as b:
        yield b


def test_L_tag_on_hashbroker(hb: BrokerThread, tags: list[str]) -> None:
    got = observe(f"127.0.0.1:{hb.port}", tags)
    assert got["classic"] == {"headers": [("big", BIG), ("neg", -BIG), ("arr", [BIG])], "tags": "LLAL"}
    assert got["quorum"]["tags"] == "Allll"
    assert [k for k, _v in got["quorum"]["headers"]] == ["arr", "big", "neg", "x-delivery-count"]


@pytest.mark.live
def test_L_tag_matches_live_rabbitmq(hb: BrokerThread, tags: list[str], rabbitmq_url: str) -> None:
    from urllib.parse import urlparse

    parsed = urlparse(rabbitmq_url)
    expected = observe(f"{parsed.hostname}:{parsed.port or 5672}", tags)
    assert observe(f"127.0.0.1:{hb.port}", tags) == expected
