"""Record RabbitMQ's Prometheus metric families (name, TYPE, HELP, label names) into families.json.

Run against a live RabbitMQ with `rabbitmq-plugins enable rabbitmq_prometheus` (port 15692). A
connection, a channel, a queue with a consumer and a published message are kept open while the
endpoints are scraped, so the per-object families carry their labels. Values are not recorded:
they are the node's, and the comparison is of the families' shape.

    .venv/bin/python tests/data/prometheus/record.py [http://127.0.0.1:15692]
"""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

import pika
from prometheus_client.parser import text_string_to_metric_families

DETAILED_FAMILIES = (
    "connection_churn_metrics",
    "queue_coarse_metrics",
    "queue_consumer_count",
    "queue_metrics",
    "connection_coarse_metrics",
    "connection_metrics",
    "channel_metrics",
    "channel_queue_metrics",
    "channel_exchange_metrics",
    "channel_queue_exchange_metrics",
    "channel_process_metrics",
    "node_coarse_metrics",
    "node_metrics",
    "node_persister_metrics",
    "ra_metrics",
    "auth_attempt_metrics",
    "auth_attempt_detailed_metrics",
    "exchange_names",
    "exchange_bindings",
    "vhost_status",
)
"""Every `family=` the 3.10.8 plugin's /metrics/detailed knows (an unknown one adds nothing)."""


def families(text: str) -> list[dict[str, object]]:
    """The exposition's families as parsed by prometheus-client: name as in `# TYPE`, type, help,
    and the sorted union of the label names of its samples."""
    type_names = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
    out = []
    for fam, raw_name in zip(text_string_to_metric_families(text), type_names, strict=True):
        labels = sorted({k for s in fam.samples for k in s.labels if k not in ("quantile", "le")})
        out.append({"name": raw_name, "type": fam.type, "help": fam.documentation, "labels": labels})
    return out


def scrape(base: str, path: str) -> str:
    with urllib.request.urlopen(base + path, timeout=10) as resp:
        return resp.read().decode()


def main() -> None:
    base = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:15692"
    conn = pika.BlockingConnection(pika.URLParameters("amqp://guest:guest@127.0.0.1:5672/%2F"))
    ch = conn.channel()
    ch.confirm_delivery()
    q = "prometheus-record"
    ch.queue_declare(q, auto_delete=True)
    ch.basic_publish("", q, b"x")
    ch.basic_publish("amq.direct", "nowhere", b"x")
    ch.basic_consume(q, lambda *a: None, auto_ack=False)
    conn.process_data_events(time_limit=1.0)
    conn.sleep(6)  # the core metrics tables are filled by the stats emission (5 s)
    recorded: dict[str, object] = {
        "/metrics": families(scrape(base, "/metrics")),
        "/metrics/per-object": families(scrape(base, "/metrics/per-object")),
        "/metrics/detailed": {
            f: families(scrape(base, f"/metrics/detailed?family={f}&vhost=%2F")) for f in DETAILED_FAMILIES
        },
    }
    conn.close()
    out = Path(__file__).with_name("families.json")
    out.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
