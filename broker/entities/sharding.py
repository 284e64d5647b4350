"""The rabbitmq_sharding plugin (3.10.8) as pure functions: shard names, shard upkeep, the interceptor.

Why pure: the plugin's behaviour is a handful of decisions (which queues to declare/bind/unbind when
a policy or the cluster changes, which shard a consumer of the pseudo-queue gets, which channel
methods on the pseudo-queue are refused) that can be tested exhaustively against the live broker's
observations without sockets. The broker executes the returned `ShardActions` with its normal
declare/bind code and calls `rewrite_queue_method` from its channel before handling the methods the
plugin intercepts.

Source: deps/rabbitmq_sharding/src/{rabbit_sharding_util,rabbit_sharding_shard,
rabbit_sharding_interceptor,rabbit_sharding_exchange_decorator}.erl at v3.10.8; every claim below is
observed in tests/data/sharding_observations.json (tools/probe_rabbitmq_sharding.py).

* An exchange is sharded when its effective policy has `shards-per-node` (any exchange type).
* Shard queue name: ``"sharding: " ++ X ++ " - " ++ Node ++ " - " ++ integer_to_list(N)``, N from 0,
  no zero padding. Declared durable iff the exchange is durable, not auto-delete, no arguments; bound
  to the exchange with the policy's `routing-key` (default ""), node by node, N ascending.
* Policy change (decorator policy_changed): routing-key changed -> unbind the old shards (old
  shards-per-node, old key); then declare 0..new-1 and bind them with the new key. Lowering
  shards-per-node removes nothing and unbinds nothing (the upper shards keep receiving messages).
  Policy removed -> unbind 0..old-1 from the exchange; queues and messages stay.
* Interceptor, on the pseudo-queue (a queue name equal to a sharded exchange's name, same vhost):
  basic.consume / basic.get go to the local node's shard with the fewest consumers, ties by name
  bytes ("- 10" before "- 2"); no shard -> 406 "Error finding sharded queue for: <<"X">>".
  queue.declare is rewritten to shard 0 of the local node (the declare-ok names that queue, so
  clients that check the name, like pika, wait forever); if shard 0 does not exist the declare
  creates it. bind/unbind/purge/delete, and consume/get with no local shard, close the
  **connection** with 541 INTERNAL_ERROR (the plugin's 406 "Can't bind sharded queue: <<"X">>" /
  "Error finding sharded queue for: <<"X">>" is wrapped by the channel interceptor machinery).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from exchanges.erlang.format import erl_format

SHARD_PREFIX = "sharding: "
PRECONDITION_FAILED = 406  # what the plugin means (server log text)
INTERNAL_ERROR = 541  # what the client gets
_INTERCEPT_VERBS = {
    "queue.bind": "bind",
    "queue.unbind": "unbind",
    "queue.purge": "purge",
    "queue.delete": "delete",
}
INTERCEPTED_METHODS = frozenset({"basic.consume", "basic.get", "queue.declare", *_INTERCEPT_VERBS})


def shard_queue_name(exchange: str, node: str, index: int) -> str:
    """rabbit_sharding_util:make_queue_name/3 (index printed with ~p: plain decimal)."""
    return f"{SHARD_PREFIX}{exchange} - {node} - {index}"


def parse_shard_queue_name(name: str) -> tuple[str, str, int] | None:
    """(exchange, node, index) of a shard queue name, or None. Splits on the last two " - "."""
    if not name.startswith(SHARD_PREFIX):
        return None
    rest, sep, index = name[len(SHARD_PREFIX) :].rpartition(" - ")
    if not sep or not index.isdigit():
        return None
    exchange, sep, node = rest.rpartition(" - ")
    if not sep:
        return None
    return exchange, node, int(index)


@dataclass(frozen=True)
class ShardingConfig:
    """The two policy keys the plugin reads from an exchange's effective policy."""

    shards_per_node: int
    routing_key: str = ""

    @classmethod
    def from_definition(cls, definition: Mapping[str, Any] | None) -> ShardingConfig | None:
        """None when the exchange is not sharded (no `shards-per-node` in its policy).

        A non-integer shards-per-node passes RabbitMQ's validator (it only checks is_number) but
        then crashes the plugin's `lists:seq`; we treat it as sharded with 0 shards (nothing declared,
        consume refused), which keeps the broker alive.
        """
        if not definition or "shards-per-node" not in definition:
            return None
        spn = definition["shards-per-node"]
        count = spn if isinstance(spn, int) and not isinstance(spn, bool) and spn >= 0 else 0
        key = definition.get("routing-key", "")
        return cls(count, key if isinstance(key, str) else "")


def is_sharded(definition: Mapping[str, Any] | None) -> bool:
    """rabbit_sharding_util:shard/1 on the exchange's effective policy definition."""
    return definition is not None and "shards-per-node" in definition


def shard_names(exchange: str, nodes: Iterable[str], shards_per_node: int) -> list[str]:
    """Shard queues for `nodes`, in the order the plugin declares and binds them (node, then index)."""
    return [shard_queue_name(exchange, node, n) for node in nodes for n in range(shards_per_node)]


