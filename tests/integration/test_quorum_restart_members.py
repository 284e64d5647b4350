"""A quorum queue's members and leader across a hashbroker restart (data_dir store): RabbitMQ keeps
the node list and leader in the queue's record, so the management API (`leader`, `members`,
`online`) and `hashbroker ctl list_queues` show after a restart what they showed before, even where
placing the queue again would choose differently (other queues deleted since, so the balance
changed; the broker restarted with other `--nodes`). `online` lists only the members whose node
runs. A store written before placements were kept places its queues at boot, once."""

from __future__ import annotations

import base64
import contextlib
import json
import sqlite3
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pika
import pytest

from broker.cli import ctl
from broker.embedded import BrokerThread

NODES = ["rabbit@a", "rabbit@b", "rabbit@c", "rabbit@d", "rabbit@e"]
QQ = {"x-queue-type": "quorum"}


@contextlib.contextmanager
def broker(data_dir: Path, nodes: list[str]) -> Iterator[BrokerThread]:
    with BrokerThread(host="127.0.0.1", port=0, management_port=0, data_dir=str(data_dir), nodes=nodes) as b:
        yield b


def mgmt_url(b: BrokerThread) -> str:
    return f"http://127.0.0.1:{b.broker.management.port}"


def membership(b: BrokerThread, name: str) -> dict[str, Any]:
    """The queue's membership fields as GET /api/queues/%2F/<name> shows them."""
    req = urllib.request.Request(f"{mgmt_url(b)}/api/queues/%2F/{urllib.parse.quote(name, safe='')}")
    req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
    with urllib.request.urlopen(req, timeout=10) as resp:
        q = json.load(resp)
    return {k: q[k] for k in ("leader", "node", "members", "online")}


def declare(b: BrokerThread, *queues: tuple[str, dict[str, Any]]) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    try:
        ch = conn.channel()
        for name, extra in queues:
            ch.queue_declare(name, durable=True, arguments={**QQ, **extra})
    finally:
        conn.close()


def delete(b: BrokerThread, name: str) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    try:
        conn.channel().queue_delete(name)
    finally:
        conn.close()


def ctl_rows(capsys: pytest.CaptureFixture[str], b: BrokerThread) -> dict[str, tuple[Any, ...]]:
    """`hashbroker ctl list_queues name leader members online --formatter json`, by queue."""
    capsys.readouterr()
    args = ["--url", mgmt_url(b), "list_queues", "name", "leader", "members", "online", "--formatter", "json"]
    assert ctl.run(args) == 0
    rows = json.loads(capsys.readouterr().out)
    return {r["name"]: (r["leader"], r["members"], r["online"]) for r in rows}


@pytest.mark.timeout(120)
def test_members_and_leader_are_those_stored_not_placed_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """m2 was placed beside m1 ([a, d, e]) and m3's balanced leader away from a (b, since a led
    m1 and m2). With m1 deleted, placing them again in record order would give m2 [a, b, c] and m3
    [a, d, e] led by d, and queues declared now land elsewhere too (the probes); after a restart
    with the same nodes both keep their stored placement."""
    with broker(tmp_path, NODES) as b:
        declare(b, ("m1", {}), ("m2", {}), ("m3", {"x-queue-leader-locator": "balanced"}))
        delete(b, "m1")
        before = {n: membership(b, n) for n in ("m2", "m3")}
        before_ctl = ctl_rows(capsys, b)
        declare(b, ("probe", {}), ("probe-balanced", {"x-queue-leader-locator": "balanced"}))
        fresh = {n: membership(b, n) for n in ("probe", "probe-balanced")}
        delete(b, "probe")
        delete(b, "probe-balanced")
    ade = ["rabbit@a", "rabbit@d", "rabbit@e"]
    assert before["m2"] == {"leader": "rabbit@a", "node": "rabbit@a", "members": ade, "online": ade}
    assert (before["m3"]["leader"], before["m3"]["members"]) == (
        "rabbit@b",
        ["rabbit@a", "rabbit@b", "rabbit@c"],
    )
    # what placing a queue now chooses: not what m2 and m3 have
    assert fresh["probe"]["members"] != before["m2"]["members"]
    assert fresh["probe-balanced"]["leader"] != before["m3"]["leader"]
    with broker(tmp_path, NODES) as b:
        after = {n: membership(b, n) for n in ("m2", "m3")}
        after_ctl = ctl_rows(capsys, b)
    assert after == before
    assert after_ctl == before_ctl
    assert after_ctl["m2"] == (
        "rabbit@a",
        ["rabbit@a", "rabbit@d", "rabbit@e"],
        ["rabbit@a", "rabbit@d", "rabbit@e"],
    )


