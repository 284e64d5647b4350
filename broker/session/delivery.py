"""Delivery framing: basic.deliver / get-ok / return as frames, and the credit check before a delivery."""

from __future__ import annotations

import struct

from broker.entities.message import StoredMessage
from broker.entities.queues.catalog import Consumer, Entry, Queue
from broker.protocol import methods as M
from broker.protocol.framing import FRAME_HEADER, FRAME_METHOD, build_body_frames
from broker.session.channel_base import ChannelBase, Unacked
from broker.session.trace import trace_deliver

_HDR = struct.Struct(">BHI")
_CONTENT_HEAD = struct.Struct(">HHQ")


class DeliveryMixin(ChannelBase):
    """The channel's delivery part (see the module docstring and `channel_base`)."""

    def _content_frames(self, method_payload: bytes, msg: StoredMessage, out: list[bytes]) -> None:
        ch = self.number
        out.append(_HDR.pack(FRAME_METHOD, ch, len(method_payload)))
        out.append(method_payload)
        out.append(b"\xce")
        header = _CONTENT_HEAD.pack(60, 0, len(msg.body)) + msg.props
        out.append(_HDR.pack(FRAME_HEADER, ch, len(header)))
        out.append(header)
        out.append(b"\xce")
        build_body_frames(ch, msg.body, self.conn.frame_max, out)

    def can_deliver(self, consumer: Consumer) -> bool:
        if not self.open or self.closing or self.conn.paused:
            return False
        return self.limiter.allows(consumer)

    def deliver(self, consumer: Consumer, queue: Queue, entry: Entry) -> None:
        tag = self.next_tag
        self.next_tag = tag + 1
        if not consumer.no_ack:
            self.unacked[tag] = Unacked(queue, entry, consumer)
            self.unacked_order.append(tag)
            self.limiter.delivered(consumer)
        if queue.store is not None and entry.seq:  # seq 0: not a stored position (a stream read)
            self._store_delivered(queue, entry, consumer.no_ack)
        msg = entry.msg
        payload = M.deliver_payload(
            consumer.tag_wire, tag, entry.redelivered, M.shortstr(msg.exchange), M.shortstr(msg.routing_key)
        )
        out: list[bytes] = []
        self._content_frames(payload, msg, out)
        self.conn.send_frames(out)
        if self.vhost.tracing:  # after the send: a trace queue consumed here takes the next tag
            trace_deliver(self, queue.name, entry.redelivered, msg)

    def deliver_direct_reply(self, msg: StoredMessage) -> None:
        """A message published to amq.rabbitmq.reply-to.<suffix> for our reply consumer."""
        if self.reply_consumer is None:
            return
        tag = self.next_tag
        self.next_tag = tag + 1
        ctag = self.reply_consumer[0]
        payload = M.deliver_payload(
            M.shortstr(ctag), tag, False, M.shortstr(msg.exchange), M.shortstr(msg.routing_key)
        )
        out: list[bytes] = []
        self._content_frames(payload, msg, out)
        self.conn.send_frames(out)

    def _store_delivered(self, queue: Queue, entry: Entry, no_ack: bool) -> None:
        from broker.runtime.durability import is_stored

        store = queue.store
        if store is None or not is_stored(entry):
            return
        if no_ack:
            store.remove_messages(self.vhost.name, queue.name, (entry.seq,))
        elif not entry.redelivered:
            store.mark_redelivered(self.vhost.name, queue.name, (entry.seq,))

    def _send_return(self, msg: StoredMessage) -> None:
        self.vhost.stats.return_unroutable += 1
        out: list[bytes] = []
        payload = M.return_payload(312, "NO_ROUTE", M.shortstr(msg.exchange), M.shortstr(msg.routing_key))
        self._content_frames(payload, msg, out)
        self.conn.send_frames(out)
