"""kombu (py-amqp transport) and Celery against hashbroker.

kombu runs the seed README's three consistent-hash examples (100,000 routing keys; header/property
examples with the live RabbitMQ as reference). Celery routes tasks through the same x-consistent-hash
topology (counts checked against the recorded reference) and completes a real task round trip with
a worker thread (``celery.contrib.testing.worker.start_worker``) and the rpc:// result backend.
"""

from __future__ import annotations

from typing import Any

import pytest
from kombu import Connection, Exchange, Producer, Queue

from tests.differential_support import (
    README_EXAMPLES,
    README_QUEUES,
    README_WEIGHTS,
    check_readme_counts,
    hashbroker_url,
    messages_for,
    readme_publish_args,
)

pytestmark = [pytest.mark.slow]


def _kombu_topology(conn: Connection, example: str) -> Exchange:
    spec = README_EXAMPLES[example]
    exchange = Exchange(
        spec["exchange"], type="x-consistent-hash", durable=True, arguments=spec["arguments"] or None
    )
    channel = conn.default_channel
    exchange(channel).declare()
    for name, weight in zip(README_QUEUES, README_WEIGHTS, strict=True):
        queue = Queue(name, exchange=exchange, routing_key=weight, durable=True)
        bound = queue(channel)
        bound.declare()
        bound.purge()
    return exchange


@pytest.mark.timeout(120)
@pytest.mark.parametrize("example", list(README_EXAMPLES))
def test_kombu_readme_example(example: str, request: pytest.FixtureRequest) -> None:
    url = hashbroker_url(request)
    n = messages_for(example, readme_client=False)
    with Connection(url, connect_timeout=5) as conn:
        exchange = _kombu_topology(conn, example)
        producer = Producer(conn.default_channel, exchange=exchange)
        for i in range(n):
            rk, props = readme_publish_args(example, i)
            headers = props.pop("headers", None)
            props.pop("content_type", None)
            producer.publish(
                b"",
                routing_key=rk,
                headers=headers,
                content_type="application/data",
                content_encoding="binary",
                retry=False,
                **props,
            )
        Queue(README_QUEUES[0], channel=conn.default_channel).queue_declare(passive=True)
    check_readme_counts(request, url, example, n)


def _celery_app(url: str) -> Any:
    from celery import Celery

    app = Celery("hashbroker_tests", broker=url, backend="rpc://", set_as_current=False)
    app.conf.update(
        broker_connection_retry_on_startup=False,
        broker_connection_max_retries=1,
        task_default_queue="hb-celery",
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        broker_heartbeat=0,
    )
    return app


@pytest.mark.timeout(120)
def test_celery_tasks_routed_through_consistent_hash(request: pytest.FixtureRequest) -> None:
    """send_task through the README exchange: tasks land in q1..q4 exactly as RabbitMQ routes them."""
    url = hashbroker_url(request)
    n = 5000
    app = _celery_app(url)
    with app.connection_for_write() as conn:
        _kombu_topology(conn, "routing_key")
    for i in range(n):
        app.send_task("hb.noop", args=(i,), exchange="e", routing_key=str(i))
    check_readme_counts(request, url, "routing_key", n)


@pytest.mark.timeout(120)
def test_celery_task_round_trip(request: pytest.FixtureRequest) -> None:
    """A real Celery worker (thread, solo pool) executes tasks and returns results over rpc://."""
    from celery.contrib.testing.worker import start_worker

    url = hashbroker_url(request)
    app = _celery_app(url)

    @app.task(name="hb.add")
    def add(x: int, y: int) -> int:
        return x + y

    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10, loglevel="WARNING"):
        results = [add.delay(i, i) for i in range(20)]
        assert [r.get(timeout=20) for r in results] == [2 * i for i in range(20)]
