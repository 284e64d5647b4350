"""The Node stream client (rabbitmq-stream-js-client, pinned in tests/clients/node/package-lock.json)
against hashbroker's stream port, with RabbitMQ 3.10.8's 5552 as the oracle.

``tests/clients/node/stream_roundtrip.js`` publishes 100,000 messages with confirms to a new stream
and consumes them back from the first offset; what the client observes (confirms, errors, bodies
and offsets in order) must be what it observes on RabbitMQ. Every release of the client sends
exchange-command-versions (RabbitMQ 3.11's) right after open: 3.10.8 closes the connection on it
and the client dies on the close it cannot decode, on hashbroker as on RabbitMQ. The program's
`v1` mode keeps the client from sending it, which is how it reaches a 3.10.8 broker.

Install the client with ``npm ci --prefix tests/clients/node``; without node or the installed
client every test here skips with that reason.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from broker.embedded import BrokerThread
from tests.differential_support import RABBIT_STREAM, rabbitmq_stream_answers

pytestmark = [pytest.mark.slow]

NODE_DIR = Path(__file__).resolve().parent / "node"
INSTALL = "npm ci --prefix tests/clients/node"
PACKAGE = "rabbitmq-stream-js-client"
N = 100_000
#: What the client observes on RabbitMQ 3.10.8 (v1 mode), timings aside.
OBSERVED = {
    "count": N,
    "confirmed": N,
    "publish_errors": 0,
    "last_publishing_id": str(N),
    "consumed": N,
    "bodies_in_order": True,
    "offsets_in_order": True,
    "first": "m0",
    "last": f"m{N - 1}",
    "last_offset": str(N - 1),
}
TIMINGS = ("publish_ms", "consume_ms")


def _skip_reason() -> str | None:
    if shutil.which("node") is None:
        return f"node is not installed (Node.js >= 18 and npm, then `{INSTALL}`)"
    installed = NODE_DIR / "node_modules" / PACKAGE / "package.json"
    if not installed.exists():
        return f"{PACKAGE} is not installed in tests/clients/node/node_modules (run `{INSTALL}`)"
    lock = json.loads((NODE_DIR / "package-lock.json").read_text())
    pinned = lock["packages"][f"node_modules/{PACKAGE}"]["version"]
    version = json.loads(installed.read_text()).get("version")
    if version != pinned:
        return f"node_modules has {PACKAGE} {version}, the lock pins {pinned} (run `{INSTALL}`)"
    return None


def _run(port: int, stream: str, *extra: str) -> tuple[int, dict[str, Any] | None, str]:
    """(exit code, the program's JSON line or None, its stderr)."""
    proc = subprocess.run(
        ["node", str(NODE_DIR / "stream_roundtrip.js"), "127.0.0.1", str(port), stream, *extra],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    line = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    return proc.returncode, json.loads(line) if line else None, proc.stderr


def _without_timings(out: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if out is None else {k: v for k, v in out.items() if k not in TIMINGS}


@pytest.fixture
def stream_port(tmp_path: Path) -> Any:
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    with BrokerThread(host="127.0.0.1", port=0, data_dir=str(tmp_path), stream_port=0) as b:
        assert b.broker.stream_server is not None
        yield b.broker.stream_server.port


def test_client_as_released_is_closed_as_by_rabbitmq(stream_port: int) -> None:
    """exchange-command-versions gets 3.10.8's close; the client cannot decode it (key 22)."""
    code, out, err = _run(stream_port, f"hb-node-{uuid.uuid4().hex[:6]}", "10")
    assert (code, out) == (1, None)
    assert "Unknown response 22" in err
    if rabbitmq_stream_answers():
        rcode, rout, rerr = _run(RABBIT_STREAM[1], f"hb-stream1-node-{uuid.uuid4().hex[:6]}", "10")
        assert (rcode, rout) == (code, out)
        assert "Unknown response 22" in rerr


def test_100k_messages_with_confirms_and_back(stream_port: int) -> None:
    code, ours, err = _run(stream_port, f"hb-node-{uuid.uuid4().hex[:6]}", str(N), "v1")
    assert code == 0, err
    assert ours is not None
    print(f"hashbroker: publish+confirm {ours['publish_ms']} ms, consume {ours['consume_ms']} ms")
    assert _without_timings(ours) == OBSERVED
    if rabbitmq_stream_answers():
        rcode, rabbit, rerr = _run(RABBIT_STREAM[1], f"hb-stream1-node-{uuid.uuid4().hex[:6]}", str(N), "v1")
        assert rcode == 0, rerr
        assert rabbit is not None
        print(f"RabbitMQ: publish+confirm {rabbit['publish_ms']} ms, consume {rabbit['consume_ms']} ms")
        assert _without_timings(rabbit) == _without_timings(ours)
