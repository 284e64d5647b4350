"""The single-active-consumer selection under its original import path (tools and benchmarks use
it): the ring is broker.entities.consumer_ring, the selection broker.entities.consumers."""

from __future__ import annotations

from broker.entities.consumer_ring import (
    CONSUMER_NAME_ARGUMENT,
    MODES,
    REPLICAS,
    ConsumerInfo,
    HashRing,
    Mode,
    murmur3_32,
    pulsar_hash,
)
from broker.entities.consumers import ActiveConsumerSelector, choose_active

__all__ = [
    "CONSUMER_NAME_ARGUMENT",
    "MODES",
    "REPLICAS",
    "ActiveConsumerSelector",
    "ConsumerInfo",
    "HashRing",
    "Mode",
    "choose_active",
    "murmur3_32",
    "pulsar_hash",
]
