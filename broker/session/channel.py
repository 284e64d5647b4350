"""One AMQP channel, composed of parts that own their state, and the table every channel method is
found in.

The parts, as RabbitMQ keeps a channel's limiter, unacked messages, confirms and consumers apart:
`Limiter` (prefetch credit), `UnackedTracker` (delivery tags, deliveries awaiting an ack),
`ConsumerRegistry` (consumers), `Declarations` (exchange and queue methods, the queue declared
last), `WriteCache` (granted write permissions), and, once the client asks for them, a
`ConfirmTracker` (confirm mode: the publish sequence and the confirms owed) or a `Transaction` (tx
mode: the publishes, acks and rejects held until tx.commit). `Channel` answers the methods by
calling them, in rabbit_channel:handle_method's order, and is the channel its consumers deliver
through. Its output goes to its owner's `Outbox` as typed messages (a delivery, a get-ok, a
return, a confirm, a method payload), which the socket's connection frames and management's
in-process session keeps.

basic.publish runs the checks in rabbit_channel's order, then the vhost's delivery pipeline
(`VHost.publish`, or `VHost.route_publish` then `VHost.deliver` when routing and delivery happen
apart: a transaction routes at publish and delivers at tx.commit, the tracer looks at the routed
queues in between). Direct reply-to is the channel's own: such a message goes to a channel's
consumer, through no queue.

Handlers raise `AmqpError`; the connection turns soft errors into channel.close and hard ones into
connection.close, so every check only has to pick RabbitMQ's code and text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from amqpwire.errors import (
    access_refused,
    channel_error,
    internal_error,
    not_implemented,
    precondition_failed,
    resource_name,
    resource_not_found,
)
from amqpwire.fields import FieldDecodeError
from broker.entities.message import (
    EXPIRATION_FLAG,
    HEADERS_FLAG,
    REPLY_TO_FLAG,
    USER_ID_FLAG,
    StoredMessage,
    parse_expiration,
)
from broker.entities.queues.catalog import Consumer, Entry, Queue
from broker.entities.vhost import ACCEPTED_BY_ONE
from broker.protocol import commands as C
from broker.protocol import methods as M
from broker.protocol import properties as P
from broker.protocol import replies
from broker.protocol.assembler import PUBLISH, PUBLISH_RUN, Publish, PublishRun
from broker.protocol.framing import immediate_refused
from broker.session import declarations as D
from broker.session.confirms import ConfirmTracker
from broker.session.consume import ConsumerRegistry, members
from broker.session.declarations import REPLY_TO, REPLY_TO_PREFIX
from broker.session.declare import Declarations
from broker.session.limiter import Limiter
from broker.session.permissions import WriteCache
from broker.session.trace import tap_publish, trace_deliver
from broker.session.tx import Transaction
from broker.session.unacked import Settled, Unacked, UnackedTracker

if TYPE_CHECKING:
    from broker.entities.exchange import Exchange
    from broker.entities.persistence import Commit
    from broker.entities.vhost import PublishOutcome
    from broker.session.ports import ChannelOwner

__all__ = ["DISPATCH", "REPLY_TO", "REPLY_TO_PREFIX", "Channel", "Unacked"]


class Channel:
    """One open channel: its parts, the method handlers, its consumers' deliveries and the teardown.
    `conn` is its owner: output, user and vhost."""

    def __init__(self, conn: ChannelOwner, number: int) -> None:
        self.conn = conn
        self.number = number
        self.vhost = conn.vhost_obj
        self.open = True
        self.closing = False  # sent channel.close, waiting for close-ok
        server = conn.broker
        self.ledger = server.ledger
        self.may_write = WriteCache(server.auth, conn.check_access)
        self.limiter = Limiter()
        self.consumers = ConsumerRegistry(self.limiter, server)
        self.tracker = UnackedTracker(self.limiter, self.ledger, self.consumers.queues)
        self.declarations = Declarations(self.vhost, conn, server.reply_channel_exists)
        self.confirms: ConfirmTracker | None = None  # set by confirm.select
        self.tx: Transaction | None = None  # set by tx.select

    @property
    def unacked(self) -> dict[int, Unacked]:
        """Deliveries awaiting an ack, by delivery tag."""
        return self.tracker.view()

    @property
    def confirm(self) -> bool:
        """In confirm mode (confirm.select)."""
        return self.confirms is not None

    def reply(self, payload: bytes) -> None:
        """Send one method (its payload encoded by broker.protocol.replies or methods)."""
        self.conn.send_method(self.number, payload)

    # -- channel -----------------------------------------------------------------------------------

    def on_channel_open(self, args: C.ChannelOpen) -> None:
        raise channel_error("second 'channel.open' seen")

    def on_channel_close(self, args: C.ChannelClose) -> None:
        self.reply(replies.channel_close_ok())
        self.conn.channel_closed(self)

    def on_channel_close_ok(self, args: C.ChannelCloseOk) -> None:
        if self.closing:
            self.conn.channel_closed(self)

    def on_channel_flow(self, args: C.ChannelFlow) -> None:
        if not args.active:
            raise not_implemented("active=false")
        self.reply(replies.channel_flow_ok(True))

    def teardown(self) -> None:
        """Channel closed (either side) or connection gone: requeue unacked, cancel consumers.

        Consumers go after the requeue (observed on 3.10.8 with single active consumer: the closed
        channel's unacked message is what the next consumer receives first). Acks and rejects held
        by a transaction never committed give their messages back too.
        """
        self.open = False
        self.tracker.close(self.tx.take_held() if self.tx is not None else [])
        for consumer in self.consumers:  # told gone before any leaves (and auto-deletes) its queue
            for member in members(consumer):
                self.conn.announce_consumer("consumer.deleted", self.number, member)
        self.consumers.close()

    # -- exchanges and queues ----------------------------------------------------------------------

    def on_queue_declare(self, a: C.QueueDeclare) -> None:
        name, messages, consumers = self.declarations.queue_declare(a)
        if not a.nowait:
            self.reply(replies.queue_declare_ok(name, messages, consumers))

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
            raise not_implemented(f"prefetch_size!=0 ({a.prefetch_size})")
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
            self.conn.announce_consumer("consumer.created", self.number, consumer)

    def on_basic_cancel(self, a: C.BasicCancel) -> None:
        gone = self.consumers.cancel(a.consumer_tag)
        if not a.nowait:
            self.reply(replies.basic_cancel_ok(a.consumer_tag))
        for member in gone:
            self.conn.announce_consumer("consumer.deleted", self.number, member)  # before an auto-delete
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
        self.conn.send_get_ok(self.number, tag, entry.redelivered, q.count, msg)
        if self.vhost.tracing:  # after the send, as for a consumer's delivery
            trace_deliver(self, q.name, entry.redelivered, msg)

    def kick_queues(self) -> None:
        """Credit was granted or the peer reads again: the channel's queues may deliver."""
        self.consumers.kick()

    # -- acks, rejects and recover -----------------------------------------------------------------

    def on_basic_ack(self, a: C.BasicAck) -> None:
        items = self.tracker.collect(a.delivery_tag, a.multiple)
        if self.tx is not None:
            self.tx.ack(items)
            return
        self.tracker.ack(items)

    def on_basic_reject(self, a: C.BasicReject) -> None:
        self._rejected(self.tracker.collect(a.delivery_tag, False), a.requeue)

    def on_basic_nack(self, a: C.BasicNack) -> None:
        self._rejected(self.tracker.collect(a.delivery_tag, a.multiple), a.requeue)

    def _rejected(self, items: Settled, requeue: bool) -> None:
        """A reject/nack inside a transaction waits for tx.commit (see `Transaction.reject`)."""
        self.tracker.check_rejectable(items)
        if self.tx is not None:
            self.tx.reject(items, requeue)
            return
        self.tracker.reject(items, requeue)

    def on_basic_recover_async(self, a: C.BasicRecoverAsync | C.BasicRecover) -> None:
        if not a.requeue:
            raise not_implemented("requeue=false")
        self.tracker.recover()

    def on_basic_recover(self, a: C.BasicRecover) -> None:
        self.on_basic_recover_async(a)
        self.reply(replies.basic_recover_ok())

    # -- basic.publish, confirms and transactions --------------------------------------------------

    def on_basic_publish(self, cmd: Publish) -> None:
        """A complete basic.publish: `props` are the content header's property bytes as received."""
        x, msg = self._accept(cmd)
        confirms = self.confirms
        self._publish(x, msg, cmd[2], 0 if confirms is None else confirms.next_seq())

    def on_publish_run(self, run: PublishRun) -> None:
        """Publishes of one read on this channel, in order, each as `on_basic_publish` would take
        it; consecutive ones that the ingest fast path takes to the same queue (`VHost.sole_queue`)
        are handed to it together. A publish that fails ends the run: the rest were on a channel
        that is closing now, and those before it are in their queues first."""
        vhost = self.vhost
        if vhost.tapped or self.tx is not None or self.confirms is not None:
            for cmd in run:
                self.on_basic_publish(cmd)
            return
        sole_queue = vhost.sole_queue
        into: Queue | None = None
        into_key = ""
        into_x: Exchange | None = None
        batch: list[StoredMessage] = []
        try:
            for cmd in run:
                x, msg = self._accept(cmd)
                if x is into_x and msg.extra_keys is None and msg.routing_key == into_key:
                    batch.append(msg)  # the queue `sole_queue` found for this exchange and key
                    continue
                q = sole_queue(x, msg)
                if batch and into_x is not None and into is not None and (q is not into or x is not into_x):
                    vhost.enqueue_run(into_x, into, batch)
                    batch = []
                if q is not None:
                    into, into_key, into_x = q, msg.routing_key, x
                    batch.append(msg)
                    continue
                into = into_x = None
                self._publish(x, msg, cmd[2], 0)
        finally:
            if batch and into_x is not None and into is not None:
                vhost.enqueue_run(into_x, into, batch)

    def _accept(self, cmd: Publish) -> tuple[Exchange, StoredMessage]:
        """The exchange and the message of a publish that passes the checks, which run in
        rabbit_channel's order. immediate=true is refused only now, with the whole message in (its
        first basic.publish clause runs on the assembled command). A headers table RabbitMQ 3.10.8
        cannot decode (a NaN or infinite double, a broken inner length) crashes its channel where
        it decodes the properties: 541 naming 0/0."""
        exchange, rk, _mandatory, immediate, props, body = cmd
        if immediate:
            raise immediate_refused()
        vhost = self.vhost
        may_write = self.may_write
        if exchange not in may_write.allowed or may_write.version != may_write.auth.version:
            may_write.check_write(exchange)
        x = vhost.exchanges.get(exchange)
        if x is None:
            raise resource_not_found("exchange", exchange, vhost.name)
        if x.internal:
            raise access_refused(
                f"cannot publish to internal {resource_name('exchange', exchange, vhost.name)}"
            )
        msg = StoredMessage(exchange, rk, props, body)
        flags = msg.flags
        if flags:
            try:  # rabbit_binary_parser:ensure_content_decoded, in rabbit_channel's place
                msg.spans()  # every property's bounds: a malformed one never reaches a queue
                if flags & HEADERS_FLAG:
                    msg.headers()
            except (FieldDecodeError, P.PropertyError):
                raise internal_error() from None
            if flags & REPLY_TO_FLAG and msg.prop("reply_to") == REPLY_TO:
                reply = self.consumers.reply_consumer
                if reply is None:
                    raise precondition_failed("fast reply consumer does not exist")
                new_props = P.rewrite(props, {"reply_to": REPLY_TO_PREFIX + reply[1]})
                msg = StoredMessage(exchange, rk, new_props, body)
            if flags & USER_ID_FLAG:
                claimed = msg.prop("user_id")
                if claimed != self.conn.user:
                    raise precondition_failed(
                        f"user_id property set to '{claimed}' but authenticated user was '{self.conn.user}'",
                    )
            if flags & EXPIRATION_FLAG:
                value = msg.prop("expiration")
                if value is not None:
                    parse_expiration(value)
            msg.compute_routing_keys()
        return x, msg

    def _publish(self, x: Exchange, msg: StoredMessage, mandatory: bool, seq: int) -> None:
        """An accepted publish through the vhost's pipeline; `seq` its confirm number (0: none)."""
        vhost = self.vhost
        to_reply = x.impl is None and msg.routing_key.startswith(REPLY_TO_PREFIX)
        if to_reply or vhost.tapped or self.tx is not None:
            self._route(x, msg, mandatory, seq)
            return
        out = vhost.publish(x, msg, mandatory)
        if out is ACCEPTED_BY_ONE:  # the ingest fast path: nothing more to look at
            if seq and self.confirms is not None:
                self.confirms.confirm(seq, True)
            return
        self._published(msg, out, seq)

    def _route(self, x: Exchange, msg: StoredMessage, mandatory: bool, seq: int) -> None:
        """A publish routed apart from its delivery: to a direct reply-to consumer, under the
        tracer's or a hash watch's tap, or into a transaction (delivered at tx.commit, as
        rabbit_channel does)."""
        vhost = self.vhost
        routed: list[Queue] | None
        if x.impl is None and msg.routing_key.startswith(REPLY_TO_PREFIX):
            routed = None  # to a direct reply-to consumer, through no queue
        else:
            routed = vhost.route_publish(x, msg)
        if vhost.tapped:  # firehose tracing or a watched hash exchange: after routing, before queues
            tap_publish(self, x, msg, routed or [])
        tx = self.tx
        if tx is not None:
            tx.publish(lambda: self._deliver(x, msg, mandatory, 0, routed))
            return
        self._deliver(x, msg, mandatory, seq, routed)

    def _deliver(
        self, x: Exchange, msg: StoredMessage, mandatory: bool, seq: int, routed: list[Queue] | None
    ) -> None:
        """Deliver a publish routed beforehand (`routed` None: to a direct reply-to consumer)."""
        if routed is not None:
            self._published(msg, self.vhost.deliver(x, msg, routed, mandatory), seq)
            return
        self.vhost.deliver(x, msg, ())  # counted in message_stats as a publish that reached no queue
        delivered = self.conn.broker.deliver_reply(msg)
        if not delivered and mandatory:
            self._send_return(msg)
        if seq and self.confirms is not None:
            self.confirms.confirm(seq, True)

    def _published(self, msg: StoredMessage, out: PublishOutcome, seq: int) -> None:
        """The publisher's side of the pipeline's outcome: basic.return when it was mandatory and
        routed nowhere; the confirm (a nack when a queue refused it), after the store write when
        there is one; a transaction whose write failed cannot commit."""
        if out.returned:
            self._send_return(msg)
        confirms = self.confirms
        stored = out.stored
        if stored is None:
            if seq and confirms is not None:
                confirms.confirm(seq, not out.refused)
            return
        if self.tx is not None:
            stored.add_done_callback(self.tx.stored)
        if seq and confirms is not None:
            confirms.confirm_stored(seq, not out.refused, stored)

    def _send_return(self, msg: StoredMessage) -> None:
        """basic.return of an unroutable mandatory publish."""
        self.vhost.stats.return_unroutable += 1
        self.conn.send_return(self.number, 312, "NO_ROUTE", msg)

    def flush_confirms(self) -> None:
        """Send the publisher confirms due (one multiple ack)."""
        if self.confirms is not None:
            self.confirms.flush()

    def on_confirm_select(self, a: C.ConfirmSelect) -> None:
        if self.tx is not None:
            raise precondition_failed("cannot switch from tx to confirm mode")
        if self.confirms is None:
            self.confirms = ConfirmTracker(self, self.conn, self.vhost.stats)
        if not a.nowait:
            self.reply(replies.confirm_select_ok())

    def on_tx_select(self, a: C.TxSelect) -> None:
        if self.confirms is not None:
            raise precondition_failed("cannot switch from confirm to tx mode")
        if self.tx is None:
            self.tx = Transaction(self.tracker)
        self.reply(replies.tx_select_ok())

    def on_tx_commit(self, a: C.TxCommit) -> None:
        tx = self.tx
        if tx is None:
            raise precondition_failed("channel is not transactional")
        tx.commit()
        persistence = self.vhost.persistence
        if persistence is not None:  # commit-ok once the transaction's writes are on disk
            persistence.committed().add_done_callback(self._tx_synced)
            return
        self.reply(replies.tx_commit_ok())

    def _tx_synced(self, commit: Commit) -> None:
        tx = self.tx
        stored = tx is None or tx.synced(commit)
        if not self.open:
            return
        if not stored:
            err = internal_error("store write failed", hard=False)
            self.conn.close_channel(self, err)
            return
        self.reply(replies.tx_commit_ok())

    def on_tx_rollback(self, a: C.TxRollback) -> None:
        if self.tx is None:
            raise precondition_failed("channel is not transactional")
        self.tx.rollback()
        self.reply(replies.tx_rollback_ok())

    # -- the channel the queues deliver through (broker.entities.queues.consumers.ConsumerChannel) --

    def can_deliver(self, consumer: Consumer) -> bool:
        if not self.open or self.closing or self.conn.paused:
            return False
        return self.limiter.allows(consumer)

    def deliver(self, consumer: Consumer, queue: Queue, entry: Entry) -> None:
        no_ack = consumer.no_ack
        tag = self.tracker.tag() if no_ack else self.tracker.delivered(queue, entry, consumer)
        ledger = self.ledger
        if ledger is not None and entry.seq:  # seq 0: not a stored position (a stream read)
            ledger.delivered(queue, entry, no_ack)
        msg = entry.msg
        redelivered = entry.redelivered
        self.conn.send_deliver(
            self.number, consumer.tag_wire, tag, redelivered, msg, 0 if no_ack else len(self.tracker)
        )
        if self.vhost.tracing:  # after the send: a trace queue consumed here takes the next tag
            trace_deliver(self, queue.name, redelivered, msg)

    def deliver_direct_reply(self, msg: StoredMessage) -> None:
        """A message published to amq.rabbitmq.reply-to.<suffix> for our reply consumer."""
        reply = self.consumers.reply_consumer
        if reply is None:
            return
        self.conn.send_deliver(self.number, M.shortstr(reply[0]), self.tracker.tag(), False, msg)

    def consumer_cancelled_by_server(self, consumer: Consumer) -> None:
        """The queue went away: drop the consumer and tell the client (consumer_cancel_notify)."""
        if self.consumers.server_cancelled(consumer) and self.conn.cancel_notify:
            self.reply(replies.basic_cancel(consumer.tag))


def _ignore(channel: Channel, command: Any) -> None:
    """A method RabbitMQ accepts and does nothing for (channel.flow-ok)."""


def _applied(
    apply: Callable[[Declarations, Any], None], ok: Callable[[], bytes]
) -> Callable[[Channel, Any], None]:
    """The handler of a declaration whose reply carries nothing: apply it, then reply `ok` unless
    the client asked for nowait."""

    def handle(ch: Channel, a: Any) -> None:
        apply(ch.declarations, a)
        if not a.nowait:
            ch.reply(ok())

    return handle


#: Every channel method, basic.publish included, by command type: the only way a command reaches
#: its handler. A command without an entry is 503 "unimplemented method".
DISPATCH: dict[type[Any], Callable[[Channel, Any], None]] = {
    PUBLISH: Channel.on_basic_publish,
    PUBLISH_RUN: Channel.on_publish_run,
    C.ChannelClose: Channel.on_channel_close,
    C.ChannelCloseOk: Channel.on_channel_close_ok,
    C.ChannelFlow: Channel.on_channel_flow,
    C.ChannelFlowOk: _ignore,
    C.ChannelOpen: Channel.on_channel_open,
    C.ExchangeDeclare: _applied(Declarations.exchange_declare, replies.exchange_declare_ok),
    C.ExchangeDelete: _applied(Declarations.exchange_delete, replies.exchange_delete_ok),
    C.ExchangeBind: _applied(Declarations.exchange_bind, replies.exchange_bind_ok),
    C.ExchangeUnbind: _applied(Declarations.exchange_unbind, replies.exchange_unbind_ok),
    C.QueueDeclare: Channel.on_queue_declare,
    C.QueueBind: _applied(Declarations.queue_bind, replies.queue_bind_ok),
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
