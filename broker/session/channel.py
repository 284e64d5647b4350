"""One AMQP channel, composed of parts that own their state, and the table every channel method is
found in.

The parts (built in `broker.session.channel_base`): the limiter (`limiter`, prefetch credit), the
unacked tracker (`unacked`, delivery tags and deliveries awaiting an ack), the consumer registry
(`consume`), the declarations (`declare`, over the plain functions of `declarations`) and the
write-permission cache (`permissions`). `Channel` answers the methods by calling them, in
rabbit_channel:handle_method's order, and is the channel its consumers deliver through. The
publish side (basic.publish, confirms, transactions) is mixed in from `publish`, `confirms` and
`tx`; every message it and the deliveries send goes out through `delivery`.

Handlers raise `AmqpError`; the connection turns soft errors into channel.close and hard ones into
connection.close, so every check only has to pick RabbitMQ's code and text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amqpwire.errors import AmqpError, ReplyCode
from broker.entities.message import StoredMessage
from broker.entities.queues.catalog import Consumer, Entry, Queue
from broker.protocol import commands as C
from broker.protocol import methods as M
from broker.protocol import replies
from broker.protocol.assembler import PUBLISH
from broker.session import declarations as D
from broker.session.channel_base import REPLY_TO, REPLY_TO_PREFIX
from broker.session.publish import PublishMixin
from broker.session.trace import trace_deliver
from broker.session.tx import TxMixin
from broker.session.unacked import Settled, Unacked

__all__ = ["DISPATCH", "REPLY_TO", "REPLY_TO_PREFIX", "Channel", "Unacked"]


class Channel(TxMixin, PublishMixin):
    """One open channel: the method handlers, its consumers' deliveries and the teardown."""

    # -- channel -----------------------------------------------------------------------------------

    def on_channel_open(self, args: C.ChannelOpen) -> None:
        raise AmqpError(504, "second 'channel.open' seen", hard=True)

    def on_channel_close(self, args: C.ChannelClose) -> None:
        self.reply(replies.channel_close_ok())
        self.conn.channel_closed(self)

    def on_channel_close_ok(self, args: C.ChannelCloseOk) -> None:
        if self.closing:
            self.conn.channel_closed(self)

    def on_channel_flow(self, args: C.ChannelFlow) -> None:
        if not args.active:
            raise AmqpError(540, "active=false", hard=True)
        self.reply(replies.channel_flow_ok(True))

    def teardown(self) -> None:
        """Channel closed (either side) or connection gone: requeue unacked, cancel consumers.

        Consumers go after the requeue (observed on 3.10.8 with single active consumer: the closed
        channel's unacked message is what the next consumer receives first). Acks and rejects held
        by a transaction never committed give their messages back too.
        """
        self.open = False
        held = self.tx_acks + self.tx_rejects
        if held:
            self.tx_acks, self.tx_rejects = [], []
        self.tracker.close(held)
        self.consumers.close()

    # -- exchanges and queues ----------------------------------------------------------------------

    def on_exchange_declare(self, a: C.ExchangeDeclare) -> None:
        self.declarations.exchange_declare(a)
        if not a.nowait:
            self.reply(replies.exchange_declare_ok())

    def on_exchange_delete(self, a: C.ExchangeDelete) -> None:
        self.declarations.exchange_delete(a)
        if not a.nowait:
            self.reply(replies.exchange_delete_ok())

    def on_exchange_bind(self, a: C.ExchangeBind) -> None:
        self.declarations.exchange_bind(a)
        if not a.nowait:
            self.reply(replies.exchange_bind_ok())

    def on_exchange_unbind(self, a: C.ExchangeUnbind) -> None:
        self.declarations.exchange_unbind(a)
        if not a.nowait:
            self.reply(replies.exchange_unbind_ok())

    def on_queue_declare(self, a: C.QueueDeclare) -> None:
        name, messages, consumers = self.declarations.queue_declare(a)
        if not a.nowait:
            self.reply(replies.queue_declare_ok(name, messages, consumers))

    def on_queue_bind(self, a: C.QueueBind) -> None:
        self.declarations.queue_bind(a)
        if not a.nowait:
            self.reply(replies.queue_bind_ok())

    def on_queue_unbind(self, a: C.QueueUnbind) -> None:
        self.declarations.queue_unbind(a)
        self.reply(replies.queue_unbind_ok())

    def on_queue_purge(self, a: C.QueuePurge) -> None:
        n = self.declarations.queue_purge(a)
        if not a.nowait:
            self.reply(replies.queue_purge_ok(n))

    def on_queue_delete(self, a: C.QueueDelete) -> None:
        n = self.declarations.queue_delete(a)
        if not a.nowait:
            self.reply(replies.queue_delete_ok(n))

    # -- consumers, basic.get and credit -----------------------------------------------------------

    def on_basic_qos(self, a: C.BasicQos) -> None:
        if a.prefetch_size:
            raise AmqpError(ReplyCode.NOT_IMPLEMENTED, f"prefetch_size!=0 ({a.prefetch_size})", hard=True)
        self.limiter.qos(a.prefetch_count, a.global_)
        self.reply(replies.basic_qos_ok())
        self.kick_queues()

    def on_basic_consume(self, a: C.BasicConsume) -> None:
        consumers = self.consumers
        tag = a.consumer_tag
        consumers.check_tag(tag)
        if a.queue == REPLY_TO:
            tag = consumers.add_reply(self, tag, a.no_ack)
            if not a.nowait:
                self.reply(replies.basic_consume_ok(tag))
            return
        names = self.declarations
        qname = names.queue_name(a.queue)
        shards = consumers.ring_shards(self.vhost, qname)
        if shards:
            self.conn.check_access("read", "queue", qname)
            tag = tag or D.gen_name("amq.ctag")
            started = consumers.add_group(self, tag, shards, a)
        else:
            qname = names.sharded("basic.consume", qname)
            self.conn.check_access("read", "queue", qname)
            q = self.vhost.queue_or_404(qname)
            tag = tag or D.gen_name("amq.ctag")
            D.check_exclusive(self.conn, q)
            started = [consumers.add(self, tag, q, a)]
        if not a.nowait:
            self.reply(replies.basic_consume_ok(tag))
        for consumer in started:
            consumer.queue.add_consumer(consumer)

    def on_basic_cancel(self, a: C.BasicCancel) -> None:
        gone = self.consumers.cancel(a.consumer_tag)
        if not a.nowait:
            self.reply(replies.basic_cancel_ok(a.consumer_tag))
        for member in gone:
            member.queue.remove_consumer(member)

    def on_basic_get(self, a: C.BasicGet) -> None:
        names = self.declarations
        qname = names.sharded("basic.get", names.queue_name(a.queue))
        self.conn.check_access("read", "queue", qname)
        q = self.vhost.queue_or_404(qname)
        D.check_exclusive(self.conn, q)
        entry = q.get(a.no_ack)
        if entry is None:
            self.reply(replies.basic_get_empty())
            return
        if a.no_ack:
            tag = self.tracker.tag()
        else:
            q.unacked += 1
            tag = self.tracker.delivered(q, entry, None)
        if self.ledger is not None:
            self.ledger.delivered(q, entry, a.no_ack)
        msg = entry.msg
        payload = M.get_ok_payload(
            tag, entry.redelivered, M.shortstr(msg.exchange), M.shortstr(msg.routing_key), q.count
        )
        self.send_content(payload, msg)
        if self.vhost.tracing:  # after the send, as for a consumer's delivery
            trace_deliver(self, q.name, entry.redelivered, msg)

    def kick_queues(self) -> None:
        """Credit was granted or the peer reads again: the channel's queues may deliver."""
        self.consumers.kick()

    # -- acks, rejects and recover -----------------------------------------------------------------

    def on_basic_ack(self, a: C.BasicAck) -> None:
        items = self.tracker.collect(a.delivery_tag, a.multiple)
        if self.tx is not None:
            self.tx_acks.extend(items)
            return
        self.tracker.ack(items)

    def on_basic_reject(self, a: C.BasicReject) -> None:
        self._rejected(self.tracker.collect(a.delivery_tag, False), a.requeue)

    def on_basic_nack(self, a: C.BasicNack) -> None:
        self._rejected(self.tracker.collect(a.delivery_tag, a.multiple), a.requeue)

    def _rejected(self, items: Settled, requeue: bool) -> None:
        """A reject/nack inside a transaction waits for tx.commit; tx.rollback (and a channel close)
        must give the deliveries back as unacked, as RabbitMQ 3.10.8 does (a later reject of the same
        tag after rollback is accepted there, not a 406 unknown delivery tag)."""
        tracker = self.tracker
        tracker.check_rejectable(items)
        if self.tx is not None:
            self.tx_rejects.extend(items)
            self.tx.append(lambda: tracker.reject(items, requeue))
            return
        tracker.reject(items, requeue)

    def on_basic_recover_async(self, a: C.BasicRecoverAsync | C.BasicRecover) -> None:
        if not a.requeue:
            raise AmqpError(540, "requeue=false", hard=True)
        self.tracker.recover()

    def on_basic_recover(self, a: C.BasicRecover) -> None:
        self.on_basic_recover_async(a)
        self.reply(replies.basic_recover_ok())

    # -- the channel the queues deliver through (broker.entities.queues.consumers.ConsumerChannel) --

    def can_deliver(self, consumer: Consumer) -> bool:
        if not self.open or self.closing or self.conn.paused:
            return False
        return self.limiter.allows(consumer)

    def deliver(self, consumer: Consumer, queue: Queue, entry: Entry) -> None:
        no_ack = consumer.no_ack
        tag = self.tracker.tag() if no_ack else self.tracker.delivered(queue, entry, consumer)
        if self.ledger is not None and entry.seq:  # seq 0: not a stored position (a stream read)
            self.ledger.delivered(queue, entry, no_ack)
        msg = entry.msg
        payload = M.deliver_payload(
            consumer.tag_wire, tag, entry.redelivered, M.shortstr(msg.exchange), M.shortstr(msg.routing_key)
        )
        self.send_content(payload, msg)
        if self.vhost.tracing:  # after the send: a trace queue consumed here takes the next tag
            trace_deliver(self, queue.name, entry.redelivered, msg)

    def deliver_direct_reply(self, msg: StoredMessage) -> None:
        """A message published to amq.rabbitmq.reply-to.<suffix> for our reply consumer."""
        reply = self.consumers.reply_consumer
        if reply is None:
            return
        payload = M.deliver_payload(
            M.shortstr(reply[0]),
            self.tracker.tag(),
            False,
            M.shortstr(msg.exchange),
            M.shortstr(msg.routing_key),
        )
        self.send_content(payload, msg)

    def consumer_cancelled_by_server(self, consumer: Consumer) -> None:
        """The queue went away: drop the consumer and tell the client (consumer_cancel_notify)."""
        if self.consumers.server_cancelled(consumer) and self.conn.cancel_notify:
            self.reply(replies.basic_cancel(consumer.tag))


