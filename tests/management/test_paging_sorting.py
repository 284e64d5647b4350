"""List endpoints sort, filter and page as RabbitMQ 3.10.8's management API (compared live).

The same queues and exchanges are declared on both brokers with a unique suffix; the name filter on
that suffix makes the comparison independent of what else the shared RabbitMQ holds.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pika
import pytest

from broker.embedded import BrokerThread
from tests import conftest
from tests.management.test_management_api import http
from tests.management.test_rabbitmqadmin import find_rabbitmqadmin

RABBIT_API = conftest.RABBITMQ_API
QUEUES = ["b-one", "a-two", "C-three", "a-four", "b-five"]


def declare(url: str, suffix: str, *, delete: bool = False) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        ch = conn.channel()
        for i, q in enumerate(QUEUES):
            if delete:
                ch.queue_delete(q + suffix)
                continue
            ch.queue_declare(q + suffix)
            for _ in range(i):
                ch.basic_publish("", q + suffix, b"x")
    finally:
        conn.close()


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerThread]:
    with BrokerThread(port=0, management_port=0) as bt:
        yield bt


@pytest.fixture(scope="module")
def rabbitmq_url_module() -> str:
    """The live RabbitMQ's URL for module-scoped fixtures (skips when it is unreachable)."""
    if not conftest.rabbitmq_reachable():
        pytest.skip("the reference RabbitMQ is not reachable")
    return str(conftest.RABBITMQ_URL)


@pytest.fixture(scope="module")
def both(broker: BrokerThread, rabbitmq_url_module: str) -> Iterator[tuple[str, str]]:
    suffix = "-pg" + uuid.uuid4().hex[:6]
    declare(broker.url, suffix)
    declare(rabbitmq_url_module, suffix)
    try:
        wait_for_counts(suffix)
        yield f"http://127.0.0.1:{broker.broker.management.port}", suffix
    finally:
        declare(rabbitmq_url_module, suffix, delete=True)
        declare(broker.url, suffix, delete=True)


def wait_for_counts(suffix: str, timeout: float = 20.0) -> None:
    """RabbitMQ's management sees a new queue's message count after its next stats emission."""
    wanted = {q + suffix: i for i, q in enumerate(QUEUES)}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = http(RABBIT_API, "GET", f"/api/queues/%2F?columns=name,messages&page=1&name={suffix}")[1]
        if {i["name"]: i.get("messages") for i in body["items"]} == wanted:
            return
        time.sleep(0.2)
    pytest.fail("RabbitMQ's management did not show the queues' counts")


QUERIES = [
    "page=1&page_size=2",
    "page=2&page_size=2",
    "page=3&page_size=2",
    "page=4&page_size=2",
    "page=1&page_size=5",
    "page=2&page_size=5",
    "page=1&page_size=2&sort=name&sort_reverse=true",
    "page=1&sort=messages",
    "page=1&sort=messages&sort_reverse=true",
    "page=1&sort=arguments.nosuch",
    "page=1&page_size=3&use_regex=true&name=^a-",
    "page=1&use_regex=true&name=^A-.*{suffix}$",
    "page=1&name=C-THREE{suffix}",
    "page=1&name=no-such-queue",
    "page=2&name=no-such-queue",
    "page=1&use_regex=false&name=^a-",
]
ERRORS = [
    "page=0",
    "page=-1&page_size=3",
    "page=1&page_size=0",
    "page=1&page_size=501",
    "page=abc",
    "page=1.5",
    "page=1&page_size=x",
    "page=1&use_regex=true&name=(",
    "page=99",
]


def names(body: Any) -> Any:
    """The paged object with item names only, without total_count (the shared RabbitMQ holds
    other queues too: its total is checked apart)."""
    if isinstance(body, dict) and "items" in body:
        return {**body, "items": [i["name"] for i in body["items"]], "total_count": None}
    return body


@pytest.mark.parametrize("query", QUERIES)
def test_paged_queues_as_rabbitmq(both: tuple[str, str], query: str) -> None:
    base, suffix = both
    q = query.replace("{suffix}", suffix)
    if "name=" not in q:
        q += f"&name={suffix}"
    q += "&columns=name,messages"
    ours = http(base, "GET", f"/api/queues/%2F?{q}")
    theirs = http(RABBIT_API, "GET", f"/api/queues/%2F?{q}")
    assert (ours[0], names(ours[1])) == (theirs[0], names(theirs[1]))
    assert list(ours[1]) == list(theirs[1])  # the paged object's field order too
    if ours[0] == 200:
        assert ours[1]["total_count"] == len(QUEUES) and theirs[1]["total_count"] >= len(QUEUES)


@pytest.mark.parametrize("query", ERRORS)
@pytest.mark.parametrize("path", ["/api/queues", "/api/exchanges/%2F", "/api/vhosts", "/api/connections"])
def test_paging_errors_as_rabbitmq(broker: BrokerThread, rabbitmq_url: str, path: str, query: str) -> None:
    if query == "page=99" and path != "/api/vhosts":
        pytest.skip("the shared RabbitMQ's other objects change the count in the text")
    if "name=(" in query and path not in ("/api/vhosts", "/api/exchanges/%2F"):
        pytest.skip("a bad pattern is refused only when there are items to run it on")
    base = f"http://127.0.0.1:{broker.broker.management.port}"
    ours = http(base, "GET", f"{path}?{query}")
    theirs = http(RABBIT_API, "GET", f"{path}?{query}")
    assert ours[:2] == theirs[:2]


def test_unpaged_lists_ignore_page_and_name(broker: BrokerThread, rabbitmq_url: str) -> None:
    base = f"http://127.0.0.1:{broker.broker.management.port}"
    for path in ("/api/users?page=1", "/api/exchanges/%2F?name=amq.top&columns=name"):
        ours, theirs = http(base, "GET", path), http(RABBIT_API, "GET", path)
        assert ours[0] == theirs[0] == 200
        assert isinstance(ours[1], list) and isinstance(theirs[1], list)
    path = "/api/exchanges/%2F?sort=type&sort_reverse=true&columns=name,type&name=amq"
    ours = http(base, "GET", path)[1]
    # amq.rabbitmq.event exists there only while rabbitmq_event_exchange runs (off in this broker)
    theirs = [
        x
        for x in http(RABBIT_API, "GET", path)[1]
        if (x["name"].startswith("amq.") or not x["name"]) and x["name"] != "amq.rabbitmq.event"
    ]
    assert ours == theirs


def test_empty_connections_page_keeps_rabbitmq_field_order(broker: BrokerThread, rabbitmq_url: str) -> None:
    base = f"http://127.0.0.1:{broker.broker.management.port}"
    ours = http(base, "GET", "/api/channels?page=1&name=no-such-channel")
    theirs = http(RABBIT_API, "GET", "/api/channels?page=1&name=no-such-channel")
    assert ours[:2] == theirs[:2] and list(ours[1]) == list(theirs[1])


def test_rabbitmqadmin_lists_sorted(both: tuple[str, str]) -> None:
    base, suffix = both
    port = base.rsplit(":", 1)[1]
    cmd = [sys.executable, find_rabbitmqadmin(), "-H", "127.0.0.1", "-P", port, "-u", "guest", "-p", "guest",
           "-f", "tsv", "-S", "messages", "-R", "list", "queues", "name", "messages"]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    rows = [line.split("\t") for line in r.stdout.splitlines()[1:] if suffix in line]
    assert rows == [[q + suffix, str(i)] for i, q in reversed(list(enumerate(QUEUES)))]
