"""Quorum queue membership on the emulated cluster: group size, declaring node, leader locators."""

from __future__ import annotations

from typing import Any

from broker.entities.queues.catalog import Queue
from broker.entities.queues.quorum.membership import place
from broker.entities.queues.quorum.queue import QuorumQueue
from broker.entities.vhost import VHost
from tests.unit.entities_support import args, declare, vhost

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
    assert details["members"] == ["rabbit@c", "rabbit@b"]
    assert "online" not in details  # the cluster's to say (management: members on running nodes)
    assert q.info().type == "quorum"


class Placements:
    """A persistence that keeps every queue and records the placements written with its record."""

    def __init__(self) -> None:
        self.written: list[tuple[Any, ...]] = []

    def queue_added(self, vhost: VHost, q: Queue) -> None:
        q.store = self  # type: ignore[assignment]

    def queue_placed(self, vhost: VHost, q: Queue) -> None:
        self.written.append((q.name, list(q.members), q.leader))


def test_a_placement_is_written_with_the_record_and_a_stored_one_is_kept() -> None:
    """`place` writes the members and leader it chose; at boot `restore_placement` gives a quorum
    queue its stored ones as they are (any nodes), and leaves a classic queue without any."""
    kept = Placements()
    v = vhost()
    v.persistence = kept  # type: ignore[assignment]
    q = Queue(
        v, "q", durable=True, exclusive_owner=None, auto_delete=False, arguments=args(x_queue_type="quorum")
    )
    v.add_queue(q)
    q.place(NODES[:3], "rabbit@b", {}, {})
    assert kept.written == [("q", NODES[:3], "rabbit@b")]
    again = Queue(
        v, "r", durable=True, exclusive_owner=None, auto_delete=False, arguments=args(x_queue_type="quorum")
    )
    again.restore_placement(["rabbit@x", "rabbit@y"], "rabbit@y")
    assert (again.members, again.leader) == (["rabbit@x", "rabbit@y"], "rabbit@y")
    classic = declare(v, "classic")
    classic.restore_placement((), "")
    assert (classic.members, classic.leader) == ((), None)
