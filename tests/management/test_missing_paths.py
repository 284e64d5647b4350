"""Management paths RabbitMQ 3.10.8 answers that hashbroker used to 404: the node's metadata,
connections and channels by name (closing a connection with X-Reason), /cli/rabbitmqadmin; each
compared with the live RabbitMQ where both can be put in the same state.
"""

from __future__ import annotations

import base64
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pika
import pika.exceptions
import pytest

from broker.embedded import BrokerThread
from tests import conftest
from tests.management.test_management_api import http
from tests.management_support import mgmt_base

RABBIT_API = conftest.RABBITMQ_API


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerThread]:
    with BrokerThread(port=0, management_port=0) as bt:
        yield bt


@pytest.mark.parametrize(
    "path",
    [
        "/api/auth",
        "/api/feature-flags",
        "/api/topic-permissions",
        "/api/users/guest/topic-permissions",
        "/api/vhosts/%2F/topic-permissions",
        "/api/users/no-such-user/topic-permissions",
        "/api/user-limits/guest",
        "/api/user-limits/no-such-user",
        "/api/vhost-limits/%2F",
        "/api/vhost-limits/no-such-vhost",
        "/api/global-parameters/no-such-parameter",
        "/api/connections/no-such-connection",
        "/api/connections/no-such-connection?page=0",
        "/api/channels/no-such-channel?page=abc",
        "/api/vhosts/no-such-vhost/connections",
        "/api/vhosts/no-such-vhost/channels",
        "/api/channels/no-such-channel",
    ],
)
def test_same_answer_as_rabbitmq(broker: BrokerThread, rabbitmq_url: str, path: str) -> None:
    ours = http(mgmt_base(broker), "GET", path)
    theirs = http(RABBIT_API, "GET", path)
    assert ours[:2] == theirs[:2]


def test_shapes_as_rabbitmq(broker: BrokerThread, rabbitmq_url: str) -> None:
    for path in ("/api/extensions", "/api/vhost-limits", "/api/user-limits"):
        ours, theirs = http(mgmt_base(broker), "GET", path), http(RABBIT_API, "GET", path)
        assert ours[0] == theirs[0] == 200 and isinstance(ours[1], list) and isinstance(theirs[1], list)
    ours, theirs = (
        http(mgmt_base(broker), "GET", "/api/global-parameters"),
        http(RABBIT_API, "GET", "/api/global-parameters"),
    )
    assert [p["name"] for p in ours[1]] == [p["name"] for p in theirs[1]] == ["internal_cluster_id"]
    assert ours[1][0]["value"].startswith("rabbitmq-cluster-id-")
    path = "/api/global-parameters/internal_cluster_id"
    ours, theirs = http(mgmt_base(broker), "GET", path), http(RABBIT_API, "GET", path)
    assert ours[0] == theirs[0] == 200 and list(ours[1]) == list(theirs[1]) == ["value", "name"]
    # /api/auth needs no login; the others refuse a management-only user as RabbitMQ does
    assert (
        http(mgmt_base(broker), "GET", "/api/auth", auth=None)[:2]
        == http(RABBIT_API, "GET", "/api/auth", auth=None)[:2]
    )


def test_cli_rabbitmqadmin(broker: BrokerThread, rabbitmq_url: str) -> None:
    with urllib.request.urlopen(mgmt_base(broker) + "/cli/rabbitmqadmin", timeout=10) as resp:
        ours = resp.read()
        assert resp.headers["content-type"] == "application/octet-stream"
    with urllib.request.urlopen(RABBIT_API + "/cli/rabbitmqadmin", timeout=10) as resp:
        theirs = resp.read()
    # the same script; the machine's packaged copy may differ in its first line (#! interpreter)
    assert ours.split(b"\n", 1)[1] == theirs.split(b"\n", 1)[1]


