"""`hashbroker ctl add_node / remove_node / list_nodes` against a running hashbroker."""

from __future__ import annotations

import pika
import pytest

from broker.cli import ctl
from broker.embedded import BrokerThread

X = "hb4.nodes"


def shard(node: str, i: int) -> str:
    return f"sharding: {X} - {node} - {i}"


def run(capsys: pytest.CaptureFixture[str], url: str, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = ctl.run(["--url", url, *args])
    got = capsys.readouterr()
    return rc, got.out, got.err


def test_node_verbs(capsys: pytest.CaptureFixture[str]) -> None:
    with BrokerThread(port=0, management_port=0, nodes=["rabbit@a", "rabbit@b"]) as b:
        url = f"http://127.0.0.1:{b.broker.management.port}"
        conn = pika.BlockingConnection(pika.URLParameters(b.url))
        ch = conn.channel()
        ch.exchange_declare(X, "x-modulus-hash")
        ch.queue_declare("plain")

        assert run(capsys, url, "list_nodes") == (0, "rabbit@a\t(local)\nrabbit@b\n", "")
        rc, out, _ = run(capsys, url, "set_policy", "shard", "^hb4[.]nodes$", '{"shards-per-node": 2}')
        assert rc == 0

        def queues() -> set[str]:
            rc, out, _ = run(capsys, url, "-q", "--no-table-headers", "list_queues", "name")
            assert rc == 0
            return set(out.splitlines())

        before = {shard(n, i) for n in ("rabbit@a", "rabbit@b") for i in range(2)}
        assert {q for q in queues() if q.startswith("sharding: ")} == before

        assert run(capsys, url, "add_node", "rabbit@c") == (
            0,
            'Adding node "rabbit@c" to the emulated cluster ...\n',
            "",
        )
        assert run(capsys, url, "list_nodes")[1] == "rabbit@a\t(local)\nrabbit@b\nrabbit@c\n"
        after = {q for q in queues() if q.startswith("sharding: ")}
        assert after == before | {shard("rabbit@c", 0), shard("rabbit@c", 1)}
        rc, out, _ = run(
            capsys, url, "-q", "--no-table-headers", "list_bindings", "source_name", "destination_name"
        )
        assert f"{X}\t{shard('rabbit@c', 1)}" in out.splitlines()
        # the new shards take part in routing: 1,000 keys reach all six shards
        for n in range(1000):
            ch.basic_publish(X, f"k{n}", b"")
        counts = {q: ch.queue_declare(q, passive=True).method.message_count for q in after}
        assert sum(counts.values()) == 1000 and min(counts.values()) > 0
        # adding a node twice is a no-op; -q drops the banner
        assert run(capsys, url, "-q", "add_node", "rabbit@c") == (0, "", "")

        assert run(capsys, url, "remove_node", "rabbit@c") == (
            0,
            'Removing node "rabbit@c" from the emulated cluster ...\n',
            "",
        )
        assert run(capsys, url, "list_nodes")[1] == "rabbit@a\t(local)\nrabbit@b\n"
        assert {q for q in queues() if q.startswith("sharding: ")} == after  # a node's shards stay

        rc, _out, _err = run(capsys, url, "remove_node", "rabbit@nope")
        assert rc == ctl.EX_UNAVAILABLE
        rc, _out, err = run(capsys, url, "remove_node", "rabbit@a")  # the local node
        assert rc != 0 and "local node" in err
        rc, _out, err = run(capsys, url, "add_node", "no-at-sign")
        assert rc != 0 and "invalid node name" in err
        conn.close()
