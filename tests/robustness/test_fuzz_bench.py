"""Short runs of the bench fuzzers: bench/fuzz.py (AMQP, quorum and stream queues, management
HTTP) and bench/fuzz_stream.py (the stream protocol), each against its own `hashbroker serve`.

Each must end with no unhandled exception in the broker's log and no neighbour failure. A
neighbour round trip may take up to 5 s here (the bench's own bound is 1 s over 5-minute runs;
a shared test machine is noisier). The log analysis itself is checked without a broker.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO))

from bench.fuzz import analyse_log  # noqa: E402

SECONDS = 25


def _run(script: str) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), "--seconds", str(SECONDS), "--stall", "5"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=SECONDS + 120,
    )
    found = re.search(r"^RESULT (.*)$", proc.stdout, re.M)
    assert found, f"no RESULT line:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    result = {k: float(v) for k, v in (kv.split("=") for kv in found.group(1).split())}
    assert result["unhandled"] == 0, proc.stdout[-4000:]
    assert result["failures"] == 0 and result["stalls"] == 0, proc.stdout[-4000:]
    inputs = re.search(r"^(\d+) inputs in", proc.stdout, re.M)
    assert inputs and int(inputs.group(1)) > 50, proc.stdout[-2000:]
    return result


@pytest.mark.slow
@pytest.mark.timeout(SECONDS + 150)
def test_fuzz_amqp_queue_types_and_management_http() -> None:
    _run("fuzz.py")


@pytest.mark.slow
@pytest.mark.timeout(SECONDS + 150)
def test_fuzz_stream_protocol() -> None:
    _run("fuzz_stream.py")


def test_log_analysis_counts_each_traceback_once_by_cause() -> None:
    log = "\n".join(
        [
            "2026-01-01 00:00:00,000 INFO x: fine",
            "2026-01-01 00:00:01,000 ERROR broker.streamproto.server: stream connection failed",
            "Traceback (most recent call last):",
            '  File "/r/broker/a.py", line 3, in f',
            "    g()",
            "During handling of the above exception, another exception occurred:",
            "Traceback (most recent call last):",
            '  File "/r/broker/b.py", line 9, in g',
            "    raise ValueError('x')",
            "ValueError: x",
            "2026-01-01 00:00:02,000 INFO x: connection.close 541 INTERNAL_ERROR (KeyError('k'))",
            "2026-01-01 00:00:03,000 ERROR asyncio: Exception in callback T()",
            "Traceback (most recent call last):",
            '  File "/r/broker/b.py", line 9, in g',
            "ValueError: x",
        ]
    )
    report = analyse_log(log)
    assert sum(report.unhandled.values()) == 2
    assert list(report.unhandled) == ['ValueError: x at File "/r/broker/b.py", line 9, in g']
    assert report.internal_541 == 1
