"""What a broker serves depends on its plugins, as RabbitMQ 3.10.8's does.

- /api/stream/... exists only while rabbitmq_stream_management is on; without it every method on
  such a path answers as RabbitMQ answers a path it does not know (recorded from the live node in
  tests/data/plugins/unknown_path.json: GET/HEAD 404 with the JSON body, OPTIONS 200 and any other
  method 405, all before authentication).
- /api/nodes lists the explicitly enabled plugins (RabbitMQ's enabled_plugins file), in its order.
- No stream listener without rabbitmq_stream, no /metrics listener without rabbitmq_prometheus.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.embedded import BrokerThread
from broker.runtime.settings import KNOWN_PLUGINS, with_dependencies

RECORDED: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "plugins" / "unknown_path.json").read_text()
)
AUTH = {"authorization": "Basic " + base64.b64encode(b"guest:guest").decode()}
STREAM_PATHS = (
    "/api/stream/connections",
    "/api/stream/connections/%2F",
    "/api/stream/connections/%2F/c/publishers",
    "/api/stream/publishers",
    "/api/stream/consumers/%2F",
)


def request(port: int, method: str, path: str, *, authed: bool = True) -> dict[str, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {**(AUTH if authed else {}), "content-type": "application/json"}
    conn.request(method, path, body=b"{}" if method in ("POST", "PUT") else None, headers=headers)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    kept = ("content-type", "allow", "www-authenticate")
    return {
        "status": resp.status,
        "headers": {h: resp.getheader(h) for h in kept if resp.getheader(h) is not None},
        "body": body.decode("utf-8"),
    }


@pytest.fixture(scope="module")
def without_stream_management() -> Iterator[int]:
    with BrokerThread(
        host="127.0.0.1", port=0, management_port=0, plugins=["rabbitmq_management", "rabbitmq_stream"]
    ) as b:
        yield b.broker.management.port


@pytest.mark.parametrize("path", STREAM_PATHS)
def test_stream_paths_are_unknown_without_the_plugin(without_stream_management: int, path: str) -> None:
    cases = [c for c in RECORDED["unknown_path"] if c["path"] == "/api/nosuchpath"]
    assert len(cases) == 12  # every method, with and without credentials
    for case in cases:
        got = request(without_stream_management, case["method"], path, authed=case["authed"])
        want = {k: case[k] for k in ("status", "headers", "body")}
        assert got == want, (case["method"], case["authed"])


def test_unknown_paths_answer_as_recorded(without_stream_management: int) -> None:
    for case in RECORDED["unknown_path"]:
        got = request(without_stream_management, case["method"], case["path"], authed=case["authed"])
        assert got == {k: case[k] for k in ("status", "headers", "body")}, case


def test_stream_paths_served_with_the_plugin() -> None:
    with BrokerThread(
        host="127.0.0.1", port=0, management_port=0, plugins=["rabbitmq_stream_management"]
    ) as b:
        port = b.broker.management.port
        for path in STREAM_PATHS[:2] + STREAM_PATHS[3:]:
            got = request(port, "GET", path)
            assert (got["status"], json.loads(got["body"])) == (200, []), path
        assert request(port, "POST", "/api/stream/connections")["headers"]["allow"] == "HEAD, GET, OPTIONS"
        assert request(port, "GET", "/api/stream/connections", authed=False)["status"] == 401


def test_stream_management_needs_management_and_stream() -> None:
    """As rabbitmq-plugins resolves it (the plugin's DEPS): management, and through it the agent
    and web dispatch, and the stream plugin."""
    assert with_dependencies(["rabbitmq_stream_management"]) == {
        "rabbitmq_stream_management",
        "rabbitmq_management",
        "rabbitmq_management_agent",
        "rabbitmq_web_dispatch",
        "rabbitmq_stream",
    }


def test_nodes_list_the_explicitly_enabled_plugins(tmp_path: Path) -> None:
    """The live node lists its enabled_plugins file's names (no implicit dependency such as
    rabbitmq_management_agent), in the file's order; hashbroker started with the same file lists
    the same names."""
    recorded = RECORDED["nodes_enabled_plugins"]
    assert "rabbitmq_management_agent" not in recorded and recorded == sorted(recorded)
    names = [n for n in recorded if n in KNOWN_PLUGINS]
    assert len(names) == len(recorded)  # every plugin of the oracle is emulated
    plugins_file = tmp_path / "enabled_plugins"
    plugins_file.write_text("[" + ",".join(names) + "].\n")
    with BrokerThread(
        host="127.0.0.1", port=0, management_port=0, prometheus_port=0, enabled_plugins_file=str(plugins_file)
    ) as b:
        port = b.broker.management.port
        [node] = json.loads(request(port, "GET", "/api/nodes")["body"])
        assert node["enabled_plugins"] == recorded
        # an edit to the file shows at once, as RabbitMQ reads the file for each report
        plugins_file.write_text("[rabbitmq_sharding,rabbitmq_management].\n")
        [node] = json.loads(request(port, "GET", "/api/nodes")["body"])
        assert node["enabled_plugins"] == ["rabbitmq_sharding", "rabbitmq_management"]
    # the plugins setting is a set of names: listed sorted, as `hashbroker plugins` writes the file
    with BrokerThread(
        host="127.0.0.1", port=0, management_port=0, plugins=["rabbitmq_sharding", "rabbitmq_management"]
    ) as b:
        name = b.broker.settings.nodes[0]
        node = json.loads(request(b.broker.management.port, "GET", "/api/nodes/" + name)["body"])
        assert node["enabled_plugins"] == ["rabbitmq_management", "rabbitmq_sharding"]


def _refused(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.parametrize(
    ("setting", "plugin", "listener"),
    [
        ("stream_port", "rabbitmq_stream", "stream_server"),
        ("prometheus_port", "rabbitmq_prometheus", "prometheus"),
    ],
)
def test_a_plugins_listener_only_with_the_plugin(setting: str, plugin: str, listener: str) -> None:
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    with BrokerThread(host="127.0.0.1", port=0, plugins=["rabbitmq_management"], **{setting: port}) as b:
        assert getattr(b.broker, listener) is None
        assert _refused(port)
    with BrokerThread(host="127.0.0.1", port=0, plugins=[plugin], **{setting: port}) as b:
        assert getattr(b.broker, listener).port == port
        assert not _refused(port)
