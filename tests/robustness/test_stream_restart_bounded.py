"""A restart over a large stream keeps its bodies on disk: a 1.5 GB stream (1.46 M x 1 KB,
published 100 at a time as a pipelining publisher sends them, so stored as chunk rows) restarts
with the broker's peak RSS under 200 MB, reading the store at most once over (SQLite keeps a
large row's first part, bodies included, in the page that holds its sizes; no integrity pass: the
last stop was clean), and a consumer from `first` then reads the paged bodies. The stop after
that leaves no write-ahead log behind, so the start after it is as cheap. How long the restart
takes is printed, not asserted: speed is measured by the benchmarks.

The stream is written and the restart measured in child processes; the peak RSS is the
restarted broker's own high-water mark (VmHWM). Not ru_maxrss: Linux keeps that across exec, so
a child forked from a large test runner would report the runner's size. The bytes read are the
child's `rchar` (every read and pread; the store reads through no memory map).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

MESSAGES = 1_460_000
BODY = 1024
CHUNK = 100

FILL = """
import asyncio, sys
from amqpwire.fields import Field, FieldTable
from broker.entities.message import StoredMessage
from broker.entities.queues.base import Queue
from broker.server import Broker

async def main(data_dir, n, size, chunk):
    b = Broker(host="127.0.0.1", port=0, data_dir=data_dir)
    await b.start()
    vh = b.vhosts["/"]
    q = Queue(vh, "big", durable=True, exclusive_owner=None, auto_delete=False,
              arguments=FieldTable([("x-queue-type", Field("longstr", b"stream"))]))
    vh.add_queue(q)
    x = vh.exchanges[""]
    props = bytes.fromhex("1000") + bytes([2])  # delivery_mode 2
    for i in range(n):
        body = i.to_bytes(8, "big") + bytes(size - 8)
        vh.publish(x, StoredMessage("", "big", props, body))
        if i % chunk == chunk - 1:
            await asyncio.sleep(0)  # the next publish starts a new chunk
            if i % 50_000 == 49_999:
                await b.store.sync()
    await b.store.sync()
    await b.stop()

asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
"""

RESTART = """
import asyncio, json, sys, time
import pika
from broker.server import Broker

def bytes_read():
    with open("/proc/self/io") as io:
        for line in io:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise RuntimeError("no rchar in /proc/self/io")

def peak_rss_mb():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")

async def main(data_dir):
    t0, read0 = time.monotonic(), bytes_read()
    b = Broker(host="127.0.0.1", port=0, data_dir=data_dir)
    await b.start()
    started, read = time.monotonic() - t0, bytes_read() - read0
    rss_started = peak_rss_mb()
    q = b.vhosts["/"].queues["big"]
    out = {"seconds": started, "read_mb": read / 2**20, "count": q.count, "first": q.log.first_offset,
           "next": q.log.next_offset}

    def consume():
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", b.port))
        ch = conn.channel()
        ch.basic_qos(prefetch_count=500)
        got = []

        def on_message(ch, m, p, body):
            # no ack past 3000: the broker stops at the prefetch, so this process's peak RSS
            # stays the broker's, not a list of whatever it could deliver meanwhile
            if len(got) < 3000:
                got.append((p.headers["x-stream-offset"], int.from_bytes(body[:8], "big"), len(body)))
                ch.basic_ack(m.delivery_tag)

        ch.basic_consume("big", on_message, arguments={"x-stream-offset": "first"})
        deadline = time.monotonic() + 30
        while len(got) < 3000 and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.2)
        # not closed: pika would nack what it holds, which a stream refuses; the broker's stop
        # closes it
        return got

    got = await asyncio.to_thread(consume)
    out["consumed"] = len(got)
    out["in_order"] = all(o == i and n == i and ln == %d for (o, n, ln), i in zip(got, range(len(got))))
    out["maxrss_started_mb"] = rss_started
    out["maxrss_mb"] = peak_rss_mb()
    await b.stop()
    print(json.dumps(out))

asyncio.run(main(sys.argv[1]))
"""


@pytest.mark.slow
def test_restart_over_a_large_stream_keeps_its_bodies_on_disk(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data_dir = str(data)
    subprocess.run(
        [sys.executable, "-c", FILL, data_dir, str(MESSAGES), str(BODY), str(CHUNK)],
        check=True,
        timeout=1800,
    )
    done = subprocess.run(
        [sys.executable, "-c", RESTART % BODY, data_dir],
        check=True,
        timeout=600,
        capture_output=True,
        text=True,
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["count"] == MESSAGES
    assert out["consumed"] == 3000 and out["in_order"], out
    print(f"\nrestart over {MESSAGES} stream records: {out}")
    store_mb = sum(p.stat().st_size for p in data.iterdir()) / 2**20
    assert out["read_mb"] < 1.2 * store_mb, (store_mb, out)
    assert sorted(p.name for p in data.iterdir() if p.name.endswith("-wal")) == []
    assert out["maxrss_mb"] < 200, out
