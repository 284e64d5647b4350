"""The channel's exchange and queue methods: thin wrappers around `broker.session.declarations`.

What stays here is what only a channel knows: the "last declared queue" shortcut, the sharding
plugin's queue-name interception, direct reply-to's pseudo-queue and the reply frames.
"""

from __future__ import annotations

from amqpwire.errors import not_found
from broker.entities.queues.catalog import Queue
from broker.protocol import commands as C
from broker.protocol import replies
from broker.session import declarations as D
from broker.session.channel_base import REPLY_TO
from broker.session.tx import TxMixin
from exchanges.base import Destination


class DeclareMixin(TxMixin):
    """The channel's declare part (see the module docstring and `channel_base`)."""

    def on_exchange_declare(self, a: C.ExchangeDeclare) -> None:
        D.exchange_declare(self.vhost, self.conn, a)
        if not a.nowait:
            self.reply(replies.exchange_declare_ok())

    def on_exchange_delete(self, a: C.ExchangeDelete) -> None:
        D.exchange_delete(self.vhost, self.conn, a)
        if not a.nowait:
            self.reply(replies.exchange_delete_ok())

    def on_exchange_bind(self, a: C.ExchangeBind) -> None:
        dest = Destination.exchange(D.strip_cr_lf(a.destination))
        D.bind(self.vhost, self.conn, D.strip_cr_lf(a.source), dest, a.routing_key, a.arguments)
        if not a.nowait:
            self.reply(replies.exchange_bind_ok())

    def on_exchange_unbind(self, a: C.ExchangeUnbind) -> None:
        dest = Destination.exchange(D.strip_cr_lf(a.destination))
        D.unbind(self.vhost, self.conn, D.strip_cr_lf(a.source), dest, a.routing_key, a.arguments)
        if not a.nowait:
            self.reply(replies.exchange_unbind_ok())

    def _sharded(self, method: str, name: str) -> str:
        """The sharding plugin's interceptor for a queue name equal to a sharded exchange."""
        return D.sharded_queue(self.vhost, method, name)

    def _queue_name(self, name: str) -> str:
        """expand_queue_name_shortcut: "" means the channel's most recently declared queue."""
        if name == "":
            if self.last_queue == "":
                raise not_found("no previously declared queue")
            return self.last_queue
        return D.strip_cr_lf(name)

    def on_queue_declare(self, a: C.QueueDeclare) -> None:
        if a.queue.startswith(REPLY_TO):
            self._declare_reply_to(D.strip_cr_lf(a.queue), a.nowait)
            return
        q = D.queue_declare(self.vhost, self.conn, self._sharded("queue.declare", D.strip_cr_lf(a.queue)), a)
        self._declare_ok(q, a.nowait)

    def _declare_reply_to(self, name: str, nowait: bool) -> None:
        """A declare of the direct reply-to pseudo-queue answers declare-ok (0 messages, 1 consumer)."""
        D.check_reply_to_declare(self.vhost, name, self.conn.broker.reply_channel_exists)
        self.last_queue = name
        if not nowait:
            self.reply(replies.queue_declare_ok(name, 0, 1))

    def _declare_ok(self, q: Queue, nowait: bool) -> None:
        self.last_queue = q.name
        if not nowait:
            self.reply(replies.queue_declare_ok(q.name, q.message_count, q.consumer_count))

    def _queue_binding(self, method: str, a: C.QueueBind | C.QueueUnbind) -> tuple[str, Destination, str]:
        """(exchange, queue destination, key); an empty queue and key mean the last queue's name."""
        qname = self._sharded(method, self._queue_name(a.queue))
        key = a.routing_key
        if a.queue == "" and key == "":
            key = qname
        return D.strip_cr_lf(a.exchange), Destination.queue(qname), key

    def on_queue_bind(self, a: C.QueueBind) -> None:
        D.bind(self.vhost, self.conn, *self._queue_binding("queue.bind", a), a.arguments)
        if not a.nowait:
            self.reply(replies.queue_bind_ok())

    def on_queue_unbind(self, a: C.QueueUnbind) -> None:
        D.unbind(self.vhost, self.conn, *self._queue_binding("queue.unbind", a), a.arguments)
        self.reply(replies.queue_unbind_ok())

    def on_queue_purge(self, a: C.QueuePurge) -> None:
        n = D.queue_purge(self.vhost, self.conn, self._sharded("queue.purge", self._queue_name(a.queue)))
        if not a.nowait:
            self.reply(replies.queue_purge_ok(n))

    def on_queue_delete(self, a: C.QueueDelete) -> None:
        name = self._sharded("queue.delete", self._queue_name(a.queue))
        n = D.queue_delete(self.vhost, self.conn, name, a)
        if not a.nowait:
            self.reply(replies.queue_delete_ok(n))
