"""The classic queue type: ready messages, TTL, length limits, dead-lettering, priorities.

Delivery is push-based and synchronous: publishing, acking, consuming or a writer resuming calls
`try_deliver`, which hands ready messages to the consumer `broker.entities.queues.consumers` picks while
its channel has credit (prefetch) and its connection's transport is not paused. No task per queue;
message TTL and x-expires run on the vhost's clock, writes go to its injected persistence."""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from amqpwire.errors import AmqpError, ReplyCode, precondition_failed
from amqpwire.fields import Field, FieldTable
from broker.entities.message import EXPIRATION_FLAG, PRIORITY_FLAG, StoredMessage, parse_expiration
from broker.entities.queues import arguments as A
from broker.entities.queues.base import Entry, Queue, register
from broker.entities.queues.classic.unstored import forget_ready
from broker.entities.queues.classic.window import REFILL_BELOW, WINDOW, WINDOW_BYTES, page_out
from broker.entities.queues.consumers import Consumer, QueueConsumers

if TYPE_CHECKING:
    from broker.entities.clock import Timer
    from broker.entities.policy import Policy
    from broker.entities.queues.classic.paging import Pager
    from broker.entities.vhost import VHost


def _int_arg(args: FieldTable, key: str) -> int | None:
    f = args.get(key)
    return int(f.value) if f is not None else None


def _str_arg(args: FieldTable, key: str) -> str | None:
    f = args.get(key)
    return str(f.value.decode("utf-8", "surrogateescape")) if f is not None and f.type == "longstr" else None


def _plain(f: Field) -> Any:
    return f.value.decode("utf-8", "surrogateescape") if f.type == "longstr" else f.value


