"""`hashbroker ctl` prints what rabbitmqctl prints: banner lines, header row, tab-separated cells.

The same topology is declared on hashbroker (its default vhost named like the live one) and, in a
throw-away vhost, on the reference RabbitMQ; both tools' outputs are compared line by line (rows as
sets: neither broker promises an order).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from urllib.parse import quote

import pika
import pytest

from broker.cli import ctl
from broker.embedded import BrokerThread
from tests.differential_support import rabbitmqctl_vhost


def declare(url: str) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        ch = conn.channel()
        ch.exchange_declare("hx", "x-consistent-hash", arguments={"hash-header": "h"})
        ch.exchange_declare("hd", "headers", durable=True)
        ch.queue_declare("qa", durable=True, arguments={"x-max-length": 50})
        ch.queue_declare("qb")
        ch.queue_bind("qa", "hx", "3")
        ch.queue_bind("qb", "hx", "1")
        ch.queue_bind("qa", "hd", "", arguments={"x-match": "all", "a": 1})
        for _ in range(4):
            ch.basic_publish("", "qa", b"m")
        ch.basic_publish("", "qb", b"m")
    finally:
        conn.close()


@pytest.fixture
def vhost() -> Iterator[str]:
    """A throw-away vhost on the reference RabbitMQ with the topology (skips without rabbitmqctl)."""
    with rabbitmqctl_vhost("hbctl") as name:
        declare(f"amqp://guest:guest@127.0.0.1:5672/{quote(name, safe='')}")
        yield name


@pytest.fixture
def hb(vhost: str) -> Iterator[str]:
    """hashbroker whose one vhost has the live vhost's name; yields the management URL."""
    with BrokerThread(host="127.0.0.1", port=0, management_port=0, default_vhost=vhost) as b:
        declare(b.url)
        yield f"http://127.0.0.1:{b.broker.management.port}"


