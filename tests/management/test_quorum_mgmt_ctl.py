"""`hashbroker ctl list_queues` for quorum queues prints what rabbitmqctl 3.10.8 prints: `type`,
`leader`, `members`, `online` ("" for classic queues, node names for quorum ones), `exclusive` and
the other classic-only items as "", arguments in declaration order. Compared with the recording of
`rabbitmqctl list_queues ... --formatter json` (scenario qs_ctl_list_queues) and, live, with
rabbitmqctl's table and JSON output on a throw-away vhost of the reference RabbitMQ."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pika
import pytest

from broker.cli import ctl
from broker.embedded import BrokerThread
from tests.differential_support import rabbitmqctl_vhost
from tests.qs_scenarios import CTL_COLUMNS, recorded

RECORDED: dict[str, Any] = recorded()["qs_ctl_list_queues"]

#: Columns that do not lag on RabbitMQ (its message and consumer columns come from periodic stats).
STATIC_COLUMNS = [
    "name", "type", "durable", "auto_delete", "exclusive", "arguments", "leader", "members", "online",
    "policy", "state", "exclusive_consumer_tag", "head_message_timestamp", "slave_pids",
    "messages_persistent", "disk_reads",
]  # fmt: skip


def declare(url: str, names: dict[str, str]) -> pika.BlockingConnection:
    """A classic queue, a quorum queue with 2 ready and 1 unacked message (consumer open)."""
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.confirm_delivery()
    ch.queue_declare(names["classic"], durable=True, arguments={"x-max-length": 5, "x-overflow": "drop-head"})
    ch.queue_declare(
        names["quorum"], durable=True, arguments={"x-queue-type": "quorum", "x-delivery-limit": 3}
    )
    for name in names.values():
        for body in (b"a", b"b", b"c"):
            ch.basic_publish("", name, body)
    c = conn.channel()
    c.basic_qos(prefetch_count=1)
    got: list[bytes] = []
    c.basic_consume(names["quorum"], lambda _c, _m, _p, body: got.append(body))
    deadline = time.monotonic() + 10
    while not got and time.monotonic() < deadline:
        conn.process_data_events(0.1)
    return conn


def hashbroker_ctl(capsys: pytest.CaptureFixture[str], url: str, *args: str) -> str:
    capsys.readouterr()
    assert ctl.run(["--url", url, *args]) == 0
    return capsys.readouterr().out


def scrub(rows: list[dict[str, Any]], names: dict[str, str], node: str) -> dict[str, dict[str, Any]]:
    """Rows by kind, the queue names and the node name replaced as the recording has them."""
    text = json.dumps(rows)
    for kind, name in names.items():
        text = text.replace(json.dumps(name), json.dumps(f"<{kind}>"))
    text = text.replace(json.dumps(node), json.dumps("<node0>"))
    by_name = {r["name"]: r for r in json.loads(text)}
    return {kind: by_name[f"<{kind}>"] for kind in names}


@pytest.fixture
def hb() -> Iterator[BrokerThread]:
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        yield b


@pytest.mark.timeout(60)
def test_list_queues_json_matches_recording(capsys: pytest.CaptureFixture[str], hb: BrokerThread) -> None:
    names = {"classic": "qctl-classic", "quorum": "qctl-quorum"}
    conn = declare(hb.url, {"classic": names["classic"], "quorum": names["quorum"]})
    try:
        mgmt = f"http://127.0.0.1:{hb.broker.management.port}"
        out = hashbroker_ctl(capsys, mgmt, "list_queues", *CTL_COLUMNS, "--formatter", "json", "--quiet")
        node = hb.broker.cluster.local
        rows = scrub(json.loads(out), names, node)
    finally:
        conn.close()
    # the recording's classic queue had no arguments: compare it without them
    assert {k: v for k, v in rows["classic"].items() if k != "arguments"} == {
        k: v for k, v in RECORDED["classic"].items() if k != "arguments"
    }
    assert rows["classic"]["arguments"] == [
        ["x-max-length", "signedint", 5],
        ["x-overflow", "longstr", "drop-head"],
    ]
    assert rows["quorum"] == RECORDED["quorum"]


@pytest.fixture
def live_vhost() -> Iterator[str]:
    with rabbitmqctl_vhost("qctl") as name:
        yield name


@pytest.mark.live
@pytest.mark.timeout(120)
@pytest.mark.parametrize("formatter", ["table", "json"])
def test_list_queues_matches_rabbitmqctl(
    capsys: pytest.CaptureFixture[str], live_vhost: str, formatter: str
) -> None:
    names = {"classic": "qctl-classic", "quorum": "qctl-quorum"}
    fmt = ["--formatter", "json"] if formatter == "json" else []
    args = ["list_queues", "-p", live_vhost, *STATIC_COLUMNS, *fmt, "--quiet"]
    from urllib.parse import quote

    conn = declare(f"amqp://guest:guest@127.0.0.1:5672/{quote(live_vhost, safe='')}", names)
    try:
        r = subprocess.run(["rabbitmqctl", *args], capture_output=True, text=True, timeout=60, check=True)
        rabbit_node = "rabbit@localhost"
        expected = r.stdout
    finally:
        conn.close()
    with BrokerThread(host="127.0.0.1", port=0, management_port=0, default_vhost=live_vhost) as b:
        conn = declare(b.url, names)
        try:
            got = hashbroker_ctl(capsys, f"http://127.0.0.1:{b.broker.management.port}", *args)
        finally:
            conn.close()
        node = b.broker.cluster.local
    expected = expected.replace(rabbit_node, "<node>")
    got = got.replace(node, "<node>")
    if formatter == "json":
        assert sorted(json.loads(got), key=str) == sorted(json.loads(expected), key=str)
    else:
        assert sorted(got.splitlines()) == sorted(expected.splitlines())
