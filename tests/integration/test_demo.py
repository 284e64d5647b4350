"""`hashbroker demo`: exit code and the printed counts, for the standard run and a failing check."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from broker.cli import demo

ROOT = Path(__file__).resolve().parents[2]


def _table_counts(text: str) -> dict[str, int]:
    """The messages column of the printed table, per queue."""
    counts = {}
    for line in text.splitlines():
        match = re.match(r"^\W*(q[1-4])\W+\d+\W+([\d,]+)\W", line)
        if match:
            counts[match.group(1)] = int(match.group(2).replace(",", ""))
    return counts


@pytest.mark.slow
def test_demo_prints_rabbitmqs_counts_and_exits_0() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "broker.cli.main", "demo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _table_counts(proc.stdout) == {"q1": 16638, "q2": 16631, "q3": 33441, "q4": 33290}
    assert "counts are IDENTICAL to RabbitMQ 3.10.8's recorded counts" in proc.stdout
    assert re.search(r"100,000 messages confirmed in \d+\.\d+ s \([\d,]+ msg/s\)", proc.stdout)
    assert "100000/100000" in proc.stdout  # the progress bar's final state


def test_demo_exits_1_when_the_counts_differ(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = dict(demo.RABBITMQ_3_10_8_COUNTS, q1=demo.RABBITMQ_3_10_8_COUNTS["q1"] + 1)
    monkeypatch.setattr(demo, "RABBITMQ_3_10_8_COUNTS", wrong)
    assert demo.run_demo() == 1
    out = capsys.readouterr().out
    assert "counts DIFFER from RabbitMQ 3.10.8's recorded counts" in out
    assert _table_counts(out)["q1"] == wrong["q1"] - 1


def test_demo_with_fewer_messages_routes_them_all() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "broker.cli.main", "demo", "--messages", "3000"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sum(_table_counts(proc.stdout).values()) == 3000