def rabbitmqctl(*args: str) -> tuple[int, str]:
    r = subprocess.run(["rabbitmqctl", *args], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout


def hashbroker_ctl(capsys: pytest.CaptureFixture[str], url: str, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = ctl.run(["--url", url, *args])
    return rc, capsys.readouterr().out


def split(out: str, banner: int, header: bool = True) -> tuple[list[str], str | None, set[str]]:
    """(banner lines, header row or None, data rows as a set)."""
    lines = out.splitlines()
    rest = lines[banner:]
    if not header:
        return lines[:banner], None, set(rest)
    return lines[:banner], (rest[0] if rest else None), set(rest[1:])


CASES = [
    (("list_queues",), 2),
    (("list_queues", "name", "messages", "consumers", "durable", "arguments", "messages_ready"), 2),
    (("list_queues", "-q"), 0),
    (("list_queues", "--no-table-headers", "name", "messages"), 2),
    (("list_exchanges", "name", "type", "durable", "auto_delete", "internal", "arguments"), 1),
    (("list_bindings",), 1),
]


@pytest.mark.live
@pytest.mark.parametrize(("args", "banner"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_table_output_matches_rabbitmqctl(
    capsys: pytest.CaptureFixture[str], vhost: str, hb: str, args: tuple[str, ...], banner: int
) -> None:
    live_rc, live = rabbitmqctl(*args, "-p", vhost)
    rc, ours = hashbroker_ctl(capsys, hb, *args, "-p", vhost)
    assert (rc, live_rc) == (0, 0)
    header = "--no-table-headers" not in args
    live_head, live_cols, live_rows = split(live, banner, header)
    head, cols, rows = split(ours, banner, header)
    assert cols == live_cols
    assert head == live_head
    # amq.rabbitmq.trace exists on RabbitMQ only (hashbroker has no firehose yet): compare without it
    trace = "amq.rabbitmq.trace\t"
    assert {r for r in rows if not r.startswith(trace)} == {r for r in live_rows if not r.startswith(trace)}


@pytest.mark.live
@pytest.mark.parametrize("verb", ["list_queues", "list_bindings", "list_exchanges"])
def test_json_formatter_matches_rabbitmqctl(
    capsys: pytest.CaptureFixture[str], vhost: str, hb: str, verb: str
) -> None:
    _, live = rabbitmqctl(verb, "-p", vhost, "--formatter", "json")
    _, ours = hashbroker_ctl(capsys, hb, verb, "-p", vhost, "--formatter", "json")
    assert ours.startswith("[\n{") and ours.endswith("}\n]\n")
    assert all(line.startswith(",{") for line in ours.splitlines()[2:-1])  # rabbitmqctl's layout
    live_rows = [r for r in json.loads(live) if r.get("name") != "amq.rabbitmq.trace"]
    our_rows = [r for r in json.loads(ours) if r.get("name") != "amq.rabbitmq.trace"]
    key = json.dumps
    assert sorted(our_rows, key=key) == sorted(live_rows, key=key)


@pytest.mark.slow
@pytest.mark.live
def test_policies_and_consumers_match_rabbitmqctl(
    capsys: pytest.CaptureFixture[str], vhost: str, hb: str
) -> None:
    set_args = ("set_policy", "cap", "^qz$", '{"max-length":5}', "--apply-to", "queues", "--priority", "3")
    assert rabbitmqctl(*set_args, "-p", vhost) == hashbroker_ctl(capsys, hb, *set_args, "-p", vhost)
    for args in (("list_policies",), ("list_policies", "--formatter", "json")):
        assert rabbitmqctl(*args, "-p", vhost) == hashbroker_ctl(capsys, hb, *args, "-p", vhost)
    assert rabbitmqctl("clear_policy", "cap", "-p", vhost) == hashbroker_ctl(
        capsys, hb, "clear_policy", "cap", "-p", vhost
    )
    for args in (("list_policies",), ("list_policies", "--formatter", "json"), ("list_consumers",)):
        assert rabbitmqctl(*args, "-p", vhost) == hashbroker_ctl(capsys, hb, *args, "-p", vhost)
    for args in (("purge_queue", "qb"), ("delete_queue", "qb")):
        assert rabbitmqctl(*args, "-p", vhost) == hashbroker_ctl(capsys, hb, *args, "-p", vhost)


def test_verbs_against_hashbroker(capsys: pytest.CaptureFixture[str], tmp_path: object) -> None:
    """Runs everywhere (no reference broker needed): every verb, exit codes, definitions files."""
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        url = f"http://127.0.0.1:{b.broker.management.port}"
        declare(b.url)
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        ch = conn.channel()
        ch.basic_consume("qb", lambda *a: None)
        rc, out = hashbroker_ctl(capsys, url, "list_connections")
        assert rc == 0 and out.splitlines()[:2] == [
            "Listing connections ...",
            "user\tpeer_host\tpeer_port\tstate",
        ]
        assert out.splitlines()[2].startswith("guest\t127.0.0.1\t")
        rc, out = hashbroker_ctl(capsys, url, "list_consumers", "-q")
        assert rc == 0 and out.splitlines()[1].startswith("qb\t<")
        conn.close()
        path = f"{tmp_path}/defs.json"
        assert hashbroker_ctl(capsys, url, "export_definitions", path)[0] == 0
        with open(path) as fh:
            assert {q["name"] for q in json.load(fh)["queues"]} == {"qa", "qb"}
        assert hashbroker_ctl(capsys, url, "delete_queue", "qa") == (
            0,
            "Deleting queue 'qa' on vhost '/' ...\nQueue was successfully deleted with 4 ready messages\n",
        )
        assert hashbroker_ctl(capsys, url, "import_definitions", path)[0] == 0
        assert hashbroker_ctl(capsys, url, "list_queues", "-q", "name")[1] == "name\nqa\nqb\n"
        assert hashbroker_ctl(capsys, url, "export_definitions", "-")[1].startswith(
            '{"rabbit_version":"3.10.8"'
        )
        assert hashbroker_ctl(capsys, url, "add_vhost", "/")[0] == 0
        assert hashbroker_ctl(capsys, url, "set_permissions", "guest", ".*", ".*", ".*")[0] == 0
        assert hashbroker_ctl(capsys, url, "add_user", "guest", "x")[0] == 70
        assert hashbroker_ctl(capsys, url, "add_user", "alice", "x")[0] == 0
        assert hashbroker_ctl(capsys, url, "add_vhost", "other")[0] == 0
        assert (
            hashbroker_ctl(capsys, url, "set_permissions", "-p", "nosuch", "alice", ".*", ".*", ".*")[0] == 69
        )
        assert hashbroker_ctl(capsys, url, "set_permissions", "-p", "other", "bob", ".*", ".*", ".*")[0] == 67
        assert hashbroker_ctl(capsys, url, "delete_queue", "nope")[0] == 64
        assert hashbroker_ctl(capsys, url, "clear_policy", "nope")[0] == 69
        assert hashbroker_ctl(capsys, url, "list_queues", "bogus")[0] == 64
        assert hashbroker_ctl(capsys, url, "list_queues", "-p", "nosuch")[1] == (
            "Timeout: 60.0 seconds ...\nListing queues for vhost nosuch ...\n")  # fmt: skip
    assert hashbroker_ctl(capsys, url, "list_queues")[0] == 69  # broker gone: unreachable


def test_add_parser_wires_into_an_argparse_cli() -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="hashbroker")
    ctl.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["ctl", "--url", "http://x:1", "list_queues", "name", "-q"])
    assert args.func is ctl.main and args.columns == ["name"] and args.quiet and args.url == "http://x:1"