@pytest.mark.timeout(120)
def test_members_on_nodes_that_no_longer_run_stay_members_but_not_online(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Restarted with other `--nodes` (b, d and e gone, f new): the stored members and leader stay,
    `online` lists the running ones; a queue declared now is placed on the running nodes; with
    the original nodes back every member is online again."""
    with broker(tmp_path, NODES) as b:
        declare(b, ("m1", {}), ("m2", {}), ("m3", {"x-queue-leader-locator": "balanced"}))
        before = {n: membership(b, n) for n in ("m1", "m2", "m3")}
    assert before["m3"]["leader"] == "rabbit@b"
    with broker(tmp_path, ["rabbit@a", "rabbit@c", "rabbit@f"]) as b:
        after = {n: membership(b, n) for n in ("m1", "m2", "m3")}
        declare(b, ("m4", {}))
        m4 = membership(b, "m4")
        rows = ctl_rows(capsys, b)
    for name in ("m1", "m2", "m3"):
        assert (after[name]["leader"], after[name]["members"]) == (
            before[name]["leader"],
            before[name]["members"],
        )
    assert after["m1"]["online"] == ["rabbit@a", "rabbit@c"]
    assert after["m2"]["online"] == ["rabbit@a"]
    assert after["m3"]["online"] == ["rabbit@a", "rabbit@c"] and after["m3"]["leader"] == "rabbit@b"
    assert rows["m3"] == ("rabbit@b", ["rabbit@a", "rabbit@b", "rabbit@c"], ["rabbit@a", "rabbit@c"])
    assert m4["members"] == ["rabbit@a", "rabbit@c", "rabbit@f"] == m4["online"]
    with broker(tmp_path, NODES) as b:
        again = {n: membership(b, n) for n in ("m1", "m2", "m3", "m4")}
    assert {n: again[n] for n in ("m1", "m2", "m3")} == before
    assert (again["m4"]["leader"], again["m4"]["members"]) == (m4["leader"], m4["members"])
    assert again["m4"]["online"] == ["rabbit@a", "rabbit@c"]  # f is not running now


@pytest.mark.timeout(120)
def test_a_store_written_before_members_were_kept_places_its_queues_once(tmp_path: Path) -> None:
    """A data directory whose `queues` table has no member columns (the layout schema version 1
    shipped with) opens; its quorum queue is placed at boot as a declaration would place it, and
    that placement is written, so a restart with other nodes keeps it."""
    from amqpwire.fields import Field, FieldTable
    from broker.store.sqlite.schema import STORE_FILE, create_schema

    path = tmp_path / STORE_FILE
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    create_schema(conn, path)
    assert "members" not in {r[1] for r in conn.execute("PRAGMA table_info(queues)")}
    qargs = FieldTable([("x-queue-type", Field("longstr", b"quorum"))]).encode()
    conn.execute("INSERT INTO vhosts (name, description, tags) VALUES (?, '', '[]')", (b"/",))
    conn.execute("INSERT INTO queues (vhost, name, durable, exclusive, auto_delete, arguments) "
                 "VALUES (?, ?, 1, 0, 0, ?)", (b"/", b"old", qargs))  # fmt: skip
    conn.close()
    with broker(tmp_path, NODES) as b:
        first = membership(b, "old")
    assert first["members"] == ["rabbit@a", "rabbit@b", "rabbit@c"] and first["leader"] == "rabbit@a"
    with broker(tmp_path, ["rabbit@a", "rabbit@d", "rabbit@e", "rabbit@f"]) as b:
        second = membership(b, "old")
    assert (second["leader"], second["members"], second["online"]) == (
        "rabbit@a", ["rabbit@a", "rabbit@b", "rabbit@c"], ["rabbit@a"]
    )  # fmt: skip
