"""Quorum queue membership on the emulated cluster: group size, declaring node, leader locators."""

from __future__ import annotations

from broker.entities.quorum_membership import place
from broker.entities.quorum_queue import QuorumQueue
from tests.unit.entities_support import args, vhost

NODES = ["rabbit@a", "rabbit@b", "rabbit@c", "rabbit@d", "rabbit@e"]


def test_small_cluster_puts_a_member_on_every_node_leader_client_local() -> None:
    members, leader = place(NODES[:3], "rabbit@b", None, "client-local", {}, {})
    assert members == NODES[:3] and leader == "rabbit@b"
    members, leader = place(NODES[:1], "rabbit@a", 3, "client-local", {}, {})
    assert members == ["rabbit@a"] and leader == "rabbit@a"


def test_larger_cluster_takes_declaring_node_and_least_loaded_ones() -> None:
    replicas = {"rabbit@a": 4, "rabbit@b": 1, "rabbit@c": 0, "rabbit@d": 2, "rabbit@e": 0}
    members, leader = place(NODES, "rabbit@a", 3, "client-local", replicas, {})
    assert members == ["rabbit@a", "rabbit@c", "rabbit@e"] and leader == "rabbit@a"
    members, _ = place(NODES, "rabbit@d", 1, "client-local", replicas, {})
    assert members == ["rabbit@d"]


def test_balanced_leader_is_the_member_leading_fewest_queues() -> None:
    leaders = {"rabbit@a": 3, "rabbit@b": 1, "rabbit@c": 2}
    for locator in ("balanced", "least-leaders", "random"):
        assert place(NODES[:3], "rabbit@a", None, locator, {}, leaders)[1] == "rabbit@b"


def test_queue_reports_its_placement_in_the_read_model() -> None:
    from broker.entities.queue import Queue

    v = vhost()
    q = Queue(
        v,
        "q",
        durable=True,
        exclusive_owner=None,
        auto_delete=False,
        arguments=args(x_queue_type="quorum", x_quorum_initial_group_size=2),
    )
    assert isinstance(q, QuorumQueue)
    assert q.info().details["leader"] is None and q.info().details["members"] == []
    q.place(NODES[:3], "rabbit@c", {"rabbit@a": 1}, {})
    details = q.info().details
    assert details["leader"] == "rabbit@c"
    assert details["members"] == ["rabbit@c", "rabbit@b"] == details["online"]
    assert q.info().type == "quorum"
