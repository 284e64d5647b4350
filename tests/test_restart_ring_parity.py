"""After a restart an x-consistent-hash exchange routes as RabbitMQ 3.10.8 routes after its restart.

The plugin keeps rings in RAM and rebuilds each durable exchange's ring on boot from `lists:usort` of
its bindings, so a topology bound out of route-table order comes back with a different ring.
`tests/data/restart_ring_observations.json` was recorded from the live broker by
`tools/probe_rabbitmq_restart_ring.py` (it restarts RabbitMQ, so it is not run by the suite): the
same bindings, 3,000 keys routed before and after `rabbitmqctl stop_app; start_app`. hashbroker,
given the same bindings in the same order, must route every key as RabbitMQ did before its restart,
and, after a restart from its data directory, as RabbitMQ did after.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pika
import pytest

from broker.embedded import BrokerThread

OBSERVATIONS = Path(__file__).resolve().parent / "data" / "restart_ring_observations.json"


@pytest.fixture(scope="module")
def observed() -> dict[str, Any]:
    return json.loads(OBSERVATIONS.read_text())


@contextlib.contextmanager
def channel(data_dir: Path) -> Iterator[Any]:
    with BrokerThread(host="127.0.0.1", port=0, data_dir=str(data_dir)) as b:
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        try:
            ch = conn.channel()
            ch.confirm_delivery()
            yield ch
        finally:
            with contextlib.suppress(Exception):
                conn.close()


def declare(ch: Any, obs: dict[str, Any]) -> None:
    ch.exchange_declare(obs["exchange"], "x-consistent-hash", durable=True)
    ch.exchange_declare(obs["fanout"], "fanout", durable=True)
    for dest in obs["destinations"]:
        kind, name = dest.split(":", 1)
        if kind == "queue":
            ch.queue_declare(name, durable=True)
    ch.queue_declare(obs["via"], durable=True)
    ch.queue_bind(obs["via"], obs["fanout"], "")
    for kind, dest, key, args in obs["bindings"]:
        if kind == "queue":
            ch.queue_bind(dest, obs["exchange"], key, arguments=args or None)
        else:
            ch.exchange_bind(dest, obs["exchange"], key, arguments=args or None)


def route(ch: Any, obs: dict[str, Any]) -> str:
    """Route keys "0".."keys-1"; one digit per key, the index of its destination (as the probe)."""
    queues = {
        (obs["via"] if d.startswith("exchange:") else d.split(":", 1)[1]): i
        for i, d in enumerate(obs["destinations"])
    }
    for i in range(obs["keys"]):
        ch.basic_publish(obs["exchange"], str(i), str(i).encode())
    placed: dict[int, int] = {}
    for q, index in queues.items():
        while True:
            method, _props, body = ch.basic_get(q, auto_ack=True)
            if method is None:
                break
            placed[int(body)] = index
    assert sorted(placed) == list(range(obs["keys"]))
    return "".join(str(placed[i]) for i in range(obs["keys"]))


def test_observation_discriminates(observed: dict[str, Any]) -> None:
    """The recorded topology must move keys across RabbitMQ's restart, or the test below proves nothing."""
    assert observed["rabbitmq_version"] == "3.10.8"
    moved = sum(1 for x, y in zip(observed["before"], observed["after"], strict=True) if x != y)
    assert moved == observed["moved"] and moved > observed["keys"] // 10


def test_restart_rebuilds_the_ring_as_rabbitmq_does(observed: dict[str, Any], tmp_path: Path) -> None:
    data = tmp_path / "data"
    with channel(data) as ch:
        declare(ch, observed)
        assert route(ch, observed) == observed["before"]
    with channel(data) as ch:
        assert route(ch, observed) == observed["after"]
    with channel(data) as ch:  # a second restart rebuilds the same (sorted) ring again
        assert route(ch, observed) == observed["after"]
