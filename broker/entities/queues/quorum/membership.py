"""Where a quorum queue's replicas and leader go on the emulated cluster (rabbit_queue_location).

Nothing of Raft is emulated: membership is decided once, when the queue is declared, and kept as
RabbitMQ keeps the node list it stored then (management `members` is not reordered later).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: rabbit's quorum_cluster_size default: the group size without x-quorum-initial-group-size.
DEFAULT_GROUP_SIZE = 3
#: Leader locators that pick the member leading the fewest queues (balanced, and the deprecated ones).
BALANCED = frozenset({"balanced", "random", "least-leaders"})


def place(
    nodes: Sequence[str],
    declaring: str,
    group_size: int | None,
    locator: str,
    replicas: Mapping[str, int],
    leaders: Mapping[str, int],
) -> tuple[list[str], str]:
    """(members, leader) of a new quorum queue.

    `nodes`: the running nodes; `declaring`: the node the client declared it on; `replicas` /
    `leaders`: how many quorum replicas / leaders each node holds already. A cluster with at most
    `group_size` nodes puts a member on every node; a larger one takes the declaring node plus the
    nodes with the fewest replicas (ties in node order). The leader is the declaring node
    (client-local, the default) or the member leading the fewest queues.
    """
    size = group_size if group_size is not None and group_size > 0 else DEFAULT_GROUP_SIZE
    running = list(nodes) if declaring in nodes else [declaring, *nodes]
    if len(running) <= size:
        members = running
    else:
        others = sorted((n for n in running if n != declaring), key=lambda n: (replicas.get(n, 0), n))
        members = [declaring, *others[: size - 1]]
    if locator in BALANCED:
        leader = min(members, key=lambda n: (leaders.get(n, 0), members.index(n)))
    else:
        leader = declaring if declaring in members else members[0]
    return members, leader
