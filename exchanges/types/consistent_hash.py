"""`x-consistent-hash` exactly as rabbitmq_consistent_hash_exchange 3.10.8 routes.

State is RabbitMQ's bucket map (bucket number -> destination). Because a destination's buckets are
appended together and removed together, the map is always dense, so it is kept as a list: bucket
i is `ring[i]`. Binding a new destination with weight W appends W buckets; a destination already on
the ring is
ignored however it is re-bound ("first binding wins"); removing any binding of a destination drops
all of that destination's buckets and moves later buckets down by their count, even when another
binding of the same destination remains (observed on 3.10.8: the destination then gets nothing
until it is bound again).

A message's hash input is the routing key (the first of [RK | CC ++ BCC]), a header
(`hash-header`) or a property (`hash-property`); missing values hash as the atom `undefined`.
The key K is phash2 of that term (an integer term seeds directly), and the bucket is the jump
consistent hash of K over the number of buckets, seeded with exs1024.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from amqpwire.errors import internal_error, precondition_failed
from amqpwire.fields import FieldTable
from exchanges.base import Binding, Destination, Message
from exchanges.compat import DEFAULT_COMPAT, WEIGHT_CAP, Compat
from exchanges.erlang.format import format_term
from exchanges.erlang.terms import UNDEFINED, phash2, phash2_binary
from exchanges.hashing.jump_table import KEY_CACHE_LIMIT, RingLookup
from exchanges.hashing.terms import field_value_term, key_bytes, property_term, typed_field_term
from exchanges.registry import register
from exchanges.types.hash_exchange import HashExchange

SUPPORTED_PROPERTIES = ("correlation_id", "message_id", "timestamp")

_ERLANG_INTEGER = re.compile(r"[+-]?[0-9]+\Z")
"""What `list_to_integer/1` accepts: an optional sign and ASCII digits, nothing else."""


def parse_weight(key: str) -> int:
    """The weight in a binding key, or the 406 RabbitMQ gives (plus hashbroker's upper cap)."""
    if not _ERLANG_INTEGER.match(key):
        raise precondition_failed(f"The binding key must be an integer: {format_term(key_bytes(key))}")
    weight = int(key)
    if weight < 1:
        raise precondition_failed("The binding key must be greater than 0")
    if weight > WEIGHT_CAP:
        raise precondition_failed(f"The binding key must not exceed {WEIGHT_CAP}")
    return weight


def _longstr_argument(arguments: FieldTable, name: str) -> str | None:
    """A `hash-header`/`hash-property` value. The plugin matches only `{longstr, V}`; any other type
    crashes it, which clients see as connection close 541 INTERNAL_ERROR (observed on 3.10.8)."""
    field = arguments.get(name)
    if field is None:
        return None
    if field.type != "longstr":
        raise internal_error()
    return str(field.value.decode("utf-8", "surrogateescape"))


@register
class ConsistentHashExchange(HashExchange):
    """`targets` is the ring (bucket i is `targets[i]`); `key_cache` maps a routing key to its
    bucket, so it is cleared whenever the ring changes."""

    type_name = "x-consistent-hash"

    def __init__(self, arguments: FieldTable | None = None, compat: Compat = DEFAULT_COMPAT) -> None:
        super().__init__(arguments, compat)
        # destinations on the ring and their bucket counts, in ring order (each one's buckets
        # are contiguous: appended together, removed together)
        self._on_ring: dict[Destination, int] = {}
        self._hash_header = _longstr_argument(self.arguments, "hash-header")
        self._hash_property = _longstr_argument(self.arguments, "hash-property")
        self._on_routing_key = self._hash_header is None and self._hash_property is None
        self._ring_changed()

    @property
    def ring(self) -> list[Destination]:
        """The bucket map: bucket i goes to `ring[i]`."""
        return self.targets

    def _ring_changed(self) -> None:
        self._ring = RingLookup(len(self.targets))
        self.key_cache = {}

    @classmethod
    def validate(cls, arguments: FieldTable) -> None:
        header = _longstr_argument(arguments, "hash-header")
        prop = _longstr_argument(arguments, "hash-property")
        if header is not None and prop is not None:
            raise precondition_failed("hash-header and hash-property are mutually exclusive")
        if prop is not None and prop not in SUPPORTED_PROPERTIES:
            raise precondition_failed(f"Unsupported property: {prop}")

    def validate_binding(self, binding: Binding) -> None:
        parse_weight(binding.key)

    def add_binding(self, binding: Binding) -> None:
        if self.has_binding(binding):
            return
        super().add_binding(binding)
        destination = binding.destination
        if destination in self._on_ring:
            return
        weight = parse_weight(binding.key)
        self.targets.extend([destination] * weight)
        self._on_ring[destination] = weight
        self._ring_changed()

    def remove_bindings(self, bindings: Sequence[Binding]) -> None:
        """Removing any binding of a destination drops all its buckets; later ones move down.

        A leaving destination's run of buckets is found and cut out at C speed; its later
        bindings find it already off the ring and cost nothing."""
        super().remove_bindings(bindings)
        ring = self.targets
        changed = False
        for destination in dict.fromkeys(b.destination for b in bindings):
            weight = self._on_ring.pop(destination, None)
            if weight is not None:
                start = ring.index(destination)
                del ring[start : start + weight]
                changed = True
        if changed:
            self._ring_changed()

    def hash_key(self, message: Message) -> int:
        """K: the integer RabbitMQ seeds the jump hash with for this message."""
        if self._hash_header is not None:
            headers = message.headers()
            field = headers.get(self._hash_header) if headers is not None else None
            if field is None:
                return phash2(UNDEFINED)
            if self.compat.header_hash == "typed":
                return phash2(typed_field_term(field))
            raw = field_value_term(field)
            return raw if type(raw) is int else phash2(raw)
        if self._hash_property is not None:
            return phash2(property_term(self._hash_property, message.property(self._hash_property)))
        return phash2_binary(key_bytes(message.routing_keys[0]))

    def bucket(self, message: Message) -> int:
        return self._ring.bucket(self.hash_key(message))

    def route(self, message: Message) -> list[Destination]:
        ring = self.targets
        if not ring:
            return []
        if not self._on_routing_key:
            return [ring[self._ring.bucket(self.hash_key(message))]]
        routing_key = message.routing_keys[0]
        cache = self.key_cache
        bucket = cache.get(routing_key)
        if bucket is None:
            # hash_key, RingLookup.bucket and remember_key written out: with the compiled hash this
            # call overhead was half the cost of a distinct key (bench/routing.py)
            k = phash2_binary(routing_key.encode("utf-8", "surrogateescape"))
            table = self._ring.table
            bucket = table[k & 0x1FFFFF] if table is not None else self._ring.bucket(k)
            if len(cache) >= KEY_CACHE_LIMIT:
                cache.clear()
            cache[routing_key] = bucket
        return [ring[bucket]]

    @property
    def hash_on(self) -> str:
        if self._hash_header is not None:
            return f"header:{self._hash_header}"
        if self._hash_property is not None:
            return f"property:{self._hash_property}"
        return "routing_key"

    @property
    def state_summary(self) -> dict[str, Any]:
        """The ring as runs of buckets ([first, count, kind, name]): one entry per destination, so
        the dashboard's poll stays small however large the weights."""
        segments: list[list[Any]] = []
        for bucket, destination in enumerate(self.targets):
            if segments and segments[-1][2:] == [destination.kind, destination.name]:
                segments[-1][1] += 1
            else:
                segments.append([bucket, 1, destination.kind, destination.name])
        return {"ring_size": len(self.targets), "segments": segments, "hash_on": self.hash_on}
