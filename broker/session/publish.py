"""basic.publish: the channel's checks in rabbit_channel's order, then the vhost's delivery pipeline;
the publisher's side of its outcome (basic.return, the confirm) and transactional publishes.

Routing, overflow, the store write and enqueueing are the vhost's (`VHost.publish`, or
`VHost.route_publish` then `VHost.deliver` when routing and delivery happen apart: a transaction
routes at publish and delivers at tx.commit, the tracer looks at the routed queues in between).
Direct reply-to stays here: such a message goes to a channel's consumer, through no queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from amqpwire.errors import AmqpError, internal_error
from amqpwire.fields import FieldDecodeError
from broker.entities.message import (
    EXPIRATION_FLAG,
    HEADERS_FLAG,
    REPLY_TO_FLAG,
    USER_ID_FLAG,
    StoredMessage,
    parse_expiration,
)
from broker.entities.persistence import failed
from broker.entities.vhost import ACCEPTED_BY_ONE
from broker.protocol import properties as P
from broker.protocol.assembler import Publish
from broker.protocol.framing import immediate_refused
from broker.session.channel_base import REPLY_TO, REPLY_TO_PREFIX
from broker.session.confirms import ConfirmsMixin
from broker.session.trace import tap_publish

if TYPE_CHECKING:
    from broker.entities.exchange import Exchange
    from broker.entities.persistence import Commit
    from broker.entities.queues.catalog import Queue
    from broker.entities.vhost import PublishOutcome


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
        routed: list[Queue] | None
        if x.impl is None and rk.startswith(REPLY_TO_PREFIX):
            routed = None  # to a direct reply-to consumer, through no queue
        elif vhost.tapped or self.tx is not None:
            routed = vhost.route_publish(x, msg)
        else:
            out = vhost.publish(x, msg, mandatory)
            if out is ACCEPTED_BY_ONE:  # the ingest fast path: nothing more to look at
                if seq:
                    self._confirm(seq, True)
                return
            self._published(msg, out, seq)
            return
        if vhost.tapped:  # firehose tracing or a watched hash exchange: after routing, before queues
            tap_publish(self, x, msg, routed or [])
        if self.tx is not None:  # routed now, delivered at tx.commit (as rabbit_channel does)
            self.tx.append(lambda: self._deliver(x, msg, mandatory, 0, routed))
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
        if seq:
            self._confirm(seq, True)

    def _published(self, msg: StoredMessage, out: PublishOutcome, seq: int) -> None:
        """The publisher's side of the pipeline's outcome: basic.return when it was mandatory and
        routed nowhere; the confirm (a nack when a queue refused it), after the store write when
        there is one; a transaction whose write failed cannot commit."""
        if out.returned:
            self._send_return(msg)
        stored = out.stored
        if stored is None:
            if seq:
                self._confirm(seq, not out.refused)
            return
        if self.tx is not None:
            stored.add_done_callback(self._tx_stored)
        if seq:
            self._confirm_stored(seq, not out.refused, stored)

    def _tx_stored(self, commit: Commit) -> None:
        if failed(commit) and self.tx is not None:
            self.tx_unstored = True
