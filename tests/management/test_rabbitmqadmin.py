"""The real `rabbitmqadmin` (shipped in RabbitMQ's management plugin) works against hashbroker.

Skips with the reason when the script is not installed. The JSON fields rabbitmqadmin reads for
each call are also compared with what the live RabbitMQ 3.10.8 returns for the same calls.
"""

from __future__ import annotations

import glob
import json
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.embedded import BrokerThread
from tests.conftest import rabbitmq_reachable
from tests.management.test_management_api import RABBIT_API, http

CANDIDATES = [
    "/usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins/rabbitmq_management-*/priv/www/cli/rabbitmqadmin",
]


def find_rabbitmqadmin() -> str:
    found = shutil.which("rabbitmqadmin")
    if found:
        return found
    for pattern in CANDIDATES:
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    pytest.skip("rabbitmqadmin not found (it ships in the rabbitmq-server package's management plugin)")


@pytest.fixture
def port() -> Iterator[int]:
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        yield int(b.broker.management.port)


def admin(port: int, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the script with this venv's Python (it is a plain Python 3 script)."""
    cmd = [sys.executable, find_rabbitmqadmin(), "-H", "127.0.0.1", "-P", str(port), "-u", "guest",
           "-p", "guest", *args]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def test_rabbitmqadmin_round_trip(port: int, tmp_path: Path) -> None:
    r = admin(port, "declare", "queue", "name=adm.q", "durable=false")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "queue declared"
    r = admin(port, "declare", "exchange", "name=adm.x", "type=x-consistent-hash")
    assert r.returncode == 0, r.stderr
    r = admin(port, "declare", "binding", "source=adm.x", "destination=adm.q", "routing_key=2")
    assert r.returncode == 0, r.stderr
    r = admin(port, "publish", "exchange=adm.x", "routing_key=k1", "payload=hello")
    assert (r.returncode, r.stdout.strip()) == (0, "Message published"), r.stderr
    r = admin(port, "publish", "routing_key=adm.q", "payload=second")
    assert r.returncode == 0, r.stderr

    r = admin(port, "-f", "raw_json", "list", "queues")
    assert r.returncode == 0, r.stderr
    assert [(q["name"], q["messages"]) for q in json.loads(r.stdout)] == [("adm.q", 2)]
    r = admin(port, "list", "queues")  # the default table view
    assert r.returncode == 0 and "| adm.q " in r.stdout and "| 2 " in r.stdout, r.stdout
    r = admin(port, "-f", "tsv", "list", "exchanges", "name", "type")
    assert r.returncode == 0, r.stderr
    assert "adm.x\tx-consistent-hash" in r.stdout.splitlines()

    r = admin(port, "-f", "raw_json", "get", "queue=adm.q", "count=2", "ackmode=ack_requeue_true")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert [(m["payload"], m["routing_key"], m["exchange"]) for m in got] == [
        ("hello", "k1", "adm.x"),
        ("second", "adm.q", ""),
    ]

    exported = tmp_path / "defs.json"
    r = admin(port, "export", str(exported))
    assert r.returncode == 0, r.stderr
    defs = json.loads(exported.read_text())
    binding = {"source": "adm.x", "vhost": "/", "destination": "adm.q", "destination_type": "queue",
               "routing_key": "2", "arguments": {}}  # fmt: skip
    assert defs["bindings"] == [binding]

    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as fresh:
        fresh_port = int(fresh.broker.management.port)
        r = admin(fresh_port, "import", str(exported))
        assert r.returncode == 0, r.stderr
        status, again, _ = http(f"http://127.0.0.1:{fresh_port}", "GET", "/api/definitions")
        assert status == 200
        assert {k: again[k] for k in ("queues", "exchanges", "bindings")} == {
            k: defs[k] for k in ("queues", "exchanges", "bindings")
        }

    r = admin(port, "declare", "policy", "name=cap", "pattern=^adm", 'definition={"max-length":1}')
    assert r.returncode == 0, r.stderr
    r = admin(port, "-f", "raw_json", "list", "policies")
    assert [p["name"] for p in json.loads(r.stdout)] == ["cap"]
    r = admin(port, "delete", "queue", "name=adm.q")
    assert r.returncode == 0, r.stderr
    r = admin(port, "get", "queue=adm.q")
    assert r.returncode != 0  # 404 -> rabbitmqadmin prints "Not found" / the reason and exits 1


# Fields rabbitmqadmin's default columns and its `get`/`publish` handling read.
READ_FIELDS = {
    "/api/queues": {"vhost", "name", "messages", "durable", "auto_delete", "arguments", "node",
                    "messages_ready", "messages_unacknowledged", "consumers", "exclusive", "type"},
    "/api/exchanges": {"vhost", "name", "type", "durable", "auto_delete", "internal", "arguments"},
    "/api/bindings": {"source", "vhost", "destination", "destination_type", "routing_key", "arguments",
                      "properties_key"},
    "/api/overview": {"rabbitmq_version", "management_version", "node", "cluster_name", "object_totals",
                      "queue_totals"},
}  # fmt: skip


def pick(api: str, path: str, name: str, fields: set[str]) -> dict[str, Any]:
    """The object for `name` at `path`, once it has `fields` (RabbitMQ's queue stats lag ~5 s)."""
    deadline = time.monotonic() + 15
    while True:
        data = http(api, "GET", path)[1]
        if isinstance(data, dict):
            return data
        # the queue, the exchange of the same name, or the binding between them
        one: dict[str, Any] = next(x for x in data if x.get("name", x.get("source")) == name)
        if fields <= set(one) or time.monotonic() > deadline:
            return one
        time.sleep(0.5)


@pytest.mark.live
def test_fields_rabbitmqadmin_reads_match_rabbitmq(port: int) -> None:
    if not rabbitmq_reachable():
        pytest.skip("no reference RabbitMQ on 127.0.0.1:5672")
    base = f"http://127.0.0.1:{port}"
    name = f"adm.cmp.{uuid.uuid4().hex[:8]}"
    body = {"durable": False, "auto_delete": False, "arguments": {"x-max-length": 10}}
    for api in (RABBIT_API, base):
        assert http(api, "PUT", f"/api/queues/%2F/{name}", body)[0] == 201
        assert http(api, "PUT", f"/api/exchanges/%2F/{name}", {"type": "topic", "durable": False})[0] == 201
        binding = {"routing_key": "a.#", "arguments": {"x-note": "n"}}
        assert http(api, "POST", f"/api/bindings/%2F/e/{name}/q/{name}", binding)[0] == 201
    try:
        for path, fields in READ_FIELDS.items():
            live_one = pick(RABBIT_API, path, name, fields)
            our_one = pick(base, path, name, fields)
            assert fields <= set(live_one), path  # the list above is what RabbitMQ really sends
            assert fields <= set(our_one), path
            if path != "/api/overview":
                same = {f: live_one[f] for f in fields if f != "node"}
                assert {f: our_one[f] for f in fields if f != "node"} == same, path
        for verb in ("publish", "get"):
            pub = {"properties": {}, "routing_key": name, "payload": "p", "payload_encoding": "string"}
            get = {"count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"}
            if verb == "publish":
                path, req = "/api/exchanges/%2F/amq.default/publish", pub
            else:
                path, req = f"/api/queues/%2F/{name}/get", get
            answers = [http(api, "POST", path, req) for api in (RABBIT_API, base)]
            (ls, lb, _), (os_, ob, _) = answers
            assert (ls, lb) == (os_, ob), verb
    finally:
        http(RABBIT_API, "DELETE", f"/api/queues/%2F/{name}")
        http(RABBIT_API, "DELETE", f"/api/exchanges/%2F/{name}")
