"""The rabbitmq_prometheus endpoint: its families against those recorded from RabbitMQ 3.10.8.

The scrape is parsed by prometheus-client's text parser (what a Prometheus-compatible scraper
reads), with the broker in the state the recorder put RabbitMQ in (a queue with a consumer, a
published message, an unroutable publish), so the families that carry series carry the same label
names. Every recorded family is served with the same name, TYPE, HELP and labels, or is one of
`OMITTED`, with its reason. The Grafana RabbitMQ-Overview dashboard's queries must find a series
for every metric they use that is served.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pika
import pytest
from prometheus_client.parser import text_string_to_metric_families

from broker.embedded import BrokerThread
from broker.plugins.prometheus import OMITTED, PrometheusServer, start_prometheus

DATA = Path(__file__).resolve().parents[1] / "data" / "prometheus"
RECORDED: dict[str, Any] = json.loads((DATA / "families.json").read_text())
IMPORTED = time.time()
GRAFANA: list[str] = json.loads((DATA / "grafana_overview_promql.json").read_text())["exprs"]


def families(text: str) -> dict[str, dict[str, Any]]:
    type_names = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
    out = {}
    for fam, name in zip(text_string_to_metric_families(text), type_names, strict=True):
        labels = sorted({k for s in fam.samples for k in s.labels if k not in ("quantile", "le")})
        out[name] = {"type": fam.type, "help": fam.documentation, "labels": labels, "samples": fam.samples}
    return out


@pytest.fixture(scope="module")
def scraped() -> Iterator[tuple[str, PrometheusServer]]:
    with BrokerThread(host="127.0.0.1", port=0) as b:
        assert b.loop is not None
        server = asyncio.run_coroutine_threadsafe(start_prometheus(b.broker, "127.0.0.1", 0), b.loop).result(
            10
        )
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("prometheus-record", auto_delete=True)
        ch.basic_publish("", "prometheus-record", b"x")
        ch.basic_publish("amq.direct", "nowhere", b"x")
        ch.basic_consume("prometheus-record", lambda *a: None, auto_ack=False)
        conn.process_data_events(time_limit=0.3)
        try:
            yield f"http://127.0.0.1:{server.port}", server
        finally:
            conn.close()
            asyncio.run_coroutine_threadsafe(server.close(), b.loop).result(10)


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.headers["content-type"] == "text/plain; version=0.0.4"
        return str(resp.read().decode())


def compare(
    recorded: list[dict[str, Any]], served: dict[str, dict[str, Any]], prefix: str = "rabbitmq_"
) -> None:
    """Every recorded family is served alike or omitted for a stated reason; nothing else is served."""
    want = {f["name"]: f for f in recorded}
    omitted = {n for n in want if n.replace("rabbitmq_detailed_", prefix, 1) in OMITTED}
    assert set(served) == set(want) - omitted
    for name, fam in served.items():
        assert (fam["type"], fam["help"]) == (want[name]["type"], want[name]["help"]), name
        assert fam["labels"] == want[name]["labels"], name


@pytest.mark.parametrize("path", ["/metrics", "/metrics/per-object"])
def test_families_as_recorded(scraped: tuple[str, PrometheusServer], path: str) -> None:
    base, _server = scraped
    get(base + path)  # once, so the telemetry summaries have a count for this registry
    compare(RECORDED[path], families(get(base + path)))


@pytest.mark.parametrize("family", sorted(RECORDED["/metrics/detailed"]))
def test_detailed_families_as_recorded(scraped: tuple[str, PrometheusServer], family: str) -> None:
    base, _server = scraped
    url = f"{base}/metrics/detailed?family={family}&vhost=%2F"
    get(url)
    compare(RECORDED["/metrics/detailed"][family], families(get(url)))


def test_values_from_the_broker(scraped: tuple[str, PrometheusServer]) -> None:
    base, _server = scraped
    agg = families(get(base + "/metrics"))
    value = {n: f["samples"][0].value for n, f in agg.items() if len(f["samples"]) == 1}
    assert value["rabbitmq_queues"] == 1
    assert value["rabbitmq_connections"] == 1
    assert value["rabbitmq_consumers"] == 1
    assert value["rabbitmq_queue_messages_unacked"] == 1
    assert value["rabbitmq_process_resident_memory_bytes"] > 1_000_000
    # the node's uptime is the process's: it started before this module was imported
    assert value["process_start_time_seconds"] < IMPORTED
    assert (
        abs(time.time() - value["process_start_time_seconds"] - value["rabbitmq_erlang_uptime_seconds"]) < 1.0
    )
    per = families(get(base + "/metrics/per-object"))
    [ready] = per["rabbitmq_queue_messages"]["samples"]
    assert (ready.labels, ready.value) == ({"vhost": "/", "queue": "prometheus-record"}, 1)
    received = per["rabbitmq_global_messages_received_total"]["samples"]
    assert [(s.labels, s.value) for s in received] == [({"protocol": "amqp091"}, 2)]


def test_other_paths_are_404(scraped: tuple[str, PrometheusServer]) -> None:
    base, _server = scraped
    for path in ("/", "/metric", "/api/overview", "/metrics/nope"):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(base + path, timeout=10)
        assert err.value.code == 404, path


def test_grafana_overview_queries_find_series(scraped: tuple[str, PrometheusServer]) -> None:
    """Each metric the dashboard's PromQL names is served with a series, unless it is one of the
    families left out (listed with their reason); the left-out ones it uses are exactly these."""
    base, _server = scraped
    served = {s.name for f in families(get(base + "/metrics")).values() for s in f["samples"]}
    used = {m for e in GRAFANA for m in re.findall(r"\b(rabbitmq_[a-z_]+|erlang_[a-z_]+)\b", e)}
    used -= {"rabbitmq_cluster", "rabbitmq_node", "rabbitmq_version", "rabbitmq_endpoint", "erlang_version"}
    missing = used - served
    assert {m for m in missing if m not in OMITTED} == set()
    assert missing == set()


def test_omitted_lists_only_recorded_families_with_a_reason() -> None:
    """The table of left-out families names 3.10.8 families only (none stale after a family is
    served), each with its reason."""
    recorded = {f["name"] for path in ("/metrics", "/metrics/per-object") for f in RECORDED[path]}
    recorded |= {
        f["name"].replace("rabbitmq_detailed_", "rabbitmq_", 1)
        for fams in RECORDED["/metrics/detailed"].values()
        for f in fams
    }
    assert set(OMITTED) <= recorded
    assert all(reason.strip() for reason in OMITTED.values())
    assert not {n for n in OMITTED if n.startswith("rabbitmq_auth_attempts")}  # counted now
