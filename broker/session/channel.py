"""One AMQP channel, assembled from its parts, and the table every channel method is found in.

The parts, one module each: delivery framing (`delivery`), publisher confirms (`confirms`),
basic.publish (`publish`), acks and credit (`acks`, with `limiter`), transactions (`tx`), exchange
and queue methods (`declare`, wrapping the plain functions of `declarations`), consumers and
basic.get (`consume`), the write-permission cache (`permissions`). Handlers raise `AmqpError`; the
connection turns soft errors into channel.close and hard ones into connection.close, so every
check only has to pick RabbitMQ's code and text, in rabbit_channel:handle_method's order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amqpwire.errors import AmqpError
from broker.entities.queues.catalog import Entry, Queue
from broker.protocol import commands as C
from broker.protocol import replies
from broker.protocol.assembler import PUBLISH
from broker.session.channel_base import REPLY_TO, REPLY_TO_PREFIX, Unacked, members
from broker.session.consume import ConsumeMixin

__all__ = ["DISPATCH", "REPLY_TO", "REPLY_TO_PREFIX", "Channel", "Unacked"]


class Channel(ConsumeMixin):
    """One open channel: every method handler, the deliveries and the teardown."""

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
        """Channel closed (either side) or connection gone: cancel consumers, requeue unacked."""
        self.open = False
        if self.reply_consumer is not None:
            self.conn.broker.unregister_reply_channel(self.reply_consumer[1])
            self.reply_consumer = None
        items = [(t, self.unacked.pop(t)) for t in self.unacked_order if t in self.unacked]
        self.unacked_order.clear()
        if self.tx_acks or self.tx_rejects:  # uncommitted acks/rejects: the messages go back too
            items.extend(self.tx_acks + self.tx_rejects)
            self.tx_acks, self.tx_rejects = [], []
        if items:
            self._release(items)
            by_queue: dict[Queue, list[Entry]] = {}
            for _t, u in items:
                by_queue.setdefault(u.queue, []).append(u.entry)
            for q, entries in by_queue.items():
                if not q.deleted:
                    # a type may return a closed channel's messages differently from a nack
                    # (quorum queues: to the front, counted as a delivery)
                    q.requeue_on_close(entries)
        # consumers go after the requeue (observed on 3.10.8 with single active consumer:
        # the closed channel's unacked message is what the next consumer receives first)
        for consumer in list(self.consumers.values()):
            for member in list(members(consumer)):
                member.queue.remove_consumer(member)
        self.consumers.clear()


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
