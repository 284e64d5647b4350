"""basic.publish: checks in rabbit_channel's order, routing, mandatory returns, transactional routing."""

from __future__ import annotations

from amqpwire.errors import AmqpError, internal_error
from amqpwire.fields import FieldDecodeError
from broker.entities.exchange import Exchange
from broker.entities.message import (
    EXPIRATION_FLAG,
    HEADERS_FLAG,
    REPLY_TO_FLAG,
    USER_ID_FLAG,
    StoredMessage,
    parse_expiration,
)
from broker.entities.queues.catalog import Entry, Queue
from broker.protocol import properties as P
from broker.protocol.assembler import Publish
from broker.protocol.framing import immediate_refused
from broker.session.channel_base import REPLY_TO, REPLY_TO_PREFIX
from broker.session.confirms import ConfirmsMixin
from broker.session.trace import publish_tapped


class PublishMixin(ConfirmsMixin):
    """The channel's publish part (see the module docstring and `channel_base`)."""

    def on_basic_publish(self, cmd: Publish) -> None:
        """A complete basic.publish: `props` are the content header's property bytes as received.

        The checks run in rabbit_channel's order. immediate=true is refused only now, with the
        whole message in (its first basic.publish clause runs on the assembled command). A headers
        table RabbitMQ 3.10.8 cannot decode (a NaN or infinite double, a broken inner length)
        crashes its channel where it decodes the properties: 541 naming 0/0.
        """
        exchange, rk, mandatory, immediate, props, body = cmd
        if immediate:
            raise immediate_refused()
        vhost = self.vhost
        may_write = self.may_write
        if exchange not in may_write.allowed or may_write.version != may_write.auth.version:
            may_write.check_write(exchange)
        x = vhost.exchanges.get(exchange)
        if x is None:
            raise AmqpError(404, f"no exchange '{exchange}' in vhost '{vhost.name}'")
        if x.internal:
            raise AmqpError(403, f"cannot publish to internal exchange '{exchange}' in vhost '{vhost.name}'")
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
                if self.reply_consumer is None:
                    raise AmqpError(406, "fast reply consumer does not exist")
                new_props = P.rewrite(props, {"reply_to": REPLY_TO_PREFIX + self.reply_consumer[1]})
                msg = StoredMessage(exchange, rk, new_props, body)
            if flags & USER_ID_FLAG:
                claimed = msg.prop("user_id")
                if claimed != self.conn.user:
                    raise AmqpError(
                        406,
                        f"user_id property set to '{claimed}' but authenticated user was '{self.conn.user}'",
                    )
            if flags & EXPIRATION_FLAG:
                value = msg.prop("expiration")
                if value is not None:
                    parse_expiration(value)
            msg.compute_routing_keys()
        seq = 0
        if self.confirm:
            self.publish_seq += 1
            seq = self.publish_seq
        if vhost.tapped:  # firehose tracing or a watched hash exchange
            publish_tapped(self, x, msg, mandatory, seq)
            return
        if self.tx is not None:
            routed = self._tx_route(x, msg)
            self.tx.append(lambda: self._deliver_publish(x, msg, mandatory, 0, routed))
            return
        self._deliver_publish(x, msg, mandatory, seq)

    def _tx_route(self, x: Exchange, msg: StoredMessage) -> list[Queue] | None:
        """A publish inside a transaction is routed when it is published, delivered at tx.commit.

        RabbitMQ 3.10.8: publish in tx to a fanout bound to q1, then unbind q1 and bind q2, then
        commit: q1 gets the message, q2 does not. Direct reply-to and delayed messages keep their own
        paths (None: decided at commit).
        """
        if x.impl is None and msg.routing_key.startswith(REPLY_TO_PREFIX):
            return None
        if x.type_name == "x-delayed-message":
            return None
        return self.vhost.route(x, msg)

    def _deliver_publish(
        self, x: Exchange, msg: StoredMessage, mandatory: bool, seq: int, routed: list[Queue] | None = None
    ) -> None:
        vhost = self.vhost
        x.publish_in += 1  # message_stats: one count when the publish reaches exactly one queue
        if routed is not None:
            live = [q for q in routed if not q.deleted]
            if len(live) != 1:
                x.fanout_extra += len(live) - 1
            self._deliver_routed(msg, live, mandatory, seq)
            return
        if x.impl is None:  # the default exchange (type direct: never delayed)
            rk = msg.routing_key
            if rk.startswith(REPLY_TO_PREFIX):  # to a consumer, through no queue
                x.fanout_extra -= 1
                delivered = self.conn.broker.deliver_reply(msg)
                if not delivered and mandatory:
                    self._send_return(msg)
                if seq:
                    self._confirm(seq, True)
                return
            if msg.extra_keys is None:  # one key: the queue of that name, if any
                q = vhost.queues.get(rk)
                if q is not None and q.store is None and q.overflow == "drop-head":
                    q.enqueue(msg)
                    if seq:
                        self._confirm(seq, True)
                    return
        elif x.type_name == "x-delayed-message":
            hooks = vhost.hooks
            if hooks is not None and hooks.hold_delayed(vhost, x, msg):
                # held for x-delay ms; the plugin routes to nothing now, so mandatory returns
                x.fanout_extra -= 1
                if mandatory:
                    self._send_return(msg)
                if seq:
                    self._confirm(seq, True)
                return
        queues = vhost.route(x, msg)
        if len(queues) != 1:
            x.fanout_extra += len(queues) - 1
        self._deliver_routed(msg, queues, mandatory, seq)

    def _deliver_routed(self, msg: StoredMessage, queues: list[Queue], mandatory: bool, seq: int) -> None:
        vhost = self.vhost
        if not queues:
            if mandatory:
                self._send_return(msg)
            if seq:
                self._confirm(seq, True)
            return
        if msg.has_bcc:
            msg = msg.strip_bcc()
        if vhost.store is not None:
            for q in queues:
                if q.store is not None:  # store: persist before enqueueing, confirm after the commit
                    self._deliver_durable(msg, queues, seq)
                    return
        rejected = False
        size = len(msg.body)
        for q in queues:
            if q.overflow != "drop-head" and q.would_overflow(size):
                rejected = True
                q.stat_refused += 1
                if q.overflow == "reject-publish-dlx":
                    q.dead_letter([Entry(0, msg, 0.0)], "maxlen")
                continue
            q.enqueue(msg)
        if seq:
            self._confirm(seq, not rejected)

    def _deliver_durable(self, msg: StoredMessage, queues: list[Queue], seq: int) -> None:
        from broker.runtime.durability import persist_publish

        rejected = False
        size = len(msg.body)
        accepted: list[Queue] = []
        for q in queues:
            if q.overflow != "drop-head" and q.would_overflow(size):
                rejected = True
                q.stat_refused += 1
                if q.overflow == "reject-publish-dlx":
                    q.dead_letter([Entry(0, msg, 0.0)], "maxlen")
                continue
            accepted.append(q)
        fut, seqs = persist_publish(self.vhost, msg, accepted)
        for q, qseq in zip(accepted, seqs, strict=True):
            q.enqueue(msg, qseq)
        if fut is not None:
            self._unqueue_if_unstored(fut, accepted, seqs)
        if not seq:
            return
        if fut is None:
            self._confirm(seq, not rejected)
            return
        waiting = [seq, not rejected, False]
        self._commit_wait.append(waiting)
        fut.add_done_callback(lambda f: self._committed(waiting, f))
