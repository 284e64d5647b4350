"""A channel's consumers (rabbit_channel's consumer_mapping): by tag, the direct reply-to consumer,
and the members of a sharded pseudo-queue's consumer.

The registry checks and records consumers; the channel answers the methods and starts a new
consumer on its queues only after consume-ok is out, so a client never sees a delivery before it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from amqpwire.errors import not_allowed, precondition_failed
from amqpwire.fields import FieldTable
from broker.entities.queues.catalog import Consumer, ConsumerChannel, Queue
from broker.session.declarations import gen_name

if TYPE_CHECKING:
    from broker.entities.vhost import VHost
    from broker.protocol import commands as C
    from broker.session.limiter import Limiter
    from broker.session.ports import ReplyRegistry, ReplyTarget


def members(consumer: Consumer) -> list[Consumer]:
    """The queue-level consumers behind one channel consumer (several for a pseudo-queue consumer)."""
    return list(consumer.group) if consumer.group is not None else [consumer]


class ConsumerRegistry:
    """The consumers of one channel, by tag."""

    __slots__ = ("by_tag", "limiter", "replies", "reply_consumer")

    def __init__(self, limiter: Limiter, replies: ReplyRegistry) -> None:
        self.limiter = limiter
        self.replies = replies
        self.by_tag: dict[str, Consumer] = {}
        self.reply_consumer: tuple[str, str] | None = None  # (tag, suffix) of the direct reply-to one

    def __len__(self) -> int:
        return len(self.by_tag)

    def __iter__(self) -> Iterator[Consumer]:
        return iter(self.by_tag.values())

    def check_tag(self, tag: str) -> None:
        if tag in self.by_tag or (self.reply_consumer is not None and self.reply_consumer[0] == tag):
            raise not_allowed(f"attempt to reuse consumer tag '{tag}'")

    def add_reply(self, channel: ReplyTarget, tag: str, no_ack: bool) -> str:
        """basic.consume of amq.rabbitmq.reply-to: the channel's one reply consumer; its tag."""
        if not no_ack:
            raise precondition_failed("reply consumer cannot acknowledge")
        if self.reply_consumer is not None:
            raise precondition_failed("reply consumer already set")
        tag = tag or gen_name("amq.ctag")
        self.reply_consumer = (tag, self.replies.register_reply_channel(channel))
        return tag

    def add(self, channel: ConsumerChannel, tag: str, q: Queue, a: C.BasicConsume) -> Consumer:
        """A consumer of `q`, recorded (the caller adds it to the queue once consume-ok is out)."""
        self._check_consumable(q, a)
        consumer = self._new(channel, tag, q, a)
        self.by_tag[tag] = consumer
        return consumer

    def add_group(
        self, channel: ConsumerChannel, tag: str, shards: list[Queue], a: C.BasicConsume
    ) -> list[Consumer]:
        """One consumer of a sharded pseudo-queue under consistent-hash selection: a member on every
        local shard; each shard delivers only to the member its consumer ring picks (PIP-392 over
        the consumers' names, keyed by the shard's name), so each consumer receives from the shards
        it owns. Members share the tag and the prefetch; a demoted member keeps its unacked
        messages. Returns the members (the caller adds them to their queues)."""
        for q in shards:
            self._check_consumable(q, a)
        group: list[Consumer] = []
        for q in shards:
            member = self._new(channel, tag, q, a)
            member.group = group
            group.append(member)
        self.by_tag[tag] = group[0]
        return list(group)

    def _check_consumable(self, q: Queue, a: C.BasicConsume) -> None:
        """basic.consume's checks of the consume arguments and exclusive use, as RabbitMQ orders them."""
        q.check_consume(a.arguments, exclusive=a.exclusive, no_ack=a.no_ack, prefetch=self.limiter.prefetch)
        q.check_global_qos(self.limiter.global_prefetch)

    def _new(self, channel: ConsumerChannel, tag: str, q: Queue, a: C.BasicConsume) -> Consumer:
        args: FieldTable = a.arguments
        prio = args.get("x-priority")
        return Consumer(
            channel,
            tag,
            q,
            a.no_ack,
            a.exclusive,
            self.limiter.prefetch,
            args,
            int(prio.value) if prio is not None else 0,
        )

    @staticmethod
    def ring_shards(vhost: VHost, name: str) -> list[Queue]:
        """The local shards a consumer of pseudo-queue `name` joins under consistent-hash
        selection (empty: not a pseudo-queue, "first" selection, or no shard, which the
        interceptor then refuses)."""
        if (
            vhost.hooks is None
            or vhost.active_consumer_selection != "consistent-hash"
            or name not in vhost.exchanges
        ):
            return []
        return list(vhost.hooks.local_shards(vhost, name))

    def cancel(self, tag: str) -> list[Consumer]:
        """basic.cancel: forget the consumer; its members, to take off their queues once cancel-ok
        is out (none for the reply consumer or an unknown tag, which RabbitMQ answers all the same)."""
        if self.reply_consumer is not None and self.reply_consumer[0] == tag:
            self._drop_reply()
            return []
        consumer = self.by_tag.pop(tag, None)
        return members(consumer) if consumer is not None else []

    def server_cancelled(self, consumer: Consumer) -> bool:
        """The queue of `consumer` went away: forget it. True when the client must be told (the
        channel's consumer is gone, not just one shard of a pseudo-queue consumer)."""
        group = consumer.group
        if group is not None and consumer in group:
            group.remove(consumer)  # one shard of a pseudo-queue consumer went: the others stay
            if group and self.by_tag.get(consumer.tag) is consumer:
                self.by_tag[consumer.tag] = group[0]
            if group:
                return False
        return self.by_tag.pop(consumer.tag, None) is not None

    def queues(self) -> list[Queue]:
        """Every queue the channel's consumers take from, once each."""
        return list(dict.fromkeys(m.queue for c in self.by_tag.values() for m in members(c)))

    def kick(self) -> None:
        """Credit was granted or the peer reads again: let every queue of ours try to deliver."""
        for q in self.queues():
            q.try_deliver()

    def close(self) -> None:
        """The channel closed: no reply consumer, and every consumer leaves its queue."""
        self._drop_reply()
        for consumer in list(self.by_tag.values()):
            for member in members(consumer):
                member.queue.remove_consumer(member)
        self.by_tag.clear()

    def _drop_reply(self) -> None:
        if self.reply_consumer is not None:
            self.replies.unregister_reply_channel(self.reply_consumer[1])
            self.reply_consumer = None
