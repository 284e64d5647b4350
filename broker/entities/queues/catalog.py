"""Queues for the rest of the broker: the `Queue` behaviour, its entries and consumers, and the
classic type (importing a type module registers it under its x-queue-type name).

`Queue(vhost, name, durable=..., exclusive_owner=..., auto_delete=..., arguments=...)` builds the
type the `x-queue-type` argument names; a new queue type is a module imported here, or named in
`broker.entities.queues.base._LAZY_MODULES` to load on its first declaration.
"""

from __future__ import annotations

from broker.entities.queues.base import (
    Consumer,
    ConsumerChannel,
    Entry,
    Queue,
    find_queue_type,
    queue_type_names,
)
from broker.entities.queues.classic.queue import ClassicQueue

__all__ = [
    "ClassicQueue",
    "Consumer",
    "ConsumerChannel",
    "Entry",
    "Queue",
    "find_queue_type",
    "queue_type_names",
]
