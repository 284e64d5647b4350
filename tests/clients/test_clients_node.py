"""Node's amqplib against hashbroker over real sockets, with RabbitMQ 3.10.8 as the oracle.

* ``tests/clients/node/readme_example.js`` runs the consistent-hash plugin README's three examples as a Node
  user writes them (ConfirmChannel, assertExchange 'x-consistent-hash' with the README's arguments,
  bindQueue weights '1','1','2','2', publish, waitForConfirms); the per-queue counts must equal
  RabbitMQ's (``check_readme_counts``).
* ``tests/clients/node/differential.js`` records what amqplib observes (resolved replies, rejections and
  their Error fields, 'return'/'error'/'close' events in firing order, the raw bytes of every content
  header and body frame received) from the live RabbitMQ and from hashbroker; each section must be
  equal after generated names are scrubbed.

amqplib is pinned in ``tests/clients/node/package-lock.json``; install it with
``npm ci --prefix tests/clients/node``.
Without ``node`` or the installed amqplib every test here skips with that reason.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.differential_support import (
    README_EXAMPLES,
    check_readme_counts,
    hashbroker_url,
    messages_for,
    optional_rabbitmq_url,
    scrub,
)

pytestmark = [pytest.mark.slow]

NODE_DIR = Path(__file__).resolve().parent / "node"
INSTALL = "npm ci --prefix tests/clients/node"


def _pinned_amqplib() -> str:
    lock = json.loads((NODE_DIR / "package-lock.json").read_text())
    version: str = lock["packages"]["node_modules/amqplib"]["version"]
    return version


def _node_available() -> str | None:
    """None when node and the pinned amqplib are usable, else the reason to skip."""
    if shutil.which("node") is None:
        return f"node is not installed (Node.js >= 18 and npm, then `{INSTALL}`)"
    installed = NODE_DIR / "node_modules" / "amqplib" / "package.json"
    if not installed.exists():
        return f"amqplib is not installed in tests/clients/node/node_modules (run `{INSTALL}`; needs npm)"
    pinned = _pinned_amqplib()
    version = json.loads(installed.read_text()).get("version")
    if version != pinned:
        return f"{NODE_DIR}/node_modules has amqplib {version}, the lock pins {pinned} (run `{INSTALL}`)"
    probe = subprocess.run(
        ["node", "-e", "require('amqplib')"], cwd=NODE_DIR, capture_output=True, text=True, timeout=30
    )
    if probe.returncode != 0:
        return f"node cannot load amqplib: {probe.stderr.strip()[:200]}"
    return None


@pytest.fixture(scope="module")
def node() -> None:
    reason = _node_available()
    if reason:
        pytest.skip(reason)


def _run_node(script: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["node", script, *args], cwd=NODE_DIR, capture_output=True, text=True, timeout=timeout
    )


# --------------------------------------------------------------------------------------------------
# The README's consistent-hash examples
# --------------------------------------------------------------------------------------------------


@pytest.mark.timeout(200)
@pytest.mark.parametrize("example", list(README_EXAMPLES))
def test_amqplib_readme_example(example: str, node: None, request: pytest.FixtureRequest) -> None:
    url = hashbroker_url(request)
    # the README has no Node examples: 100,000 routing keys, the smaller count for header/property
    n = messages_for(example, readme_client=False)
    proc = _run_node("readme_example.js", url, example, str(n), timeout=150)
    assert proc.returncode == 0 and proc.stdout.strip() == "done", (proc.stdout[-500:], proc.stderr[-2000:])
    check_readme_counts(request, url, example, n)


# --------------------------------------------------------------------------------------------------
# Differential: the same script against RabbitMQ 3.10.8 and hashbroker
# --------------------------------------------------------------------------------------------------

#: Sections of differential.js's observation that must be equal (``identity`` is compared apart).
SECTIONS = ["handshake", "roundtrip", "mandatory_return", "errors", "connection_events"]
_OBSERVED: dict[str, dict[str, Any]] = {}


def _observe(url: str) -> dict[str, Any]:
    """Run differential.js against ``url``; its observation with the run's suffix scrubbed."""
    # 'n' and 'z' are not hex digits: the suffix cannot occur inside a hex dump of a frame
    suffix = f"n{uuid.uuid4().hex[:10]}z"
    proc = _run_node("differential.js", url, suffix, timeout=90)
    assert proc.returncode == 0, (url, proc.stdout[-500:], proc.stderr[-2000:])
    obs: dict[str, Any] = scrub(json.loads(proc.stdout), {suffix: "<sfx>"})
    return obs


def _observed(target: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    """One run per broker per session (names are unique, so runs need no fresh broker)."""
    if target not in _OBSERVED:
        if target == "rabbitmq":
            url = optional_rabbitmq_url(request)
            if url is None:
                pytest.skip("no reference RabbitMQ reachable: nothing to compare amqplib's view with")
        else:
            url = hashbroker_url(request)
        _OBSERVED[target] = _observe(url)
    return _OBSERVED[target]


@pytest.mark.live
@pytest.mark.timeout(200)
@pytest.mark.parametrize("section", SECTIONS)
def test_amqplib_sees_rabbitmq(section: str, node: None, request: pytest.FixtureRequest) -> None:
    expected = _observed("rabbitmq", request)[section]
    actual = _observed("hashbroker", request)[section]
    if actual != expected:
        pytest.fail(
            f"amqplib {_pinned_amqplib()} sees hashbroker differ from RabbitMQ 3.10.8 in {section!r}\n"
            f"--- rabbitmq\n{json.dumps(expected, indent=1, sort_keys=True)}\n"
            f"--- hashbroker\n{json.dumps(actual, indent=1, sort_keys=True)}",
            pytrace=False,
        )


@pytest.mark.live
@pytest.mark.timeout(200)
def test_amqplib_server_identity(node: None, request: pytest.FixtureRequest) -> None:
    """Who each broker says it is. amqplib only stores serverProperties (it decides nothing on them);
    the key sets and capabilities are compared in ``handshake``. hashbroker names itself on purpose
    (as the management API's product_name does), so only the shape is checked here."""
    rabbit = _observed("rabbitmq", request)["identity"]
    ours = _observed("hashbroker", request)["identity"]
    request.node.user_properties.append(("identity", {"rabbitmq": rabbit, "hashbroker": ours}))
    assert rabbit["product"] == "RabbitMQ" and rabbit["version"] == "3.10.8", rabbit
    assert ours["product"] == "hashbroker", ours
    assert ours["cluster_name"] and "@" in ours["cluster_name"], ours
