"""The dashboard at `/` renders, in a real (headless Chromium) browser, every queue of a
consistent-hash exchange with its exact message count and the share its weight predicts.

Writes `test-artifacts/dashboard.png`. Skips with the reason when Chromium is not installed
(`apt-get install -y chromium`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pika
import pytest

import exchanges
from broker.embedded import BrokerThread
from tests.management.test_management_api import http

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
BINDINGS = [("orders.eu", "1"), ("orders.us", "3"), ("orders.apac", "2"), ("orders.latam", "1")]
KEYS = [f"customer-{i}" for i in range(3000)]


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no Chromium: install it with `apt-get update && apt-get install -y chromium`")


def run_chromium(url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="hb-chromium-") as profile:
        cmd = [
            chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--virtual-time-budget=5000",
            *extra, url,
        ]  # fmt: skip
        return subprocess.run(cmd, capture_output=True, text=True, timeout=90)


class Bars(HTMLParser):
    """Collects the data-* attributes of the chart's bars and of the ring's bucket-range rows."""

    def __init__(self) -> None:
        super().__init__()
        self.bars: dict[str, dict[str, str]] = {}
        self.ranges: dict[str, tuple[int, int]] = {}
        self.queue_rows: dict[str, int] = {}
        self.ready = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "body" and a.get("data-ready") == "1":
            self.ready = True
        if tag == "g" and a.get("class") == "bar":
            self.bars[a["data-queue"]] = a
        if tag == "tr" and "data-bucket-first" in a:
            self.ranges[a["data-queue"]] = (int(a["data-bucket-first"]), int(a["data-bucket-last"]))
        if tag == "tr" and "data-messages" in a:
            self.queue_rows[a["data-queue"]] = int(a["data-messages"])


def test_dashboard_shows_every_queue_of_a_hash_exchange() -> None:
    chromium()
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        base = f"http://127.0.0.1:{b.broker.management.port}"
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        ch = conn.channel()
        ch.exchange_declare("orders", "x-consistent-hash")
        for q, w in BINDINGS:
            ch.queue_declare(q)
            ch.queue_bind(q, "orders", w)
        ch.queue_declare("unrelated")
        for k in KEYS:
            ch.basic_publish("orders", k, b"{}")
        ch.basic_publish("", "unrelated", b"x")
        conn.close()
        status, page, headers = http(base, "GET", "/", auth=None)  # the page itself needs no login
        assert status == 200 and headers["content-type"].startswith("text/html") and b"dashboard.js" in page
        assert http(base, "GET", "/api/queues", auth=None)[0] == 401  # the data does

        predicted = Counter(q for qs in exchanges.predict("x-consistent-hash", BINDINGS, KEYS) for q in qs)
        dom = run_chromium(base + "/", "--dump-dom")
        parsed = Bars()
        parsed.feed(dom.stdout)
        assert parsed.ready, f"dashboard did not render: {dom.stderr[-2000:]}"
        assert parsed.queue_rows == {**predicted, "unrelated": 1}
        assert set(parsed.bars) == {q for q, _ in BINDINGS}
        total_weight = sum(int(w) for _, w in BINDINGS)
        for q, w in BINDINGS:
            bar = parsed.bars[q]
            assert int(bar["data-messages"]) == predicted[q]
            assert float(bar["data-share"]) == pytest.approx(int(w) / total_weight)
            assert float(bar["data-expected"]) == pytest.approx(len(KEYS) * int(w) / total_weight, abs=0.1)
        assert parsed.ranges == {"orders.eu": (0, 0), "orders.us": (1, 3), "orders.apac": (4, 5),
                                 "orders.latam": (6, 6)}  # fmt: skip

        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "dashboard.png"
        shot.unlink(missing_ok=True)
        run_chromium(base + "/", f"--screenshot={shot}", "--window-size=1280,900", "--hide-scrollbars")
        assert shot.exists() and shot.stat().st_size > 10_000
        assert re.match(rb"\x89PNG", shot.read_bytes()[:4])
    assert os.path.getsize(shot) > 0
