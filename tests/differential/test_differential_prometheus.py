"""hashbroker's /metrics against the live rabbitmq_prometheus plugin's, family by family.

The recorded families (tests/data/prometheus) are checked offline by
tests/integration/test_prometheus.py; this compares with the reference RabbitMQ as it runs now, so a
recording that went stale shows here. Families hashbroker leaves out on purpose are
`broker.plugins.prometheus.OMITTED`.
"""

from __future__ import annotations

import asyncio
import socket
import urllib.request
from typing import Any

import pika
import pytest
from prometheus_client.parser import text_string_to_metric_families

from broker.embedded import BrokerThread
from broker.plugins.prometheus import OMITTED, start_prometheus

PROMETHEUS_PORT = 15692


def families(text: str) -> dict[str, dict[str, Any]]:
    type_names = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
    return {
        name: {
            "type": fam.type,
            "help": fam.documentation,
            "labels": sorted({k for s in fam.samples for k in s.labels if k not in ("quantile", "le")}),
        }
        for fam, name in zip(text_string_to_metric_families(text), type_names, strict=True)
    }


def scrape(url: str) -> dict[str, dict[str, Any]]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return families(resp.read().decode())


def test_metrics_families_as_the_live_plugin(rabbitmq_url: str) -> None:
    host = pika.URLParameters(rabbitmq_url).host
    try:
        socket.create_connection((host, PROMETHEUS_PORT), timeout=3).close()
    except OSError:
        pytest.skip(
            f"the reference RabbitMQ on {host} lacks the rabbitmq_prometheus plugin (/metrics on "
            f"{PROMETHEUS_PORT}); enable it with: rabbitmq-plugins enable rabbitmq_prometheus"
        )
    live = scrape(f"http://{host}:{PROMETHEUS_PORT}/metrics")
    with BrokerThread(host="127.0.0.1", port=0) as b:
        assert b.loop is not None
        server = asyncio.run_coroutine_threadsafe(start_prometheus(b.broker, "127.0.0.1", 0), b.loop).result(
            10
        )
        try:
            ours = scrape(f"http://127.0.0.1:{server.port}/metrics")
            ours = scrape(f"http://127.0.0.1:{server.port}/metrics")  # the telemetry has a count now
        finally:
            asyncio.run_coroutine_threadsafe(server.close(), b.loop).result(10)
    assert set(ours) == set(live) - set(OMITTED)
    for name, fam in ours.items():
        assert (fam["type"], fam["help"]) == (live[name]["type"], live[name]["help"]), name
        if fam["labels"] and live[name]["labels"]:
            assert fam["labels"] == live[name]["labels"], name