def shard_bindings(exchange: str, nodes: Iterable[str], config: ShardingConfig) -> list[tuple[str, str]]:
    """(queue, binding key) pairs in binding order: feed to `exchanges.predict` to route like RabbitMQ."""
    return [(q, config.routing_key) for q in shard_names(exchange, nodes, config.shards_per_node)]


@dataclass
class ShardActions:
    """What the broker must do, in this order: unbind, declare, bind (each list in order).

    declare entries are (queue, durable): declare with auto_delete=False, exclusive=False, no
    arguments, skipping queues that exist (the plugin's declare is idempotent; an existing queue with
    other properties is left alone). bind/unbind entries are (queue, routing_key) on the exchange;
    binding an existing binding and unbinding a missing one are no-ops.
    """

    unbind: list[tuple[str, str]] = field(default_factory=list)
    declare: list[tuple[str, bool]] = field(default_factory=list)
    bind: list[tuple[str, str]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.unbind or self.declare or self.bind)


def ensure_shards(exchange: str, durable: bool, config: ShardingConfig, nodes: Iterable[str]) -> ShardActions:
    """ensure_sharded_queues: declare and bind every shard of every running node."""
    node_list = list(nodes)
    names = shard_names(exchange, node_list, config.shards_per_node)
    return ShardActions(
        declare=[(q, durable) for q in names],
        bind=[(q, config.routing_key) for q in names],
    )


def policy_changed(
    exchange: str,
    durable: bool,
    old: ShardingConfig | None,
    new: ShardingConfig | None,
    nodes: Iterable[str],
) -> ShardActions:
    """rabbit_sharding_exchange_decorator:policy_changed/2 (also exchange creation: old=None)."""
    node_list = list(nodes)
    if new is None:
        if old is None:
            return ShardActions()
        return ShardActions(unbind=shard_bindings(exchange, node_list, old))
    actions = ensure_shards(exchange, durable, new, node_list)
    if old is not None and old.routing_key != new.routing_key:
        actions.unbind = shard_bindings(exchange, node_list, old)
    return actions


def node_added(exchange: str, durable: bool, config: ShardingConfig, node: str) -> ShardActions:
    """A node joined: its shards are declared and bound (existing nodes' shards are untouched)."""
    return ensure_shards(exchange, durable, config, [node])


def select_shard(
    exchange: str, local_node: str, config: ShardingConfig, consumer_counts: Mapping[str, int]
) -> str | None:
    """least_consumers/3: the local shard (index < shards-per-node, existing) with the fewest
    consumers, ties by name bytes; None when no such shard exists.

    `consumer_counts` maps existing queue names (at least the candidate shards) to their consumer
    count; names missing from it are shards that do not exist and are skipped.
    """
    candidates = [
        (consumer_counts[q], q.encode("utf-8"), q)
        for q in shard_names(exchange, [local_node], config.shards_per_node)
        if q in consumer_counts
    ]
    return min(candidates)[2] if candidates else None


class ShardingError(Exception):
    """The interceptor refused a method. Observed on 3.10.8: the plugin raises a 406
    precondition_failed inside the channel interceptor, which RabbitMQ turns into a **connection**
    close 541 "INTERNAL_ERROR" (the 406 text only reaches the server log). `detail` keeps that
    text for our log; `reply_code`/`reply_text`/`scope` are what the client sees.
    """

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail
        self.reply_code = INTERNAL_ERROR
        self.reply_text = "INTERNAL_ERROR"
        self.scope = "connection"


def refused_text(method: str, queue: str) -> str:
    """The plugin's (logged) 406 text for queue.bind/unbind/purge/delete on a pseudo-queue."""
    return erl_format(f"Can't {_INTERCEPT_VERBS[method]} sharded queue: ~p", [_binary(queue)])


def not_found_text(queue: str) -> str:
    """The plugin's (logged) 406 text for consume/get on a pseudo-queue whose local shards are all missing."""
    return erl_format("Error finding sharded queue for: ~p", [_binary(queue)])


def _binary(name: str) -> bytes:
    return name.encode("utf-8", "surrogateescape")


def rewrite_queue_method(
    method: str,
    queue: str,
    sharding: ShardingConfig | None,
    local_node: str,
    consumer_counts: Mapping[str, int],
) -> str:
    """The interceptor: the queue name the channel should really use for `method` on `queue`.

    `sharding` is the config of the exchange named `queue` in the same vhost (None if there is no
    such exchange or it is not sharded; then `queue` is returned unchanged). Raises ShardingError.
    """
    if sharding is None or method not in INTERCEPTED_METHODS:
        return queue
    if method in _INTERCEPT_VERBS:
        raise ShardingError(refused_text(method, queue))
    if method == "queue.declare":
        return shard_queue_name(queue, local_node, 0)
    chosen = select_shard(queue, local_node, sharding, consumer_counts)
    if chosen is None:
        raise ShardingError(not_found_text(queue))
    return chosen
