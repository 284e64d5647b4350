"""The emulated RabbitMQ cluster: a set of node names and which one this broker "is".

hashbroker is one process, but the sharding plugin's behaviour depends on the cluster: shard queues
are named after nodes (`sharding: X - rabbit@a - 0`), every running node gets `shards-per-node`
shards, and a consumer on the pseudo-queue is attached only to shards of the node it is connected
to. `Cluster` holds that state so `broker.entities.sharding` can compute names and selections without I/O.

Node names are validated as Erlang distribution names (`name@host`): RabbitMQ's own are
`rabbit@<host>`, but any `name@host` is a valid node, so the name part is not forced to `rabbit`.
Node order is by name bytes: RabbitMQ walks `rabbit_mnesia:status()`'s running nodes (an order we
cannot observe with one real node), and a fixed order keeps binding order, and so the x-consistent-hash
ring, reproducible.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

DEFAULT_NODE = "rabbit@localhost"
# name@host: an Erlang atom-ish name part, host part letters/digits/-/./_ (short or long names).
_NODE_RE = re.compile(r"^[A-Za-z0-9_\-]+@[A-Za-z0-9_\-.]+$")


class ClusterError(ValueError):
    """A node name that is not `name@host`, removing the local node, or an unknown node."""


def validate_node_name(name: str) -> str:
    """Return `name` if it is a `name@host` node name, else raise ClusterError."""
    if not isinstance(name, str) or not _NODE_RE.match(name) or len(name.encode()) > 255:
        raise ClusterError(f"invalid node name {name!r}: expected name@host, e.g. rabbit@a")
    return name


class Cluster:
    """Running nodes of the emulated cluster plus the local node (the one clients talk to)."""

    def __init__(self, nodes: Iterable[str] = (DEFAULT_NODE,), local: str | None = None) -> None:
        names = [validate_node_name(n) for n in nodes]
        if not names:
            raise ClusterError("a cluster needs at least one node")
        self._nodes: set[str] = set(names)
        self._local = validate_node_name(local) if local is not None else names[0]
        if self._local not in self._nodes:
            raise ClusterError(f"local node {self._local} is not in the cluster")

    @property
    def local(self) -> str:
        """The node consume/get on a sharded pseudo-queue is served from."""
        return self._local

    @property
    def nodes(self) -> list[str]:
        """Running nodes, ordered by name bytes (the order shards are declared and bound in)."""
        return sorted(self._nodes, key=lambda n: n.encode())

    def __contains__(self, node: object) -> bool:
        return node in self._nodes

    def __len__(self) -> int:
        return len(self._nodes)

    def add(self, node: str) -> bool:
        """Add a running node; True if it is new (the caller must then ensure its shards)."""
        validate_node_name(node)
        if node in self._nodes:
            return False
        self._nodes.add(node)
        return True

    def remove(self, node: str) -> None:
        """Stop a node. Its shard queues stay (as on RabbitMQ, they are down, not deleted)."""
        if node not in self._nodes:
            raise ClusterError(f"{node} is not a cluster node")
        if node == self._local:
            raise ClusterError(f"{node} is the local node and cannot be removed")
        self._nodes.discard(node)

    def set_local(self, node: str) -> None:
        """Pretend clients are connected to `node` (must be running)."""
        if node not in self._nodes:
            raise ClusterError(f"{node} is not a cluster node")
        self._local = node
