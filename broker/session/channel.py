"""One AMQP channel: method handlers, content assembly, deliveries, acks, confirms and transactions.

Handlers raise `AmqpError`; the connection turns soft errors into channel.close and hard ones into
connection.close, so every check here only has to pick RabbitMQ's code and text. Handler order of
checks follows rabbit_channel:handle_method so the *first* error reported matches RabbitMQ too.
"""

from __future__ import annotations

import base64
import logging
import os
import struct
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from amqpwire.errors import AmqpError, ReplyCode, internal_error
from amqpwire.fields import FieldDecodeError, FieldTable
from broker import replies
from broker.entities.arguments import (
    CLASSIC_QUEUE_ARGS,
    assert_args_equivalence,
    assert_field_equivalence,
    check_consume_arguments,
    check_queue_arguments,
)
from broker.entities.exchange import Exchange
from broker.entities.queue import Consumer, Entry, Queue
from broker.message import EXPIRATION_FLAG, REPLY_TO_FLAG, USER_ID_FLAG, StoredMessage, parse_expiration
from broker.protocol import commands as C
from broker.protocol import methods as M
from broker.protocol import properties as P
from broker.protocol.assembler import Publish
from broker.protocol.framing import FRAME_HEADER, FRAME_METHOD, build_body_frames
from broker.protocol.properties import HEADERS_FLAG_HIGH
from exchanges.base import Binding, Destination

if TYPE_CHECKING:
    import asyncio

    from broker.session.connection import Connection

log = logging.getLogger("hashbroker.channel")

REPLY_TO = "amq.rabbitmq.reply-to"
REPLY_TO_PREFIX = "amq.rabbitmq.reply-to."
MAX_MESSAGE_SIZE = 134217728
_HDR = struct.Struct(">BHI")
_CONTENT_HEAD = struct.Struct(">HHQ")


def gen_name(prefix: str) -> str:
    """rabbit_guid:binary(gen_secure(), Prefix): prefix + '-' + base64url of 16 random bytes."""
    return prefix + "-" + base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")


def strip_cr_lf(name: str) -> str:
    return name.replace("\n", "").replace("\r", "") if ("\n" in name or "\r" in name) else name


def check_name(kind: str, name: str) -> None:
    if name.startswith("amq."):
        raise AmqpError(403, f"{kind} name '{name}' contains reserved prefix 'amq.*'")


def not_default_exchange(name: str) -> None:
    if name == "":
        raise AmqpError(403, "operation not permitted on the default exchange")


class Unacked:
    __slots__ = ("consumer", "entry", "queue")

    def __init__(self, queue: Queue, entry: Entry, consumer: Consumer | None) -> None:
        self.queue = queue
        self.entry = entry
        self.consumer = consumer


