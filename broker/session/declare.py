"""What one channel declares with: the exchange and queue methods over `broker.session.declarations`.

What stays here is what only a channel knows: the most recently declared queue (the "" shortcut),
the sharding plugin's queue-name interception and direct reply-to's pseudo-queue. Each method
applies the declaration and returns what its reply needs; the channel sends the reply.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from amqpwire.errors import not_found
from broker.session import declarations as D
from exchanges.base import Destination

if TYPE_CHECKING:
    from broker.entities.vhost import VHost
    from broker.protocol import commands as C


class Declarations:
    """One channel's exchange and queue methods, and the queue it declared last."""

    __slots__ = ("_reply_channel_exists", "last_queue", "principal", "vhost")

    def __init__(
        self, vhost: VHost, principal: D.Principal, reply_channel_exists: Callable[[str], bool]
    ) -> None:
        self.vhost = vhost
        self.principal = principal
        self._reply_channel_exists = reply_channel_exists
        self.last_queue = ""

    def exchange_declare(self, a: C.ExchangeDeclare) -> None:
        D.exchange_declare(self.vhost, self.principal, a)

    def exchange_delete(self, a: C.ExchangeDelete) -> None:
        D.exchange_delete(self.vhost, self.principal, a)

    def exchange_bind(self, a: C.ExchangeBind) -> None:
        dest = Destination.exchange(D.strip_cr_lf(a.destination))
        D.bind(self.vhost, self.principal, D.strip_cr_lf(a.source), dest, a.routing_key, a.arguments)

    def exchange_unbind(self, a: C.ExchangeUnbind) -> None:
        dest = Destination.exchange(D.strip_cr_lf(a.destination))
        D.unbind(self.vhost, self.principal, D.strip_cr_lf(a.source), dest, a.routing_key, a.arguments)

    def sharded(self, method: str, name: str) -> str:
        """The sharding plugin's interceptor for a queue name equal to a sharded exchange."""
        return D.sharded_queue(self.vhost, method, name)

    def queue_name(self, name: str) -> str:
        """expand_queue_name_shortcut: "" means the channel's most recently declared queue."""
        if name == "":
            if self.last_queue == "":
                raise not_found("no previously declared queue")
            return self.last_queue
        return D.strip_cr_lf(name)

    def queue_declare(self, a: C.QueueDeclare) -> tuple[str, int, int]:
        """(name, messages, consumers) for declare-ok."""
        if a.queue.startswith(D.REPLY_TO):
            # the direct reply-to pseudo-queue: declare-ok with 0 messages and 1 consumer
            name = D.strip_cr_lf(a.queue)
            D.check_reply_to_declare(self.vhost, name, self._reply_channel_exists)
            self.last_queue = name
            return name, 0, 1
        name = self.sharded("queue.declare", D.strip_cr_lf(a.queue))
        q = D.queue_declare(self.vhost, self.principal, name, a)
        self.last_queue = q.name
        return q.name, q.message_count, q.consumer_count

    def _queue_binding(self, method: str, a: C.QueueBind | C.QueueUnbind) -> tuple[str, Destination, str]:
        """(exchange, queue destination, key); an empty queue and key mean the last queue's name."""
        qname = self.sharded(method, self.queue_name(a.queue))
        key = a.routing_key
        if a.queue == "" and key == "":
            key = qname
        return D.strip_cr_lf(a.exchange), Destination.queue(qname), key

    def queue_bind(self, a: C.QueueBind) -> None:
        D.bind(self.vhost, self.principal, *self._queue_binding("queue.bind", a), a.arguments)

    def queue_unbind(self, a: C.QueueUnbind) -> None:
        D.unbind(self.vhost, self.principal, *self._queue_binding("queue.unbind", a), a.arguments)

    def queue_purge(self, a: C.QueuePurge) -> int:
        """The number of messages purged."""
        name = self.sharded("queue.purge", self.queue_name(a.queue))
        return D.queue_purge(self.vhost, self.principal, name)

    def queue_delete(self, a: C.QueueDelete) -> int:
        """The number of messages the queue held."""
        name = self.sharded("queue.delete", self.queue_name(a.queue))
        return D.queue_delete(self.vhost, self.principal, name, a)
