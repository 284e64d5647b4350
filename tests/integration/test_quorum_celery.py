"""Celery (5.5+) with task_default_queue_type = "quorum" runs a task end to end through kombu
against hashbroker: the default queue is declared as a quorum queue, the worker consumes it without
a global prefetch (Celery detects quorum queues), the result comes back over the rpc:// backend."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

celery = pytest.importorskip("celery")

from celery.contrib.testing.worker import start_worker  # noqa: E402

from broker.embedded import BrokerThread  # noqa: E402


@pytest.fixture
def broker() -> Iterator[BrokerThread]:
    with BrokerThread(host="127.0.0.1", port=0) as b:
        yield b


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_celery_task_through_a_quorum_queue(broker: BrokerThread) -> None:
    major, minor = (int(x) for x in celery.__version__.split(".")[:2])
    if (major, minor) < (5, 5):
        pytest.skip(f"celery {celery.__version__} has no task_default_queue_type (5.5+)")
    app = celery.Celery("qq", broker=broker.url, backend="rpc://")
    app.conf.task_default_queue_type = "quorum"
    app.conf.broker_connection_retry_on_startup = False

    @app.task(name="qq.add")
    def add(x: int, y: int) -> int:
        return x + y

    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
        assert add.delay(2, 3).get(timeout=20) == 5
    q = broker.call(lambda: broker.broker.vhosts["/"].queues["celery"])
    assert q.type_name == "quorum" and q.durable


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_celery_native_delayed_delivery_declares_its_quorum_queues(broker: BrokerThread) -> None:
    """Celery 5.5's native delayed delivery declares celery_delayed_0..27 as quorum queues with
    reject-publish and at-least-once dead-lettering; py-amqp sends the large TTLs with the 'L' tag."""
    app = celery.Celery("qq", broker=broker.url, backend="rpc://")
    app.conf.task_default_queue_type = "quorum"
    app.conf.broker_connection_retry_on_startup = False
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
        pass
    names = broker.call(lambda: sorted(broker.broker.vhosts["/"].queues))
    assert {f"celery_delayed_{i}" for i in range(28)} <= set(names)