def connection_named(api: str, client_name: str, timeout: float = 20.0) -> dict[str, Any]:
    """The connection whose client named itself `client_name` (RabbitMQ lists it after its stats)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in http(api, "GET", "/api/connections")[1]:
            if c.get("user_provided_name") == client_name:
                return dict(c)
        time.sleep(0.2)
    raise AssertionError(f"no connection {client_name} in {api}")


def close_through_api(amqp_url: str, api: str, reason: str | None) -> tuple[Any, ...]:
    client_name = "close-me-" + uuid.uuid4().hex[:6]
    params = pika.URLParameters(amqp_url)
    params.client_properties = {"connection_name": client_name}
    conn = pika.BlockingConnection(params)
    ch = conn.channel()
    name = connection_named(api, client_name)["name"]
    quoted = urllib.parse.quote(name, safe="")
    status, body, _ = http(api, "GET", f"/api/connections/{quoted}")
    assert status == 200 and body["name"] == name and body["user_provided_name"] == client_name
    chans = http(api, "GET", f"/api/connections/{quoted}/channels")
    assert chans[0] == 200
    req = urllib.request.Request(api + f"/api/connections/{quoted}", method="DELETE")
    req.add_header("authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
    if reason is not None:
        req.add_header("X-Reason", reason)
    with urllib.request.urlopen(req, timeout=10) as resp:
        deleted = resp.status
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            conn.process_data_events(0.1)
        raise AssertionError("the connection was not closed")
    except pika.exceptions.ConnectionClosedByBroker as exc:
        closed = (exc.reply_code, exc.reply_text)
    assert not ch.is_open
    return deleted, closed


@pytest.mark.parametrize("reason", ["bye from the test", None])
def test_delete_connection_closes_it_as_rabbitmq(
    broker: BrokerThread, rabbitmq_url: str, reason: str | None
) -> None:
    ours = close_through_api(broker.url, mgmt_base(broker), reason)
    theirs = close_through_api(rabbitmq_url, RABBIT_API, reason)
    assert ours == theirs
    assert ours[1][0] == 320


def test_channel_by_name(broker: BrokerThread) -> None:
    params = pika.URLParameters(broker.url)
    params.client_properties = {"connection_name": "chan-by-name"}
    conn = pika.BlockingConnection(params)
    try:
        conn.channel()
        name = connection_named(mgmt_base(broker), "chan-by-name")["name"]
        quoted = urllib.parse.quote(f"{name} (1)", safe="")
        status, body, _ = http(mgmt_base(broker), "GET", f"/api/channels/{quoted}")
        assert status == 200 and body["number"] == 1 and body["connection_details"]["name"] == name
        chans = http(
            mgmt_base(broker), "GET", f"/api/connections/{urllib.parse.quote(name, safe='')}/channels"
        )[1]
        assert [c["number"] for c in chans] == [1]
        in_vhost = http(mgmt_base(broker), "GET", "/api/vhosts/%2F/connections")[1]
        assert name in [c["name"] for c in in_vhost] and isinstance(in_vhost, list)
        assert name in [
            c["connection_details"]["name"]
            for c in http(mgmt_base(broker), "GET", "/api/vhosts/%2F/channels")[1]
        ]
    finally:
        conn.close()


NODE_KEYS_LEFT_OUT = {
    # Erlang VM and RabbitMQ internals hashbroker has no counterpart for
    *(
        "context_switches",
        "gc_bytes_reclaimed",
        "gc_num",
        "run_queue",
        "proc_used",
        "proc_total",
        "net_ticktime",
    ),
    *("mnesia_disk_tx_count", "mnesia_ram_tx_count", "msg_store_read_count", "msg_store_write_count"),
    *("queue_index_read_count", "queue_index_write_count", "ra_open_file_metrics", "metrics_gc_queue_length"),
    *("io_read_avg_time", "io_read_bytes", "io_read_count", "io_reopen_count", "io_seek_avg_time"),
    *("io_seek_count", "io_sync_avg_time", "io_sync_count", "io_write_avg_time", "io_write_bytes"),
    *("io_write_count", "sockets_used", "sockets_total", "db_dir", "config_files", "log_files"),
    # churn counters and sampled rates hashbroker does not keep for the node
    *("connection_created", "connection_closed", "channel_created", "channel_closed"),
    *("queue_created", "queue_declared", "queue_deleted"),
}


def test_nodes_keys_against_rabbitmq(broker: BrokerThread, rabbitmq_url: str) -> None:
    """Every key of RabbitMQ's node object is there, but those listed as left out."""
    ours = set(http(mgmt_base(broker), "GET", "/api/nodes")[1][0])
    theirs = set(http(RABBIT_API, "GET", "/api/nodes")[1][0])
    missing = {k for k in theirs - ours if not k.endswith("_details")} - NODE_KEYS_LEFT_OUT
    assert missing == set()
    node = http(mgmt_base(broker), "GET", "/api/nodes")[1][0]
    assert node["cluster_links"] == [] and node["contexts"][0]["port"] == str(broker.broker.management.port)