def _ignore(channel: Channel, command: Any) -> None:
    """A method RabbitMQ accepts and does nothing for (channel.flow-ok)."""


#: Every channel method, basic.publish included, by command type: the only way a command reaches
#: its handler. A command without an entry is 503 "unimplemented method".
DISPATCH: dict[type[Any], Callable[[Channel, Any], None]] = {
    PUBLISH: Channel.on_basic_publish,
    C.ChannelClose: Channel.on_channel_close,
    C.ChannelCloseOk: Channel.on_channel_close_ok,
    C.ChannelFlow: Channel.on_channel_flow,
    C.ChannelFlowOk: _ignore,
    C.ChannelOpen: Channel.on_channel_open,
    C.ExchangeDeclare: Channel.on_exchange_declare,
    C.ExchangeDelete: Channel.on_exchange_delete,
    C.ExchangeBind: Channel.on_exchange_bind,
    C.ExchangeUnbind: Channel.on_exchange_unbind,
    C.QueueDeclare: Channel.on_queue_declare,
    C.QueueBind: Channel.on_queue_bind,
    C.QueueUnbind: Channel.on_queue_unbind,
    C.QueuePurge: Channel.on_queue_purge,
    C.QueueDelete: Channel.on_queue_delete,
    C.BasicQos: Channel.on_basic_qos,
    C.BasicConsume: Channel.on_basic_consume,
    C.BasicCancel: Channel.on_basic_cancel,
    C.BasicGet: Channel.on_basic_get,
    C.BasicAck: Channel.on_basic_ack,
    C.BasicReject: Channel.on_basic_reject,
    C.BasicNack: Channel.on_basic_nack,
    C.BasicRecoverAsync: Channel.on_basic_recover_async,
    C.BasicRecover: Channel.on_basic_recover,
    C.ConfirmSelect: Channel.on_confirm_select,
    C.TxSelect: Channel.on_tx_select,
    C.TxCommit: Channel.on_tx_commit,
    C.TxRollback: Channel.on_tx_rollback,
}
