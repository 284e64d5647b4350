"""`x-modulus-hash` (rabbitmq_sharding 3.10.8): phash2 of all routing keys modulo the bindings.

The plugin lists the exchange's bindings from RabbitMQ's ordered route table, one entry per binding
(binding keys are otherwise ignored, so a destination bound twice gets twice the share), and picks
entry `phash2([RK | CC ++ BCC], 2^27) rem N`. The route table's order (`exchanges.route_order`), not
the order of binding, decides which destination gets which residue. RabbitMQ 4.3 (type in core)
orders destinations by (kind, name) instead: `Compat.modulus_order = "sorted"`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from exchanges.base import Binding, Destination, ExchangeType, Message
from exchanges.erlang.terms import PHASH2_MAX, make_hash2
from exchanges.hashing.jump_table import KEY_CACHE_LIMIT
from exchanges.hashing.native import phash2_single_key_list
from exchanges.hashing.terms import key_bytes
from exchanges.registry import register
from exchanges.route_order import route_table_order


def routing_keys_hash(keys: Sequence[str]) -> int:
    """`erlang:phash2([K1, K2, ...], 2^27)` for a list of binaries."""
    return make_hash2([key_bytes(k) for k in keys]) % PHASH2_MAX


@register
class ModulusHashExchange(ExchangeType):
    type_name = "x-modulus-hash"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._destinations: list[Destination] = []
        self._hash_of_key: dict[str, int] = {}

    def add_binding(self, binding: Binding) -> None:
        super().add_binding(binding)
        self._reorder()

    def remove_bindings(self, bindings: Sequence[Binding]) -> None:
        super().remove_bindings(bindings)
        self._reorder()

    def _reorder(self) -> None:
        if self.compat.modulus_order == "sorted":
            self._destinations = sorted(b.destination for b in self.bindings)
        else:
            self._destinations = [b.destination for b in sorted(self.bindings, key=route_table_order)]
        self._hash_of_key = {}

    def route(self, message: Message) -> list[Destination]:
        destinations = self._destinations
        if not destinations:
            return []
        keys = message.routing_keys
        if len(keys) > 1:
            return [destinations[routing_keys_hash(keys) % len(destinations)]]
        key = keys[0]
        cache = self._hash_of_key
        index = cache.get(key)
        if index is None:
            # key_bytes and remember_key written out: per-message call overhead (bench/routing.py)
            index = phash2_single_key_list(key.encode("utf-8", "surrogateescape"))
            if len(cache) >= KEY_CACHE_LIMIT:
                cache.clear()
            cache[key] = index
        return [destinations[index % len(destinations)]]

    def bucket_of(self, message: Message) -> tuple[int, int, Destination] | None:
        destinations = self._destinations
        if not destinations:
            return None
        keys = message.routing_keys
        one = len(keys) == 1
        index = phash2_single_key_list(key_bytes(keys[0])) if one else routing_keys_hash(keys)
        bucket = index % len(destinations)
        return bucket, len(destinations), destinations[bucket]