@register
class ClassicQueue(Queue):
    type_name = "classic"

    def __init__(
        self,
        vhost: VHost,
        name: str,
        *,
        durable: bool,
        exclusive_owner: object | None,
        auto_delete: bool,
        arguments: FieldTable,
    ) -> None:
        self._set_identity(vhost, name, durable, exclusive_owner, auto_delete, arguments)
        self.message_ttl = _int_arg(arguments, "x-message-ttl")
        self.expires = _int_arg(arguments, "x-expires")
        self.max_length = _int_arg(arguments, "x-max-length")
        self.max_length_bytes = _int_arg(arguments, "x-max-length-bytes")
        self.overflow = _str_arg(arguments, "x-overflow") or "drop-head"
        self.dlx = _str_arg(arguments, "x-dead-letter-exchange")
        self.dlrk = _str_arg(arguments, "x-dead-letter-routing-key")
        self.max_priority = _int_arg(arguments, "x-max-priority") or 0
        sac = arguments.get("x-single-active-consumer")
        self.single_active = bool(sac is not None and sac.type == "bool" and sac.value)
        self.levels: list[deque[Entry]] = [deque() for _ in range(self.max_priority + 1)]
        self.count = 0
        self.bytes = 0
        self.seq = 0
        self.selection = QueueConsumers(self.single_active)
        self.consumers = self.selection.members
        self.unacked = 0
        # management message_stats, RabbitMQ's per-queue counters (`seq` + `stat_refused` is the
        # publish count), bumped where messages leave; `stat_empty_get`: see `stats`
        self.stat_deliver = self.stat_deliver_no_ack = self.stat_get = self.stat_get_no_ack = 0
        self.stat_redeliver = self.stat_ack = 0
        self.stat_empty_get = False
        self.deleted = False
        self.had_consumers = False
        self._ttl_timer: Timer | None = None
        self._ttl_at = 0.0
        self._expiry_timer: Timer | None = None
        self._delivering = False
        self.uses_ttl = self.message_ttl is not None
        self.store = None
        self.policy = None
        # paging (broker.entities.queues.classic.paging): none until the window is full; NEVER once
        # found unavailable
        self.pager: Pager | None = None
        self.page_window = WINDOW
        self.page_bytes = WINDOW_BYTES
        self.reset_expiry()

    @classmethod
    def validate_arguments(
        cls, args: FieldTable, qname: str, vhost: str, *, durable: bool, exclusive: bool, auto_delete: bool
    ) -> None:
        A.check_classic_arguments(args, A.resource("queue", qname, vhost), exclusive=exclusive)

    def check_equivalent(self, durable: bool, auto_delete: bool, arguments: FieldTable) -> None:
        rs = A.resource("queue", self.name, self.vhost.name)
        A.assert_field_equivalence(self.durable, durable, rs, "durable")
        A.assert_field_equivalence(self.auto_delete, auto_delete, rs, "auto_delete")
        A.assert_args_equivalence(self.arguments, arguments, rs, A.CLASSIC_QUEUE_ARGS)

    def check_consume(self, arguments: FieldTable, *, exclusive: bool, no_ack: bool, prefetch: int) -> None:
        """The consume arguments, then exclusive use, as RabbitMQ orders them."""
        A.check_consume_arguments(arguments, self.name, self.vhost.name)
        if self.consumers and (exclusive or any(c.exclusive for c in self.consumers)):
            raise AmqpError(ReplyCode.ACCESS_REFUSED, f"{self.vhost.rs('queue', self.name)} in exclusive use")

    def check_delete(self, *, if_unused: bool, if_empty: bool) -> None:
        if if_unused and self.consumers:
            raise precondition_failed(f"{self.vhost.rs('queue', self.name)} in use")
        if if_empty and self.message_count:
            raise precondition_failed(f"{self.vhost.rs('queue', self.name)} not empty")

    # -- bookkeeping -------------------------------------------------------------------------

    @property
    def message_count(self) -> int:
        self.drop_expired()
        return self.count

    @property
    def active_consumer(self) -> Consumer | None:
        selection = self.selection
        return selection.active if selection.one_active else None

    @property
    def sac_active(self) -> Consumer | None:
        """The single active consumer (`active_consumer`)."""
        return self.active_consumer

    def _level(self, msg: StoredMessage) -> deque[Entry]:
        if not self.max_priority:
            return self.levels[0]
        prio = msg.prop("priority") if msg.flags & PRIORITY_FLAG else 0
        return self.levels[min(prio or 0, self.max_priority)]

    def reset_expiry(self) -> None:
        """(Re)arm the x-expires timer: the queue dies after being unused that long."""
        if self.expires is None or self.deleted:
            return
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None
        if self.consumers:
            return
        self._expiry_timer = self.clock.call_later(self.expires / 1000.0, self._expired_unused)

    def _expired_unused(self) -> None:
        self._expiry_timer = None
        if not self.deleted and not self.consumers:
            self.vhost.delete_queue(self, reason="expired")

    # -- publishing ----------------------------------------------------------------------------

    def _expiry_for(self, msg: StoredMessage, now: float) -> float:
        ttl = self.message_ttl
        if msg.flags & EXPIRATION_FLAG:
            value = msg.prop("expiration")
            if value is not None:
                per = parse_expiration(value)
                ttl = per if ttl is None else min(ttl, per)
        if ttl is None:
            return 0.0
        self.uses_ttl = True
        return now + ttl / 1000.0

    def would_overflow(self, size: int) -> bool:
        """True when a reject-publish queue is full (checked before enqueueing)."""
        if self.overflow == "drop-head":
            return False
        self.drop_expired()
        if self.max_length is not None and self.count >= self.max_length:
            return True
        return self.max_length_bytes is not None and self.bytes + size > self.max_length_bytes

    def enqueue(self, msg: StoredMessage, seq: int = 0) -> None:
        """deliver_or_enqueue: with nothing ready, a consumer with credit takes the message at once
        (attempt_delivery, before any length limit or TTL applies); otherwise it joins the queue,
        and a message that expires on arrival (TTL 0) is dead-lettered instead."""
        if not seq:
            seq = self.seq = self.seq + 1
        expires = 0.0
        now = 0.0
        if self.uses_ttl or msg.flags & EXPIRATION_FLAG:  # only an expiring message reads the clock
            now = self.clock.now()
            expires = self._expiry_for(msg, now)
        entry = Entry(seq, msg, expires)
        if not self.count and self.consumers and not self._delivering and not self.deleted:
            c = self.selection.next()
            if c is not None:
                self._deliver(c, entry)
                return
        if expires and expires <= now:
            self.dead_letter([entry], "expired")
            return
        # the priority lookup only where priorities exist: this is every publish's path
        level = self._level(msg) if self.max_priority else self.levels[0]
        if (self.pager is None and self.count < self.page_window and self.bytes < self.page_bytes) or (
            not page_out(self, level, entry)
        ):
            level.append(entry)
        self.count += 1
        self.bytes += len(msg.body)
        if self.max_length is not None or self.max_length_bytes is not None:
            self._enforce_limits()
        if self.consumers:
            self.try_deliver()
        if self.count and expires:
            self._arm_ttl()

    def restore(self, seq: int, msg: StoredMessage, redelivered: bool) -> None:
        expires = 0.0
        if self.uses_ttl or msg.flags & EXPIRATION_FLAG:
            expires = self._expiry_for(msg, self.clock.now())
        entry = Entry(seq, msg, expires)
        entry.redelivered = redelivered
        self._level(msg).append(entry)
        self.count += 1
        self.bytes += len(msg.body)
        if seq > self.seq:
            self.seq = seq
        if expires:
            self._arm_ttl()

    def _enforce_limits(self) -> None:
        if self.overflow != "drop-head":
            return
        dropped: list[Entry] = []
        while self.count and (
            (self.max_length is not None and self.count > self.max_length)
            or (self.max_length_bytes is not None and self.bytes > self.max_length_bytes)
        ):
            entry = self._pop_head()
            if entry is None:
                break
            dropped.append(entry)
        if dropped:
            self.dead_letter(dropped, "maxlen")

    # -- taking messages ---------------------------------------------------------------------

    def _pop_head(self) -> Entry | None:
        for level in reversed(self.levels) if self.max_priority else self.levels:
            if level:
                entry = level.popleft()
                self.count -= 1
                self.bytes -= len(entry.msg.body)
                if self.pager is not None and len(level) < REFILL_BELOW:
                    self.pager.refill(level)
                return entry
        return None

    def drop_expired(self) -> None:
        """Dead-letter the expired messages at the head (of each priority level), as RabbitMQ's
        drop_expired_msgs: an expired message behind a live one waits until it is the head."""
        if not self.uses_ttl or not self.count:
            return
        now = self.clock.now()
        expired: list[Entry] = []
        pager = self.pager
        for level in self.levels:
            while level and level[0].expires and level[0].expires <= now:
                entry = level.popleft()
                self.count -= 1
                self.bytes -= len(entry.msg.body)
                expired.append(entry)
                if pager is not None and len(level) < REFILL_BELOW:
                    pager.refill(level)
        if expired:
            self.dead_letter(expired, "expired")
        if self.count:
            self._arm_ttl()

    def _arm_ttl(self) -> None:
        soonest = min((lv[0].expires for lv in self.levels if lv and lv[0].expires), default=0.0)
        if not soonest:
            return
        if self._ttl_timer is not None and self._ttl_at <= soonest:
            return
        if self._ttl_timer is not None:
            self._ttl_timer.cancel()
        self._ttl_at = soonest
        delay = max(0.0, soonest - self.clock.now())
        self._ttl_timer = self.clock.call_later(delay + 0.001, self._ttl_fire)

    def _ttl_fire(self) -> None:
        self._ttl_timer = None
        if not self.deleted:
            self.drop_expired()

    def _deliver(self, c: Consumer, entry: Entry) -> None:
        """Give a message to a consumer: the one place a delivery is counted in message_stats."""
        if c.no_ack:
            self.stat_deliver_no_ack += 1
        else:
            self.unacked += 1
            self.stat_deliver += 1
        if entry.redelivered:
            self.stat_redeliver += 1
        c.channel.deliver(c, self, entry)

    def try_deliver(self) -> None:
        """Hand the ready messages to consumers with credit, in the order `selection` picks them."""
        if self._delivering or not self.consumers or not self.count or self.deleted:
            return
        self._delivering = True
        try:
            if self.uses_ttl:
                self.drop_expired()
            pick = self.selection.next
            while self.count:
                c = pick()
                if c is None:
                    return
                entry = self._pop_head()
                if entry is None:
                    return
                if entry.expires and entry.expires <= self.clock.now():
                    self.dead_letter([entry], "expired")
                    continue
                self._deliver(c, entry)
        finally:
            self._delivering = False

    def _count_get(self, entry: Entry, no_ack: bool) -> None:
        """basic.get's message_stats counters for a fetched message."""
        if no_ack:
            self.stat_get_no_ack += 1
        else:
            self.stat_get += 1
        if entry.redelivered:
            self.stat_redeliver += 1

    def get(self, no_ack: bool) -> Entry | None:
        """basic.get. After taking the head, the expired messages it exposed are dropped before the
        caller reads `count` for get-ok, as rabbit_amqqueue_process:fetch does."""
        if self.uses_ttl:
            self.drop_expired()
        self.reset_expiry()
        entry = self._pop_head()
        if entry is None:
            self.stat_empty_get = True
            return None
        self._count_get(entry, no_ack)
        if self.uses_ttl:
            self.drop_expired()
        return entry

    @property
    def stats(self) -> dict[str, int]:
        """The queue's message_stats counters as RabbitMQ 3.10.8 reports them (observed live).

        `publish` appears once a message entered the queue; the deliver-side keys once a basic.get
        or a delivery happened, zeros included. `get_empty` stays 0: 3.10.8 counts empty gets per
        channel, never per queue.
        """
        out: dict[str, int] = {}
        if self.seq or self.stat_refused:
            out["publish"] = self.seq + self.stat_refused
        delivered = self.stat_deliver + self.stat_deliver_no_ack + self.stat_get + self.stat_get_no_ack
        if delivered or self.stat_empty_get:
            out["ack"] = self.stat_ack
            out["deliver"] = self.stat_deliver
            out["deliver_no_ack"] = self.stat_deliver_no_ack
            out["get"] = self.stat_get
            out["get_no_ack"] = self.stat_get_no_ack
            out["get_empty"] = 0
            out["deliver_get"] = delivered
            out["redeliver"] = self.stat_redeliver
        return out

    def requeue(self, entries: list[Entry]) -> None:
        """Put entries back at their original positions, marked redelivered."""
        for entry in sorted(entries, key=lambda e: e.seq, reverse=True):
            entry.redelivered = True
            level = self._level(entry.msg)
            if not level or entry.seq < level[0].seq:
                level.appendleft(entry)
            else:
                idx = bisect.bisect_left(level, entry)
                level.insert(idx, entry)
            self.count += 1
            self.bytes += len(entry.msg.body)
        if self.max_length is not None or self.max_length_bytes is not None:
            self._enforce_limits()
        if self.uses_ttl:
            # a message whose TTL ran out while it was unacked expires as soon as it is back (RabbitMQ
            # 3.10.8 dead-letters it, reason expired); the TTL timer may have fired meanwhile for a
            # later message, so nothing else would look at the requeued head
            self.drop_expired()
        self.try_deliver()

    def settled(self, n: int = 1) -> None:
        self.unacked -= n

    forget_unstored = forget_ready

    def ack(self, entries: Sequence[Entry]) -> None:
        self.unacked -= len(entries)
        self.stat_ack += len(entries)

    def purge(self) -> int:
        n = self.count
        persistence = self.vhost.persistence
        pager = self.pager
        if self.store is not None and n and persistence is not None:
            # the unacked messages stay stored, so the paged ones must be named one by one
            ready = [e for level in self.levels for e in level]
            paged = pager.stored_seqs() if pager is not None and self.unacked else []
            if paged:
                persistence.queue_purged(self, ready, paged)
            else:
                persistence.queue_purged(self, ready)
        if pager is not None:
            pager.clear()
        for level in self.levels:
            level.clear()
        self.count = 0
        self.bytes = 0
        return n

    def delete(self) -> int:
        n = self.count
        self.deleted = True
        for consumer in list(self.consumers):
            consumer.channel.consumer_cancelled_by_server(consumer)
        self.selection.clear()
        for timer in (self._ttl_timer, self._expiry_timer):
            if timer is not None:
                timer.cancel()
        self._ttl_timer = self._expiry_timer = None
        self.purge()
        return n

    # -- consumers ----------------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        self.had_consumers = True
        self.selection.add(consumer, self.name, self.vhost.active_consumer_selection)
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None
        self.try_deliver()

    def remove_consumer(self, consumer: Consumer) -> None:
        if not self.selection.remove(consumer, self.name, self.vhost.active_consumer_selection):
            return
        if not self.consumers:
            if self.auto_delete and self.had_consumers:
                self.vhost.delete_queue(self, reason="auto_delete")
                return
            self.reset_expiry()
        else:
            self.try_deliver()

    def select_active(self) -> None:
        """Re-choose the single active consumer (after the vhost's selection mode changed)."""
        self.selection.reselect(self.name, self.vhost.active_consumer_selection)

    def apply_policy(self, policy: Policy | None) -> None:
        """Apply an effective policy (or None) combined with the x-arguments (broker.entities.policy
        rules)."""
        from broker.entities.policy import queue_settings

        self.policy = policy
        args = {k: _plain(f) for k, f in self.arguments if k.startswith("x-")}
        st = queue_settings(policy, args)
        self.message_ttl = st.get("message-ttl")
        old_expires = self.expires
        self.expires = st.get("expires")
        self.max_length = st.get("max-length")
        self.max_length_bytes = st.get("max-length-bytes")
        self.overflow = st.get("overflow") or "drop-head"
        self.dlx = st.get("dead-letter-exchange")
        self.dlrk = st.get("dead-letter-routing-key")
        if self.message_ttl is not None:
            self.uses_ttl = True
        if self.expires != old_expires:
            if self._expiry_timer is not None and self.expires is None:
                self._expiry_timer.cancel()
                self._expiry_timer = None
            self.reset_expiry()
        if self.max_length is not None or self.max_length_bytes is not None:
            self._enforce_limits()

    # -- dead lettering ------------------------------------------------------------------------

    def dead_letter(self, entries: list[Entry], reason: str) -> None:
        persistence = self.vhost.persistence
        if self.store is not None and entries and persistence is not None:  # gone from the store too
            persistence.messages_removed(self, entries)
        if not entries or self.dlx is None:
            return
        self.vhost.dead_letter(self, [e.msg for e in entries], reason)
