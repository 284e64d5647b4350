"""Broker state: virtual hosts, exchanges, queues and consumers, with no I/O.

- `vhost`: exchanges, queues, bindings and RabbitMQ's routing walk; `dead_letter`: x-death copies.
- `queue_type`: the queue-type behaviour every queue implements, and the registry by x-queue-type;
  `classic_queue`: the classic type; `queue`: the names the rest of the broker imports.
- `consumers`: who gets the next message (rotation, priorities, single active consumer, the ring
  of `consumer_ring`).
- `arguments`: declare/consume argument checks and equivalence, with RabbitMQ's texts.
- `info`: the read model (frozen snapshots) for management and tools.
- `clock` and `persistence`: what the entities are given, never import: time and timers, and what
  keeps durable state (the server passes an event-loop clock and broker.runtime.durability's persistence).
"""