class Channel:
    """State of one open channel. `conn` provides output, identity and the vhost."""

    def __init__(self, conn: Connection, number: int) -> None:
        self.conn = conn
        self.number = number
        self.vhost = conn.vhost_obj
        self.open = True
        self.closing = False  # sent channel.close, waiting for close-ok
        # exchanges this channel was allowed to write to, valid while the registry's version holds
        self._auth = conn.broker.auth
        self._auth_version = -1
        self._may_write: set[str] = set()
        # consumers and acks
        self.consumers: dict[str, Consumer] = {}
        self.reply_consumer: tuple[str, str] | None = None  # (ctag, suffix)
        self.next_tag = 1
        self.unacked: dict[int, Unacked] = {}
        self.unacked_order: deque[int] = deque()
        self.unacked_count = 0
        self.prefetch = 0
        self.global_prefetch = 0
        self.last_queue = ""
        # confirms / tx
        self.confirm = False
        self.publish_seq = 0
        self._ack_upto = 0  # acks not yet sent cover (last_sent, _ack_upto]
        self._ack_sent = 0
        # issue 5: confirms waiting for store commits, in publish order: [seq, ack, committed]
        self._commit_wait: deque[list[Any]] = deque()
        self.tx: list[Callable[[], None]] | None = None
        self.tx_acks: list[tuple[int, Unacked]] = []
        # deliveries rejected/nacked inside the open transaction (still owed by this channel)
        self.tx_rejects: list[tuple[int, Unacked]] = []

    # -- output -----------------------------------------------------------------------------------

    def reply(self, payload: bytes) -> None:
        self.conn.send_method(self.number, payload)

    # -- publishing -------------------------------------------------------------------------------

    def on_basic_publish(self, cmd: Publish) -> None:
        """A complete basic.publish: `props` are the content header's property bytes as received.

        immediate=true is refused only now, with the whole message in (rabbit_channel's first
        basic.publish clause runs on the assembled command). A headers table RabbitMQ 3.10.8 cannot
        decode (a NaN or infinite double, a broken inner length) crashes its channel: 541 with 0/0.
        """
        exchange, rk, mandatory, immediate, props, body = cmd
        if immediate:
            raise AmqpError(ReplyCode.NOT_IMPLEMENTED, "immediate=true", hard=True)
        if props[0] & HEADERS_FLAG_HIGH:
            try:
                P.check_headers(props)
            except (FieldDecodeError, P.PropertyError):
                raise internal_error() from None
        if len(body) > MAX_MESSAGE_SIZE:
            raise AmqpError(
                406, f"message size {len(body)} is larger than configured max size {MAX_MESSAGE_SIZE}"
            )
        vhost = self.vhost
        # write permission: a granted decision is remembered per exchange name until the registry
        # changes (any user or permission change bumps its version); a refusal is never cached
        auth = self._auth
        if auth.version != self._auth_version:
            self._may_write.clear()
            self._auth_version = auth.version
        if exchange not in self._may_write:
            self.conn.check_access("write", "exchange", exchange)
            if len(self._may_write) >= 256:
                self._may_write.clear()
            self._may_write.add(exchange)
        x = vhost.exchanges.get(exchange)
        if x is None:
            raise AmqpError(404, f"no exchange '{exchange}' in vhost '{vhost.name}'")
        if x.internal:
            raise AmqpError(403, f"cannot publish to internal exchange '{exchange}' in vhost '{vhost.name}'")
        msg = StoredMessage(exchange, rk, props, body)
        flags = msg.flags
        if flags:
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
        if self.tx is not None:
            routed = self._tx_route(x, msg)
            self.tx.append(lambda: self._deliver_publish(x, msg, mandatory, 0, routed))
            return
        self._deliver_publish(x, msg, mandatory, seq)

    def _tx_route(self, x: Exchange, msg: StoredMessage) -> list[Queue] | None:
        """A publish inside a transaction is routed when it is published, delivered at tx.commit.

        RabbitMQ 3.10.8: publish in tx to a fanout bound to q1, then unbind q1 and bind q2, then
        commit: q1 gets the message, q2 does not. hashbroker routed at commit (q2 got it). Direct
        reply-to and delayed messages keep their own paths (None: decided at commit).
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
        if routed is not None:
            self._deliver_routed(msg, [q for q in routed if not q.deleted], mandatory, seq)
            return
        if x.impl is None:  # the default exchange (type direct: never delayed)
            rk = msg.routing_key
            if rk.startswith(REPLY_TO_PREFIX):
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
                # issue 4: held for x-delay ms; the plugin routes to nothing now, so mandatory returns
                if mandatory:
                    self._send_return(msg)
                if seq:
                    self._confirm(seq, True)
                return
        self._deliver_routed(msg, vhost.route(x, msg), mandatory, seq)

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
                if q.overflow == "reject-publish-dlx":
                    q.dead_letter([Entry(0, msg, 0.0)], "maxlen")
                continue
            q.enqueue(msg)
        if seq:
            self._confirm(seq, not rejected)

    # -- store (issue 5): persistent publishes confirm after their commit, confirms stay in order ----

    def _deliver_durable(self, msg: StoredMessage, queues: list[Queue], seq: int) -> None:
        from broker.durability import persist_publish

        rejected = False
        size = len(msg.body)
        accepted: list[Queue] = []
        for q in queues:
            if q.overflow != "drop-head" and q.would_overflow(size):
                rejected = True
                if q.overflow == "reject-publish-dlx":
                    q.dead_letter([Entry(0, msg, 0.0)], "maxlen")
                continue
            accepted.append(q)
        fut, seqs = persist_publish(self.vhost, msg, accepted)
        for q, qseq in zip(accepted, seqs, strict=True):
            q.enqueue(msg, qseq)
        if not seq:
            return
        if fut is None:
            self._confirm(seq, not rejected)
            return
        waiting = [seq, not rejected, False]
        self._commit_wait.append(waiting)
        fut.add_done_callback(lambda f: self._committed(waiting, f))

    def _committed(self, waiting: list[Any], fut: asyncio.Future[None]) -> None:
        waiting[2] = True
        if fut.cancelled() or fut.exception() is not None:
            waiting[1] = False  # not durable: nack
        if not self.open:
            return
        wait = self._commit_wait
        while wait and wait[0][2]:
            seq, ack, _ = wait.popleft()
            self._confirm_now(seq, ack)

    def _store_settled(self, items: list[tuple[int, Unacked]]) -> None:
        """Acked deliveries: the store forgets the persistent ones."""
        by_queue: dict[Queue, list[Entry]] = {}
        for _t, u in items:
            if u.queue.store is not None:
                by_queue.setdefault(u.queue, []).append(u.entry)
        for q, entries in by_queue.items():
            assert q.store is not None
            from broker.durability import stored_seqs

            q.store.remove_messages(self.vhost.name, q.name, stored_seqs(entries))

    def _store_delivered(self, queue: Queue, entry: Entry, no_ack: bool) -> None:
        from broker.durability import is_persistent

        store = queue.store
        if store is None or not is_persistent(entry.msg):
            return
        if no_ack:
            store.remove_messages(self.vhost.name, queue.name, (entry.seq,))
        elif not entry.redelivered:
            store.mark_redelivered(self.vhost.name, queue.name, (entry.seq,))

    def _send_return(self, msg: StoredMessage) -> None:
        out: list[bytes] = []
        payload = M.return_payload(312, "NO_ROUTE", M.shortstr(msg.exchange), M.shortstr(msg.routing_key))
        self._content_frames(payload, msg, out)
        self.conn.send_frames(out)

    def _confirm(self, seq: int, ack: bool) -> None:
        if self._commit_wait:  # store: an earlier persistent publish is not committed yet
            self._commit_wait.append([seq, ack, True])
            return
        self._confirm_now(seq, ack)

    def _confirm_now(self, seq: int, ack: bool) -> None:
        if ack:
            self._ack_upto = seq
            self.conn.want_flush_confirms(self)
            return
        self.flush_confirms(upto=seq - 1)
        self.reply(M.confirm_payload(False, seq, False))
        self._ack_sent = seq
        self._ack_upto = seq

    def flush_confirms(self, upto: int | None = None) -> None:
        """Send one (multiple) ack covering everything confirmed since the last one."""
        top = self._ack_upto if upto is None else min(upto, self._ack_upto)
        if top <= self._ack_sent:
            return
        multiple = top - self._ack_sent > 1
        self.reply(M.confirm_payload(True, top, multiple))
        self._ack_sent = top

    # -- deliveries -------------------------------------------------------------------------------

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
        if consumer.no_ack:
            return True
        if consumer.prefetch:
            group = consumer.group
            held = consumer.unacked if group is None else sum(m.unacked for m in group)
            if held >= consumer.prefetch:
                return False
        return not (self.global_prefetch and self.unacked_count >= self.global_prefetch)

    def deliver(self, consumer: Consumer, queue: Queue, entry: Entry) -> None:
        tag = self.next_tag
        self.next_tag = tag + 1
        if not consumer.no_ack:
            self.unacked[tag] = Unacked(queue, entry, consumer)
            self.unacked_order.append(tag)
            consumer.unacked += 1
            self.unacked_count += 1
        if queue.store is not None:
            self._store_delivered(queue, entry, consumer.no_ack)
        msg = entry.msg
        payload = M.deliver_payload(
            consumer.tag_wire, tag, entry.redelivered, M.shortstr(msg.exchange), M.shortstr(msg.routing_key)
        )
        out: list[bytes] = []
        self._content_frames(payload, msg, out)
        self.conn.send_frames(out)

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

    # -- channel methods ------------------------------------------------------------------------

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

    # -- exchanges --------------------------------------------------------------------------------

    def on_exchange_declare(self, a: C.ExchangeDeclare) -> None:
        vhost = self.vhost
        name = strip_cr_lf(a.exchange)
        if a.passive:
            not_default_exchange(name)
            vhost.exchange_or_404(name)
            if not a.nowait:
                self.reply(replies.exchange_declare_ok())
            return
        type_name = a.type
        from broker.exchange_types import get_type

        get_type(type_name, vhost.compat)  # unknown type: 503 before anything else
        not_default_exchange(name)
        self.conn.check_access("configure", "exchange", name)
        x = vhost.exchanges.get(name)
        args: FieldTable = a.arguments
        if x is None:
            check_name("exchange", name)
            ae = args.get("alternate-exchange")
            if ae is not None and ae.type != "longstr":
                raise AmqpError(
                    406,
                    f"invalid type '{ae.type}' for arg 'alternate-exchange' in {vhost.rs('exchange', name)}",
                )
            x = vhost.declare_exchange(
                name,
                type_name,
                durable=a.durable,
                auto_delete=a.auto_delete,
                internal=a.internal,
                arguments=args,
            )
        else:
            rs = vhost.rs("exchange", name)
            assert_field_equivalence(x.type_name, type_name, rs, "type")
            assert_field_equivalence(x.durable, a.durable, rs, "durable")
            assert_field_equivalence(x.auto_delete, a.auto_delete, rs, "auto_delete")
            assert_field_equivalence(x.internal, a.internal, rs, "internal")
            assert_args_equivalence(x.arguments, args, rs, ("alternate-exchange",))
        if not a.nowait:
            self.reply(replies.exchange_declare_ok())

    def on_exchange_delete(self, a: C.ExchangeDelete) -> None:
        vhost = self.vhost
        name = strip_cr_lf(a.exchange)
        not_default_exchange(name)
        if name.startswith("amq."):
            raise AmqpError(403, f"deletion of system {vhost.rs('exchange', name)} not allowed")
        self.conn.check_access("configure", "exchange", name)
        x = vhost.exchanges.get(name)
        if x is not None:
            if a.if_unused and vhost.exchange_in_use(x):
                raise AmqpError(406, f"{vhost.rs('exchange', name)} in use")
            vhost.delete_exchange(x)
        if not a.nowait:
            self.reply(replies.exchange_delete_ok())

    def _binding_action(self, source: str, dest: Destination, key: str, args: FieldTable, add: bool) -> None:
        vhost = self.vhost
        self.conn.check_access("write", dest.kind, dest.name)
        not_default_exchange(dest.name) if dest.kind == "exchange" else None
        not_default_exchange(source)
        self.conn.check_access("read", "exchange", source)
        src = vhost.exchanges.get(source)
        if not add:
            self._unbind(src, dest, key, args)
            return
        if src is None:
            raise AmqpError(404, f"no exchange '{source}' in vhost '{vhost.name}'")
        if dest.kind == "queue":
            q = vhost.queues.get(dest.name)
            if q is None:
                raise AmqpError(404, f"no queue '{dest.name}' in vhost '{vhost.name}'")
            self.conn.check_exclusive(q)
        elif dest.name not in vhost.exchanges:
            raise AmqpError(404, f"no exchange '{dest.name}' in vhost '{vhost.name}'")
        vhost.add_binding(src, Binding(dest, key, args))

    def _unbind(self, src: Exchange | None, dest: Destination, key: str, args: FieldTable) -> None:
        """rabbit_binding:remove: a binding that does not exist is removed "successfully".

        It looks the route up first and returns ok when there is none, so a missing source, a
        missing destination or a missing binding all get unbind-ok; only an existing binding to
        another connection's exclusive queue runs the inner check (405).
        """
        vhost = self.vhost
        binding = Binding(dest, key, args)
        if src is None or binding not in src.binding_set:
            return
        if dest.kind == "queue":
            q = vhost.queues.get(dest.name)
            if q is not None:
                self.conn.check_exclusive(q)
        vhost.remove_binding(src, binding)

    def on_exchange_bind(self, a: C.ExchangeBind) -> None:
        self._binding_action(
            strip_cr_lf(a.source),
            Destination.exchange(strip_cr_lf(a.destination)),
            a.routing_key,
            a.arguments,
            True,
        )
        if not a.nowait:
            self.reply(replies.exchange_bind_ok())

    def on_exchange_unbind(self, a: C.ExchangeUnbind) -> None:
        self._binding_action(
            strip_cr_lf(a.source),
            Destination.exchange(strip_cr_lf(a.destination)),
            a.routing_key,
            a.arguments,
            False,
        )
        if not a.nowait:
            self.reply(replies.exchange_unbind_ok())

    # -- queues -------------------------------------------------------------------------------------

    def _sharded(self, method: str, name: str) -> str:
        """issue 4: the sharding plugin's interceptor for a queue name equal to a sharded exchange."""
        vhost = self.vhost
        if vhost.hooks is None or name not in vhost.exchanges:
            return name
        return str(vhost.hooks.rewrite_queue(vhost, method, name))

    def _queue_name(self, name: str) -> str:
        """expand_queue_name_shortcut: "" means the channel's most recently declared queue."""
        if name == "":
            if self.last_queue == "":
                raise AmqpError(404, "no previously declared queue")
            return self.last_queue
        return strip_cr_lf(name)

    def on_queue_declare(self, a: C.QueueDeclare) -> None:
        vhost = self.vhost
        conn = self.conn
        if a.queue.startswith(REPLY_TO):
            self._declare_reply_to(strip_cr_lf(a.queue), a.nowait)
            return
        name = self._sharded("queue.declare", strip_cr_lf(a.queue))
        if a.passive:
            found = vhost.queue_or_404(name)
            conn.check_exclusive(found)
            found.reset_expiry()  # a passive declare is a use: RabbitMQ 3.10.8 restarts x-expires
            self._declare_ok(found, a.nowait)
            return
        exclusive = a.exclusive
        durable = a.durable and not exclusive
        auto_delete = a.auto_delete
        args: FieldTable = a.arguments
        if name == "":
            name = gen_name("amq.gen")
        else:
            check_name("queue", name)
        conn.check_access("configure", "queue", name)
        q = vhost.queues.get(name)
        if q is not None:
            rs = vhost.rs("queue", name)
            owner = conn if exclusive else None
            if q.exclusive_owner is not owner:
                raise conn.locked_error(q)
            assert_field_equivalence(q.durable, durable, rs, "durable")
            assert_field_equivalence(q.auto_delete, auto_delete, rs, "auto_delete")
            assert_args_equivalence(q.arguments, args, rs, CLASSIC_QUEUE_ARGS)
            q.reset_expiry()
            self._declare_ok(q, a.nowait)
            return
        dlx = args.get("x-dead-letter-exchange")
        if dlx is not None and dlx.type != "longstr":
            raise AmqpError(
                406,
                f"invalid type '{dlx.type}' for arg 'x-dead-letter-exchange' in {vhost.rs('queue', name)}",
            )
        check_queue_arguments(
            args, name, vhost.name, durable=a.durable, exclusive=exclusive, auto_delete=auto_delete
        )
        q = Queue(
            vhost,
            name,
            durable=durable,
            exclusive_owner=conn if exclusive else None,
            auto_delete=auto_delete,
            arguments=args,
        )
        vhost.add_queue(q)
        if exclusive:
            conn.exclusive_queues.append(q)
        self._declare_ok(q, a.nowait)

    def _declare_reply_to(self, name: str, nowait: bool) -> None:
        """rabbit_channel's first queue.declare clause: any declare (passive or not, whatever the
        flags and arguments) of amq.rabbitmq.reply-to answers declare-ok (0 messages, 1 consumer),
        as does amq.rabbitmq.reply-to.<suffix> of a live reply consumer; any other name with that
        prefix is 404. hashbroker refused them as reserved 'amq.*' names (403) or as missing (404)."""
        if name != REPLY_TO and not (
            name.startswith(REPLY_TO_PREFIX)
            and self.conn.broker.reply_channel_exists(name[len(REPLY_TO_PREFIX) :])
        ):
            raise AmqpError(404, f"no queue '{name}' in vhost '{self.vhost.name}'")
        self.last_queue = name
        if not nowait:
            self.reply(replies.queue_declare_ok(name, 0, 1))

    def _declare_ok(self, q: Queue, nowait: bool) -> None:
        self.last_queue = q.name
        if not nowait:
            self.reply(replies.queue_declare_ok(q.name, q.message_count, q.consumer_count))

    def on_queue_bind(self, a: C.QueueBind) -> None:
        qname = self._sharded("queue.bind", self._queue_name(a.queue))
        key = a.routing_key
        if a.queue == "" and key == "":
            key = qname
        self._binding_action(strip_cr_lf(a.exchange), Destination.queue(qname), key, a.arguments, True)
        if not a.nowait:
            self.reply(replies.queue_bind_ok())

    def on_queue_unbind(self, a: C.QueueUnbind) -> None:
        qname = self._sharded("queue.unbind", self._queue_name(a.queue))
        key = a.routing_key
        if a.queue == "" and key == "":
            key = qname
        self._binding_action(strip_cr_lf(a.exchange), Destination.queue(qname), key, a.arguments, False)
        self.reply(replies.queue_unbind_ok())

    def on_queue_purge(self, a: C.QueuePurge) -> None:
        qname = self._sharded("queue.purge", self._queue_name(a.queue))
        self.conn.check_access("read", "queue", qname)
        q = self.vhost.queue_or_404(qname)
        self.conn.check_exclusive(q)
        n = q.purge()
        if not a.nowait:
            self.reply(replies.queue_purge_ok(n))

    def on_queue_delete(self, a: C.QueueDelete) -> None:
        vhost = self.vhost
        name = self._sharded("queue.delete", self._queue_name(a.queue))
        self.conn.check_access("configure", "queue", name)
        q = vhost.queues.get(name)
        n = 0
        if q is not None:
            self.conn.check_exclusive(q)
            if a.if_unused and q.consumers:
                raise AmqpError(406, f"{vhost.rs('queue', name)} in use")
            if a.if_empty and q.message_count:
                raise AmqpError(406, f"{vhost.rs('queue', name)} not empty")
            n = vhost.delete_queue(q)
        if not a.nowait:
            self.reply(replies.queue_delete_ok(n))

    # -- basic --------------------------------------------------------------------------------------

    def on_basic_qos(self, a: C.BasicQos) -> None:
        """basic.qos; global=false also lifts a channel-wide (global) limit set before, as RabbitMQ
        3.10.8's rabbit_channel does (unlimit_prefetch): observed with global 3 then per-consumer 2,
        two consumers get 2 each (4 unacked), not 3 in all."""
        if a.prefetch_size:
            raise AmqpError(540, f"prefetch_size!=0 ({a.prefetch_size})", hard=True)
        if a.global_:
            self.global_prefetch = a.prefetch_count
        else:
            self.prefetch = a.prefetch_count
            self.global_prefetch = 0
        self.reply(replies.basic_qos_ok())
        self.kick_queues()

    def kick_queues(self) -> None:
        for q in {id(m.queue): m.queue for c in self.consumers.values() for m in _members(c)}.values():
            q.try_deliver()

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
            tag = tag or gen_name("amq.ctag")
            suffix = self.conn.broker.register_reply_channel(self)
            self.reply_consumer = (tag, suffix)
            if not a.nowait:
                self.reply(replies.basic_consume_ok(tag))
            return
        qname = self._queue_name(qname)
        shards = self._ring_shards(qname)
        if shards:
            self.conn.check_access("read", "queue", qname)
            self._consume_shards(tag or gen_name("amq.ctag"), shards, a)
            return
        qname = self._sharded("basic.consume", qname)
        self.conn.check_access("read", "queue", qname)
        q = self.vhost.queue_or_404(qname)
        tag = tag or gen_name("amq.ctag")
        self.conn.check_exclusive(q)
        self._check_consumable(q, a)
        consumer = self._new_consumer(tag, q, a)
        self.consumers[tag] = consumer
        if not a.nowait:
            self.reply(replies.basic_consume_ok(tag))
        q.add_consumer(consumer)

    def _check_consumable(self, q: Queue, a: C.BasicConsume) -> None:
        """basic.consume's checks of the consume arguments and exclusive use, as RabbitMQ orders them."""
        check_consume_arguments(a.arguments, q.name, self.vhost.name)
        if q.consumers and (a.exclusive or any(c.exclusive for c in q.consumers)):
            raise AmqpError(403, f"{self.vhost.rs('queue', q.name)} in exclusive use")

    def _new_consumer(self, tag: str, q: Queue, a: C.BasicConsume) -> Consumer:
        args: FieldTable = a.arguments
        prio = args.get("x-priority")
        return Consumer(
            self,
            tag,
            q,
            a.no_ack,
            a.exclusive,
            self.prefetch,
            args,
            int(prio.value) if prio is not None else 0,
        )

    def _ring_shards(self, name: str) -> list[Queue]:
        """issue 4: the local shards a consumer of pseudo-queue `name` joins under consistent-hash
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
                for member in list(_members(consumer)):
                    member.queue.remove_consumer(member)
                return
        if not a.nowait:
            self.reply(replies.basic_cancel_ok(tag))

    def on_basic_get(self, a: C.BasicGet) -> None:
        qname = self._sharded("basic.get", self._queue_name(a.queue))
        self.conn.check_access("read", "queue", qname)
        q = self.vhost.queue_or_404(qname)
        self.conn.check_exclusive(q)
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
            self.unacked_count += 1
        if q.store is not None:
            self._store_delivered(q, entry, a.no_ack)
        msg = entry.msg
        payload = M.get_ok_payload(
            tag, entry.redelivered, M.shortstr(msg.exchange), M.shortstr(msg.routing_key), q.count
        )
        out: list[bytes] = []
        self._content_frames(payload, msg, out)
        self.conn.send_frames(out)
        if a.no_ack and q.auto_delete:
            pass

    def _collect(self, tag: int, multiple: bool) -> list[tuple[int, Unacked]]:
        """rabbit_channel:collect_acks: tag 0 + multiple means everything; unknown tag is a 406."""
        unacked = self.unacked
        if multiple and tag == 0:
            out = [(t, unacked.pop(t)) for t in self.unacked_order if t in unacked]
            self.unacked_order.clear()
            return out
        if tag not in unacked:
            raise AmqpError(406, f"unknown delivery tag {tag}")
        if not multiple:
            return [(tag, unacked.pop(tag))]
        out = []
        order = self.unacked_order
        while order and order[0] <= tag:
            t = order.popleft()
            u = unacked.pop(t, None)
            if u is not None:
                out.append((t, u))
        return out

    def _release(self, items: list[tuple[int, Unacked]]) -> list[Queue]:
        """Bookkeeping common to ack/reject: free prefetch credit, return touched queues (in order)."""
        touched: dict[Queue, None] = {}
        for _t, u in items:
            if u.consumer is not None:
                u.consumer.unacked -= 1
                if u.consumer.group is not None:  # the shared prefetch freed: any member's shard may go
                    touched.update(dict.fromkeys(m.queue for m in u.consumer.group))
            self.unacked_count -= 1
            u.queue.unacked -= 1
            touched[u.queue] = None
        if self.global_prefetch and items:
            # basic.qos global=true is one limit for the whole channel (RabbitMQ 3.10.8's limiter
            # wakes every queue it blocked): credit freed by an ack on one queue lets the channel's
            # consumers of other queues receive too, after the acked queue's own consumers.
            for consumer in self.consumers.values():
                touched.update(dict.fromkeys(m.queue for m in _members(consumer)))
        return list(touched)

    @staticmethod
    def _count_acks(items: list[tuple[int, Unacked]]) -> None:
        """The queues' `ack` message_stats (rejects and nacks are not acks)."""
        for _t, u in items:
            u.queue.stat_ack += 1

    def on_basic_ack(self, a: C.BasicAck) -> None:
        items = self._collect(a.delivery_tag, a.multiple)
        if self.tx is not None:
            self.tx_acks.extend(items)
            return
        if self.vhost.store is not None:
            self._store_settled(items)
        self._count_acks(items)
        for q in self._release(items):
            q.try_deliver()

    def _reject(self, items: list[tuple[int, Unacked]], requeue: bool) -> None:
        touched = self._release(items)
        by_queue: dict[Queue, list[Entry]] = {}
        for _t, u in items:
            by_queue.setdefault(u.queue, []).append(u.entry)
        for q, entries in by_queue.items():
            if q.deleted:
                continue
            if requeue:
                q.requeue(entries)
            else:
                q.dead_letter(entries, "rejected")
        for q in touched:
            q.try_deliver()

    def on_basic_reject(self, a: C.BasicReject) -> None:
        items = self._collect(a.delivery_tag, False)
        if self.tx is not None:
            self._tx_reject(items, a.requeue)
            return
        self._reject(items, a.requeue)

    def on_basic_nack(self, a: C.BasicNack) -> None:
        items = self._collect(a.delivery_tag, a.multiple)
        if self.tx is not None:
            self._tx_reject(items, a.requeue)
            return
        self._reject(items, a.requeue)

    def _tx_reject(self, items: list[tuple[int, Unacked]], requeue: bool) -> None:
        """A reject/nack inside a transaction waits for tx.commit; tx.rollback (and a channel close)
        must give the deliveries back as unacked, as RabbitMQ 3.10.8 does (a later reject of the same
        tag after rollback is accepted there, not a 406 unknown delivery tag)."""
        self.tx_rejects.extend(items)
        assert self.tx is not None
        self.tx.append(lambda: self._reject(items, requeue))

    def on_basic_recover_async(self, a: C.BasicRecoverAsync | C.BasicRecover) -> None:
        if not a.requeue:
            raise AmqpError(540, "requeue=false", hard=True)
        self.requeue_all()

    def on_basic_recover(self, a: C.BasicRecover) -> None:
        self.on_basic_recover_async(a)
        self.reply(replies.basic_recover_ok())

    def requeue_all(self) -> None:
        items = [(t, self.unacked.pop(t)) for t in self.unacked_order if t in self.unacked]
        self.unacked_order.clear()
        if items:
            self._reject(items, True)

    # -- confirm / tx -------------------------------------------------------------------------------

    def on_confirm_select(self, a: C.ConfirmSelect) -> None:
        if self.tx is not None:
            raise AmqpError(406, "cannot switch from tx to confirm mode")
        self.confirm = True
        if not a.nowait:
            self.reply(replies.confirm_select_ok())

    def on_tx_select(self, a: C.TxSelect) -> None:
        if self.confirm:
            raise AmqpError(406, "cannot switch from confirm to tx mode")
        if self.tx is None:
            self.tx = []
            self.tx_acks = []
        self.reply(replies.tx_select_ok())

    def on_tx_commit(self, a: C.TxCommit) -> None:
        if self.tx is None:
            raise AmqpError(406, "channel is not transactional")
        actions, acks = self.tx, self.tx_acks
        self.tx, self.tx_acks, self.tx_rejects = [], [], []
        for action in actions:
            action()
        if self.vhost.store is not None:
            self._store_settled(acks)
        self._count_acks(acks)
        for q in self._release(acks):
            q.try_deliver()
        store = self.vhost.store
        if store is not None:  # store: commit-ok once the transaction's writes are on disk
            store.sync().add_done_callback(self._tx_synced)
            return
        self.reply(replies.tx_commit_ok())

    def _tx_synced(self, fut: asyncio.Future[None]) -> None:
        if not self.open:
            return
        if fut.cancelled() or fut.exception() is not None:
            err = AmqpError(ReplyCode.INTERNAL_ERROR, "store write failed", hard=False, in_method=False)
            self.conn.close_channel(self, err)
            return
        self.reply(replies.tx_commit_ok())

    def on_tx_rollback(self, a: C.TxRollback) -> None:
        if self.tx is None:
            raise AmqpError(406, "channel is not transactional")
        # acknowledged- or rejected-in-tx deliveries become unacked again, in tag order
        pending = self.tx_acks + self.tx_rejects
        for t, u in pending:
            self.unacked[t] = u
        if pending:
            self.unacked_order = deque(sorted(set(self.unacked_order) | {t for t, _ in pending}))
        self.tx, self.tx_acks, self.tx_rejects = [], [], []
        self.reply(replies.tx_rollback_ok())

    # -- teardown ---------------------------------------------------------------------------------

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
                    q.requeue(entries)
        # consumers go after the requeue (issue 4, observed on 3.10.8 with single active consumer:
        # the closed channel's unacked message is what the next consumer receives first)
        for consumer in list(self.consumers.values()):
            for member in list(_members(consumer)):
                member.queue.remove_consumer(member)
        self.consumers.clear()


def _members(consumer: Consumer) -> list[Consumer]:
    """The queue-level consumers behind one channel consumer (several for a pseudo-queue consumer)."""
    return list(consumer.group) if consumer.group is not None else [consumer]


def _ignore(channel: Channel, command: Any) -> None:
    """A method RabbitMQ accepts and does nothing for (channel.flow-ok)."""


#: Every channel method, basic.publish included, by command type: the only way a command reaches
#: its handler. A command without an entry is 503 "unimplemented method".
DISPATCH: dict[type[Any], Callable[[Channel, Any], None]] = {
    Publish: Channel.on_basic_publish,
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
