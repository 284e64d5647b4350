"""pika clients (BlockingConnection and SelectConnection) run the seed README's consistent-hash
examples against hashbroker: 100,000 messages each, per-queue counts equal RabbitMQ 3.10.8's."""

from __future__ import annotations

import threading
from typing import Any

import pika
import pytest

from tests.differential_support import (
    CLIENT_MESSAGES,
    README_EXAMPLES,
    README_QUEUES,
    check_readme_counts,
    declare_readme_topology,
    hashbroker_url,
    messages_for,
    readme_publish_args,
    url_params,
)

pytestmark = [pytest.mark.slow]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("example", list(README_EXAMPLES))
def test_pika_blocking_readme_example(example: str, request: pytest.FixtureRequest) -> None:
    """The README's Python examples, as written (BlockingConnection, no confirms)."""
    url = hashbroker_url(request)
    spec = README_EXAMPLES[example]
    conn = pika.BlockingConnection(url_params(url))
    try:
        ch = conn.channel()
        declare_readme_topology(ch, spec["exchange"], spec["arguments"], README_QUEUES)
        for i in range(CLIENT_MESSAGES):
            rk, props = readme_publish_args(example, i)
            properties = pika.BasicProperties(**props) if props else None
            ch.basic_publish(spec["exchange"], rk, b"", properties)
    finally:
        conn.close()
    check_readme_counts(request, url, example)


def _select_publish(url: str, example: str, n: int) -> None:
    """Publish with pika's SelectConnection (callback style) in batches that yield to the ioloop."""
    spec = README_EXAMPLES[example]
    done = threading.Event()
    errors: list[Any] = []
    state: dict[str, Any] = {"i": 0}

    def on_open(conn: pika.SelectConnection) -> None:
        conn.channel(on_open_callback=on_channel)

    def on_channel(ch: Any) -> None:
        state["ch"] = ch
        ch.exchange_declare(
            spec["exchange"],
            "x-consistent-hash",
            durable=True,
            arguments=spec["arguments"] or None,
            callback=lambda _f: declare_queue(0),
        )

    def declare_queue(k: int) -> None:
        ch = state["ch"]
        if k == len(README_QUEUES):
            publish_batch()
            return
        q = README_QUEUES[k]
        weight = ["1", "1", "2", "2"][k]
        ch.queue_declare(
            q,
            durable=True,
            callback=lambda _f: ch.queue_purge(
                q,
                callback=lambda _f: ch.queue_bind(
                    q, spec["exchange"], weight, callback=lambda _f: declare_queue(k + 1)
                ),
            ),
        )

    def publish_batch() -> None:
        ch = state["ch"]
        start = state["i"]
        stop = min(n, start + 2000)
        for i in range(start, stop):
            rk, props = readme_publish_args(example, i)
            ch.basic_publish(spec["exchange"], rk, b"", pika.BasicProperties(**props) if props else None)
        state["i"] = stop
        conn = state["conn"]
        if stop < n:
            conn.ioloop.call_later(0, publish_batch)
        else:
            # a final synchronous round trip proves every publish was read by the broker
            ch.queue_declare(README_QUEUES[0], passive=True, callback=lambda _f: conn.close())

    def on_closed(_conn: Any, reason: Any) -> None:
        if state["i"] < n:
            errors.append(reason)
        state["conn"].ioloop.stop()
        done.set()

    conn = pika.SelectConnection(
        url_params(url),
        on_open_callback=on_open,
        on_open_error_callback=lambda _c, e: (errors.append(e), _c.ioloop.stop()),
        on_close_callback=on_closed,
    )
    state["conn"] = conn
    conn.ioloop.call_later(100, conn.ioloop.stop)  # hard stop: never hang
    conn.ioloop.start()
    assert not errors, errors
    assert state["i"] == n


@pytest.mark.timeout(120)
@pytest.mark.parametrize("example", list(README_EXAMPLES))
def test_pika_select_connection_readme_example(example: str, request: pytest.FixtureRequest) -> None:
    """The same examples through pika's asynchronous SelectConnection adapter."""
    url = hashbroker_url(request)
    n = messages_for(example, readme_client=False)
    _select_publish(url, example, n)
    check_readme_counts(request, url, example, n)
