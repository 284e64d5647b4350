"""`x-modulus-hash` (rabbitmq_sharding 3.10.8): phash2 of all routing keys modulo the bindings.

The plugin lists the exchange's bindings from RabbitMQ's ordered route table, one entry per binding
(binding keys are otherwise ignored, so a destination bound twice gets twice the share), and picks
entry `phash2([RK | CC ++ BCC], 2^27) rem N`. The route table's order (`exchanges.route_order`), not
the order of binding, decides which destination gets which residue. RabbitMQ 4.3 (type in core)
orders destinations by (kind, name) instead: `Compat.modulus_order = "sorted"`.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Any

from amqpwire.fields import FieldTable
from exchanges.base import Binding, Destination, Message
from exchanges.compat import DEFAULT_COMPAT, Compat
from exchanges.erlang.terms import PHASH2_MAX, make_hash2
from exchanges.hashing.jump_table import KEY_CACHE_LIMIT
from exchanges.hashing.native import phash2_single_key_list
from exchanges.hashing.terms import key_bytes
from exchanges.registry import register
from exchanges.route_order import route_table_order
from exchanges.types.hash_exchange import HashExchange


def routing_keys_hash(keys: Sequence[str]) -> int:
    """`erlang:phash2([K1, K2, ...], 2^27)` for a list of binaries."""
    return make_hash2([key_bytes(k) for k in keys]) % PHASH2_MAX


@register
class ModulusHashExchange(HashExchange):
    """`targets` is the route table's destinations, one per binding; `key_cache` maps a routing key
    to its phash2 (not to a bucket: it stays right when bindings come and go)."""

    type_name = "x-modulus-hash"

    def __init__(self, arguments: FieldTable | None = None, compat: Compat = DEFAULT_COMPAT) -> None:
        super().__init__(arguments, compat)
        # the route table: bindings in its order (`targets` their destinations) and their sort
        # keys (bisect finds a binding's place in O(log n); the lists shift at C speed)
        self._order: list[Any] = []
        self._ordered: list[Binding] = []

    def _order_key(self, binding: Binding) -> Any:
        if self.compat.modulus_order == "sorted":
            return binding.destination
        return route_table_order(binding)

    def add_binding(self, binding: Binding) -> None:
        """Insert after any binding that sorts equal, as a stable sort of binding order would."""
        if self.has_binding(binding):
            return
        super().add_binding(binding)
        key = self._order_key(binding)
        at = bisect_right(self._order, key)
        self._order.insert(at, key)
        self._ordered.insert(at, binding)
        self.targets.insert(at, binding.destination)

    def remove_bindings(self, bindings: Sequence[Binding]) -> None:
        present = [b for b in bindings if self.has_binding(b)]
        super().remove_bindings(present)
        order, ordered = self._order, self._ordered
        for binding in present:
            at = bisect_left(order, self._order_key(binding))
            while ordered[at] != binding:  # past the bindings that sort equal to it
                at += 1
            del order[at], ordered[at], self.targets[at]

    def route(self, message: Message) -> list[Destination]:
        destinations = self.targets
        if not destinations:
            return []
        keys = message.routing_keys
        if len(keys) > 1:
            return [destinations[routing_keys_hash(keys) % len(destinations)]]
        key = keys[0]
        cache = self.key_cache
        index = cache.get(key)
        if index is None:
            # key_bytes and remember_key written out: per-message call overhead (bench/routing.py)
            index = phash2_single_key_list(key.encode("utf-8", "surrogateescape"))
            if len(cache) >= KEY_CACHE_LIMIT:
                cache.clear()
            cache[key] = index
        return [destinations[index % len(destinations)]]

    def bucket(self, message: Message) -> int:
        keys = message.routing_keys
        one = len(keys) == 1
        index = phash2_single_key_list(key_bytes(keys[0])) if one else routing_keys_hash(keys)
        return index % len(self.targets)
