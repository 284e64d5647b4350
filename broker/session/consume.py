"""Consumers and basic.get: consume (plain, direct reply-to, sharded pseudo-queues), cancel, get."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from amqpwire.errors import AmqpError
from amqpwire.fields import FieldTable
from broker.entities.queues.catalog import Consumer, Queue
from broker.protocol import commands as C
from broker.protocol import methods as M
from broker.protocol import replies
from broker.session import declarations as D
from broker.session.channel_base import REPLY_TO, Unacked, members
from broker.session.declare import DeclareMixin
from broker.session.trace import trace_deliver

if TYPE_CHECKING:
    from broker.session.channel import Channel

    pass


class ConsumeMixin(DeclareMixin):
    """The channel's consume part (see the module docstring and `channel_base`)."""

    def on_basic_consume(self, a: C.BasicConsume) -> None:
        tag = a.consumer_tag
        if tag in self.consumers or (self.reply_consumer is not None and self.reply_consumer[0] == tag):
            raise AmqpError(530, f"attempt to reuse consumer tag '{tag}'", hard=True)
        qname = a.queue
        if qname == REPLY_TO:
            if not a.no_ack:
                raise AmqpError(406, "reply consumer cannot acknowledge")
            if self.reply_consumer is not None:
                raise AmqpError(406, "reply consumer already set")
            tag = tag or D.gen_name("amq.ctag")
            suffix = self.conn.broker.register_reply_channel(cast("Channel", self))
            self.reply_consumer = (tag, suffix)
            if not a.nowait:
                self.reply(replies.basic_consume_ok(tag))
            return
        qname = self._queue_name(qname)
        shards = self._ring_shards(qname)
        if shards:
            self.conn.check_access("read", "queue", qname)
            self._consume_shards(tag or D.gen_name("amq.ctag"), shards, a)
            return
        qname = self._sharded("basic.consume", qname)
        self.conn.check_access("read", "queue", qname)
        q = self.vhost.queue_or_404(qname)
        tag = tag or D.gen_name("amq.ctag")
        D.check_exclusive(self.conn, q)
        self._check_consumable(q, a)
        consumer = self._new_consumer(tag, q, a)
        self.consumers[tag] = consumer
        if not a.nowait:
            self.reply(replies.basic_consume_ok(tag))
        q.add_consumer(consumer)

    def _check_consumable(self, q: Queue, a: C.BasicConsume) -> None:
        """basic.consume's checks of the consume arguments and exclusive use, as RabbitMQ orders them."""
        q.check_consume(a.arguments, exclusive=a.exclusive, no_ack=a.no_ack, prefetch=self.limiter.prefetch)
        q.check_global_qos(self.limiter.global_prefetch)

    def _new_consumer(self, tag: str, q: Queue, a: C.BasicConsume) -> Consumer:
        args: FieldTable = a.arguments
        prio = args.get("x-priority")
        return Consumer(
            self,
            tag,
            q,
            a.no_ack,
            a.exclusive,
            self.limiter.prefetch,
            args,
            int(prio.value) if prio is not None else 0,
        )

    def _ring_shards(self, name: str) -> list[Queue]:
        """The local shards a consumer of pseudo-queue `name` joins under consistent-hash
        selection (empty: not a pseudo-queue, "first" selection, or no shard, which the
        interceptor then refuses)."""
        vhost = self.vhost
        if (
            vhost.hooks is None
            or vhost.active_consumer_selection != "consistent-hash"
            or name not in vhost.exchanges
        ):
            return []
        return list(vhost.hooks.local_shards(vhost, name))

    def _consume_shards(self, tag: str, shards: list[Queue], a: C.BasicConsume) -> None:
        """One consumer of a sharded pseudo-queue under consistent-hash selection: a member on every
        local shard; each shard delivers only to the member its consumer ring picks (PIP-392 over the
        consumers' names, keyed by the shard's name), so each consumer receives from the shards it
        owns. Members share the tag and the prefetch; a demoted member keeps its unacked messages."""
        for q in shards:
            self._check_consumable(q, a)
        group: list[Consumer] = []
        for q in shards:
            member = self._new_consumer(tag, q, a)
            member.group = group
            group.append(member)
        self.consumers[tag] = group[0]
        if not a.nowait:
            self.reply(replies.basic_consume_ok(tag))
        for member in list(group):
            member.queue.add_consumer(member)

    def on_basic_cancel(self, a: C.BasicCancel) -> None:
        tag = a.consumer_tag
        if self.reply_consumer is not None and self.reply_consumer[0] == tag:
            self.conn.broker.unregister_reply_channel(self.reply_consumer[1])
            self.reply_consumer = None
        else:
            consumer = self.consumers.pop(tag, None)
            if consumer is not None:
                if not a.nowait:
                    self.reply(replies.basic_cancel_ok(tag))
                for member in list(members(consumer)):
                    member.queue.remove_consumer(member)
                return
        if not a.nowait:
            self.reply(replies.basic_cancel_ok(tag))

    def on_basic_get(self, a: C.BasicGet) -> None:
        qname = self._sharded("basic.get", self._queue_name(a.queue))
        self.conn.check_access("read", "queue", qname)
        q = self.vhost.queue_or_404(qname)
        D.check_exclusive(self.conn, q)
        entry = q.get(a.no_ack)
        if entry is None:
            self.reply(replies.basic_get_empty())
            return
        tag = self.next_tag
        self.next_tag = tag + 1
        if not a.no_ack:
            q.unacked += 1
            self.unacked[tag] = Unacked(q, entry, None)
            self.unacked_order.append(tag)
            self.limiter.delivered(None)
        if q.store is not None:
            self._store_delivered(q, entry, a.no_ack)
        msg = entry.msg
        payload = M.get_ok_payload(
            tag, entry.redelivered, M.shortstr(msg.exchange), M.shortstr(msg.routing_key), q.count
        )
        out: list[bytes] = []
        self._content_frames(payload, msg, out)
        self.conn.send_frames(out)
        if self.vhost.tracing:  # after the send, as for a consumer's delivery
            trace_deliver(self, q.name, entry.redelivered, msg)
        if a.no_ack and q.auto_delete:
            pass

    def consumer_cancelled_by_server(self, consumer: Consumer) -> None:
        """The queue went away: drop the consumer and tell the client (consumer_cancel_notify)."""
        group = consumer.group
        if group is not None and consumer in group:
            group.remove(consumer)  # one shard of a pseudo-queue consumer went: the others stay
            if group and self.consumers.get(consumer.tag) is consumer:
                self.consumers[consumer.tag] = group[0]
            if group:
                return
        if self.consumers.pop(consumer.tag, None) is None:
            return
        if self.conn.cancel_notify:
            self.reply(replies.basic_cancel(consumer.tag))
