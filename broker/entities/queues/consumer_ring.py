"""The consumer ring that picks the active consumer of a single-active-consumer queue.

Two policies (`broker.entities.queues.consumers.choose_active` applies them):

* ``first`` - RabbitMQ 3.10's single active consumer: the earliest registered consumer is active;
  when it cancels, the next in registration order takes over. Subscribing the same 10 consumers
  to 100 queues therefore makes one consumer active on all 100.
* ``consistent-hash`` - Apache Pulsar's answer to that imbalance (PIP-392, PR #19502/#23584,
  ``AbstractDispatcherSingleActiveConsumer``): consumers are sorted by name, every consumer puts 100
  virtual nodes on a ring at ``murmur3(name + str(j)) & 0x7fffffff`` (j = 0..99), and the queue's
  active consumer is the ring entry at the ceiling of ``murmur3(queue_name) & 0x7fffffff``, wrapping
  to the first entry. A consumer joining or leaving only moves the queues whose ring arc changes.

The Murmur3 is Pulsar's ``Murmur3_32Hash``: MurmurHash3 x86_32, seed 0, over UTF-8 bytes, with the
sign bit cleared (``Murmur3Hash32.makeHash(String)`` masks again, which changes nothing). Pulsar
sorts consumers by (priority level, ``String.compareTo`` of the name) before building the ring, so
ring ties (two virtual nodes with the same hash) go to the later consumer in that order
(``TreeMap.put`` overwrites). ``compareTo`` compares UTF-16 code units, reproduced here by comparing
UTF-16-BE bytes. Priority: Pulsar uses only the highest-priority group; we do the same with AMQP's
``x-priority`` (higher value = higher priority). The consumer "name" is the ``x-consumer-name``
consume argument when given, else the consumer tag.

Pure and synchronous: `broker.entities.queues.consumers` picks a queue's active consumer with it whenever
a consumer of such a queue is added or removed.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, TypeVar

Mode = Literal["first", "consistent-hash"]
MODES: tuple[Mode, ...] = ("first", "consistent-hash")
REPLICAS = 100  # Pulsar's CONSUMER_CONSISTENT_HASH_REPLICAS
CONSUMER_NAME_ARGUMENT = "x-consumer-name"

_MASK32 = 0xFFFFFFFF
_C1 = 0xCC9E2D51
_C2 = 0x1B873593


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86_32 of `data` as an unsigned 32-bit int (the reference algorithm)."""
    h = seed & _MASK32
    length = len(data)
    nblocks = length // 4
    for i in range(nblocks):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * _C1) & _MASK32
        k = ((k << 15) | (k >> 17)) & _MASK32
        k = (k * _C2) & _MASK32
        h ^= k
        h = ((h << 13) | (h >> 19)) & _MASK32
        h = (h * 5 + 0xE6546B64) & _MASK32
    tail = data[4 * nblocks :]
    k = 0
    for i, byte in enumerate(tail):
        k ^= byte << (8 * i)
    if tail:
        k = (k * _C1) & _MASK32
        k = ((k << 15) | (k >> 17)) & _MASK32
        k = (k * _C2) & _MASK32
        h ^= k
    h ^= length
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    return h


def pulsar_hash(value: str | bytes) -> int:
    """Pulsar's `Murmur3_32Hash.makeHash`: murmur3_32 seed 0 of the UTF-8 bytes, sign bit cleared."""
    data = value.encode("utf-8") if isinstance(value, str) else value
    return murmur3_32(data) & 0x7FFFFFFF


@dataclass(frozen=True)
class ConsumerInfo:
    """What selection needs to know about one consumer of a queue."""

    tag: str
    name: str | None = None  # x-consumer-name consume argument
    priority: int = 0  # x-priority consume argument (higher wins)

    @property
    def key(self) -> str:
        """The name hashed onto the ring: x-consumer-name, else the consumer tag."""
        return self.name if self.name is not None else self.tag


C = TypeVar("C", ConsumerInfo, str)


def _key(consumer: ConsumerInfo | str) -> str:
    return consumer if isinstance(consumer, str) else consumer.key


def _priority(consumer: ConsumerInfo | str) -> int:
    return 0 if isinstance(consumer, str) else consumer.priority


def _java_order(name: str) -> bytes:
    """Sort key equal to Java's String.compareTo (UTF-16 code units)."""
    return name.encode("utf-16-be", "surrogatepass")


class HashRing:
    """Pulsar's consumer ring for one set of consumers; reusable across many queues."""

    def __init__(self, consumers: Iterable[C]) -> None:
        listed = list(consumers)
        if not listed:
            raise ValueError("a hash ring needs at least one consumer")
        top = max(_priority(c) for c in listed)
        ordered = sorted((c for c in listed if _priority(c) == top), key=lambda c: _java_order(_key(c)))
        ring: dict[int, int] = {}
        for index, consumer in enumerate(ordered):
            key = _key(consumer)
            for j in range(REPLICAS):
                ring[pulsar_hash(key + str(j))] = index  # later consumer overwrites, as TreeMap.put
        self.consumers: list[ConsumerInfo | str] = list(ordered)
        self._points = sorted(ring)
        self._owners = [ring[p] for p in self._points]

    def owner_index(self, queue_name: str) -> int:
        """Index into `self.consumers` of the ceiling entry of the queue name's hash (wrapping)."""
        h = pulsar_hash(queue_name)
        i = bisect.bisect_left(self._points, h)
        return self._owners[i if i < len(self._points) else 0]

    def owner(self, queue_name: str) -> ConsumerInfo | str:
        return self.consumers[self.owner_index(queue_name)]
