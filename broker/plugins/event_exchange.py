"""rabbitmq_event_exchange: the broker's events published to the topic exchange `amq.rabbitmq.event`.

As the 3.10.8 plugin does (rabbit_exchange_type_event): at boot it declares `amq.rabbitmq.event`
in the default vhost (topic, durable, not auto-delete, internal) and listens to the event hub
(`broker.entities.events`); each event, from whichever vhost, becomes a message routed with the
event's kind ("queue.created", "user.authentication.failure", ...), an empty body, delivery mode 2,
the AMQP timestamp in seconds and the event's properties as headers followed by
`timestamp_in_ms`. While the exchange has no binding nothing is built or published.

The message goes through the vhost's one delivery pipeline, counted by no channel
(rabbit_basic:publish). An event told while one is being published (a delivery that makes
something happen) waits for it and follows in order, so publishing never recurses.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from amqpwire.fields import FieldTable
from broker.entities.events import Event, Events, long
from broker.entities.message import StoredMessage
from broker.protocol import properties as P

if TYPE_CHECKING:
    from broker.entities.exchange import Exchange
    from broker.entities.vhost import VHost

EXCHANGE = "amq.rabbitmq.event"


class EventExchange:
    """The plugin while it is on: the exchange in `vhost` and the hub's sink publishing to it."""

    def __init__(self, events: Events, vhost: VHost) -> None:
        self.vhost = vhost
        self._pending: deque[Event] = deque()
        self._publishing = False
        if EXCHANGE not in vhost.exchanges:
            vhost.declare_exchange(
                EXCHANGE, "topic", durable=True, auto_delete=False, internal=True, arguments=FieldTable()
            )
        events.sinks.append(self)

    def exchange(self) -> Exchange | None:
        """The exchange while it has a binding (None: nobody listens)."""
        x = self.vhost.exchanges.get(EXCHANGE)
        return x if x is not None and x.binding_set else None

    def wants(self) -> bool:
        return self.exchange() is not None

    def notify(self, event: Event) -> None:
        if self.exchange() is None:
            return
        self._pending.append(event)
        if self._publishing:
            return
        self._publishing = True
        try:
            while self._pending:
                self._publish(self._pending.popleft())
        finally:
            self._publishing = False

    def _publish(self, event: Event) -> None:
        x = self.exchange()
        if x is None:
            return
        now = self.vhost.clock.wall()
        ms = int(now * 1000)
        headers = FieldTable((*event.props, ("timestamp_in_ms", long(ms))))
        props = P.encode({"headers": headers, "delivery_mode": 2, "timestamp": ms // 1000})
        self.vhost.publish(x, StoredMessage(EXCHANGE, event.kind, props, b""), counted=False)
