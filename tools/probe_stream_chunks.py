"""Record how RabbitMQ 3.10.8 cuts a stream into chunks (tests/data/stream_chunk_observations.json).

A stream consumer at `last` starts at the first offset of the last chunk, so the chunk boundaries
are visible. The probe publishes one confirmed message, then three in one transaction, and reads
from `last`, `--runs` times (a fresh stream each run). osiris's writer makes a chunk of what waits
in its mailbox, so the split depends on timing; the recording keeps every outcome seen.

    python tools/probe_stream_chunks.py --url amqp://guest:guest@127.0.0.1:5672/%2F --runs 5
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pika

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "stream_chunk_observations.json"


def read_last(conn: pika.BlockingConnection, name: str) -> list[list[Any]]:
    ch = conn.channel()
    ch.basic_qos(prefetch_count=100)
    got: list[list[Any]] = []

    def on_message(c: Any, method: Any, props: Any, body: bytes) -> None:
        got.append([int(props.headers["x-stream-offset"]), body.decode()])
        c.basic_ack(method.delivery_tag)

    ch.basic_consume(name, on_message, arguments={"x-stream-offset": "last"})
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.1)
    ch.close()
    return got


def run_once(url: str) -> list[list[Any]]:
    conn = pika.BlockingConnection(pika.URLParameters(url))
    name = f"chunkprobe-{uuid.uuid4().hex[:8]}"
    ch = conn.channel()
    ch.queue_declare(name, durable=True, arguments={"x-queue-type": "stream"})
    try:
        ch.confirm_delivery()
        ch.basic_publish("", name, b"solo", pika.BasicProperties(delivery_mode=2))
        tx = conn.channel()
        tx.tx_select()
        for i in range(3):
            tx.basic_publish("", name, f"tx{i}".encode())
        tx.tx_commit()
        time.sleep(0.5)
        return read_last(conn, name)
    finally:
        ch.queue_delete(name)
        conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/%2F")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    outcomes = sorted({json.dumps(run_once(a.url)) for _ in range(a.runs)})
    record = {
        "scenario": "one confirmed publish (offset 0), then three publishes in one transaction "
        "(offsets 1-3); a consumer at x-stream-offset 'last'",
        "rabbitmq": "3.10.8",
        "runs": a.runs,
        "last_reads_seen": [json.loads(o) for o in outcomes],
    }
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
