"""A classic queue: ready messages, consumers, TTL, length limits, dead-lettering, priorities.

Delivery is push-based and synchronous: publishing, acking, consuming or a writer resuming calls
`try_deliver`, which hands ready messages to consumers round-robin while their channels have
credit (prefetch) and their connection's transport is not paused. No task per queue.
"""

from __future__ import annotations

import bisect
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

from amqpwire.fields import Field, FieldTable
from broker.message import EXPIRATION_FLAG, PRIORITY_FLAG, StoredMessage, parse_expiration

if TYPE_CHECKING:
    import asyncio

    from broker.entities.vhost import VHost
    from broker.store import Store


class Entry:
    """One message in one queue. `seq` is its original position, kept across requeues."""

    __slots__ = ("expires", "msg", "redelivered", "seq")

    def __init__(self, seq: int, msg: StoredMessage, expires: float) -> None:
        self.seq = seq
        self.msg = msg
        self.redelivered = False
        self.expires = expires

    def __lt__(self, other: Entry) -> bool:
        return self.seq < other.seq


class ConsumerChannel(Protocol):
    """What a queue needs from the channel that owns a consumer."""

    def can_deliver(self, consumer: Consumer) -> bool: ...
    def deliver(self, consumer: Consumer, queue: Queue, entry: Entry) -> None: ...
    def consumer_cancelled_by_server(self, consumer: Consumer) -> None: ...


class Consumer:
    __slots__ = (
        "args",
        "channel",
        "exclusive",
        "group",
        "no_ack",
        "prefetch",
        "priority",
        "queue",
        "tag",
        "tag_wire",
        "unacked",
    )

    def __init__(
        self,
        channel: ConsumerChannel,
        tag: str,
        queue: Queue,
        no_ack: bool,
        exclusive: bool,
        prefetch: int,
        args: FieldTable,
        priority: int = 0,
    ) -> None:
        self.channel = channel
        self.tag = tag
        raw = tag.encode("utf-8", errors="surrogateescape")
        self.tag_wire = bytes((len(raw),)) + raw
        self.queue = queue
        self.no_ack = no_ack
        self.exclusive = exclusive
        self.prefetch = prefetch
        self.unacked = 0
        self.args = args
        self.priority = priority
        # issue 4: the members (one per local shard) of one consumer of a sharded pseudo-queue under
        # consistent-hash selection; they share the consumer's tag and prefetch. None otherwise.
        self.group: list[Consumer] | None = None


def _consumer_key(c: Consumer) -> str:
    """PIP-392 ring name: the x-consumer-name consume argument, else the consumer tag."""
    name = _str_arg(c.args, "x-consumer-name")
    return name if name is not None else c.tag


def _plain(f: Field) -> Any:
    return f.value.decode("utf-8", "surrogateescape") if f.type == "longstr" else f.value


class _Ring:
    """A cached HashRing over consumer keys; maps the ring owner back to a position in `keys`."""

    def __init__(self, keys: tuple[str, ...]) -> None:
        from broker.active_consumers import HashRing

        self.ring = HashRing(list(keys))

    def owner_index_in(self, queue_name: str, keys: tuple[str, ...]) -> int:
        owner = self.ring.owner(queue_name)
        return keys.index(owner if isinstance(owner, str) else owner.key)


_RINGS: dict[tuple[str, ...], _Ring] = {}


def _ring(keys: tuple[str, ...]) -> _Ring:
    ring = _RINGS.get(keys)
    if ring is None:
        if len(_RINGS) > 256:
            _RINGS.clear()
        ring = _RINGS[keys] = _Ring(keys)
    return ring


def _int_arg(args: FieldTable, key: str) -> int | None:
    f = args.get(key)
    return int(f.value) if f is not None else None


def _str_arg(args: FieldTable, key: str) -> str | None:
    f = args.get(key)
    if f is None or f.type != "longstr":
        return None
    return str(f.value.decode("utf-8", errors="surrogateescape"))


class Queue:
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
        self.vhost = vhost
        self.name = name
        raw = name.encode("utf-8", errors="surrogateescape")
        self.name_wire = bytes((len(raw),)) + raw
        self.durable = durable
        self.exclusive_owner = exclusive_owner
        self.auto_delete = auto_delete
        self.arguments = arguments
        self.message_ttl = _int_arg(arguments, "x-message-ttl")
        self.expires = _int_arg(arguments, "x-expires")
        self.max_length = _int_arg(arguments, "x-max-length")
        self.max_length_bytes = _int_arg(arguments, "x-max-length-bytes")
        self.overflow = _str_arg(arguments, "x-overflow") or "drop-head"
        self.dlx = _str_arg(arguments, "x-dead-letter-exchange")
        self.dlrk = _str_arg(arguments, "x-dead-letter-routing-key")
        mp = _int_arg(arguments, "x-max-priority")
        self.max_priority = mp if mp else 0
        sac = arguments.get("x-single-active-consumer")
        self.single_active = bool(sac is not None and sac.type == "bool" and sac.value)
        self.levels: list[deque[Entry]] = [deque() for _ in range(self.max_priority + 1)]
        self.count = 0
        self.bytes = 0
        self.seq = 0
        self.consumers: deque[Consumer] = deque()
        self.prioritized = False  # some consumer has a non-zero x-priority
        self.unacked = 0
        # management message_stats, RabbitMQ's per-queue counters (`seq` is the publish count), bumped
        # where messages leave; `stat_empty_get`: a basic.get found the queue empty (see `stats`)
        self.stat_deliver = self.stat_deliver_no_ack = self.stat_get = self.stat_get_no_ack = 0
        self.stat_redeliver = self.stat_ack = 0
        self.stat_empty_get = False
        self.deleted = False
        self.had_consumers = False
        self._ttl_timer: asyncio.TimerHandle | None = None
        self._ttl_at = 0.0
        self._expiry_timer: asyncio.TimerHandle | None = None
        self._delivering = False
        self.uses_ttl = self.message_ttl is not None
        # issue 5: set by VHost.add_queue for a durable queue when the broker persists (else None)
        self.store: Store | None = None
        self.policy: Any = None  # effective broker.policy.Policy (issue 4)
        self.sac_active: Consumer | None = None  # single active consumer (issue 4 selection)
        # issue 4: consumers attached through a sharded pseudo-queue under consistent-hash selection
        # make a shard deliver to one ring-chosen consumer at a time, as a single-active queue does
        self.ring_members = 0
        self.one_active = self.single_active
        self.reset_expiry()

    # -- bookkeeping -------------------------------------------------------------------------

    @property
    def message_count(self) -> int:
        self.drop_expired()
        return self.count

    @property
    def consumer_count(self) -> int:
        return len(self.consumers)

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
        loop = self.vhost.loop
        if loop is not None:
            self._expiry_timer = loop.call_later(self.expires / 1000.0, self._expired_unused)

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
        """`seq`: a position reserved beforehand (broker.durability.persist_publish), else the next."""
        if not seq:
            seq = self.seq = self.seq + 1
        expires = 0.0
        if self.uses_ttl or msg.flags & EXPIRATION_FLAG:  # only an expiring message reads the clock
            now = time.monotonic()
            expires = self._expiry_for(msg, now)
            if expires and expires <= now:
                # Zero TTL: rabbit_amqqueue_process:deliver_or_enqueue first offers the message to
                # a consumer with credit (attempt_delivery) and only expires it if none takes it.
                entry = Entry(seq, msg, expires)
                consumer = self._ready_consumer() if not self.count else None
                if consumer is None:
                    self.dead_letter([entry], "expired")
                    return
                if not consumer.no_ack:
                    self.unacked += 1
                consumer.channel.deliver(consumer, self, entry)
                return
        # the priority lookup only where priorities exist: this is every publish's path
        (self._level(msg) if self.max_priority else self.levels[0]).append(Entry(seq, msg, expires))
        self.count += 1
        self.bytes += len(msg.body)
        if self.max_length is not None or self.max_length_bytes is not None:
            self._enforce_limits()
        if self.consumers:
            self.try_deliver()
        if self.count and expires:
            self._arm_ttl()

    def _ready_consumer(self) -> Consumer | None:
        """The consumer the next message goes to (round-robin, rotating past it), or None."""
        consumers = self.consumers
        if not consumers:
            return None
        if self.one_active:
            c = self.sac_active or consumers[0]
            return c if c.channel.can_deliver(c) else None
        if self.prioritized:
            return self._pick_prioritized()
        for _ in range(len(consumers)):
            c = consumers[0]
            consumers.rotate(-1)
            if c.channel.can_deliver(c):
                return c
        return None

    def _pick_prioritized(self) -> Consumer | None:
        """The consumer with credit in the highest x-priority band, round-robin within the band only.

        RabbitMQ 3.10.8 keeps consumers in a priority queue: a higher-priority consumer gets every
        message while it has prefetch credit (observed: x-priority 10 with prefetch 2 took m0, m1,
        the priority-0 consumer the rest). Rotating the whole list, as for equal priorities, let a
        lower-priority consumer take m1 in between.
        """
        consumers = self.consumers
        items = list(consumers)
        n = len(items)
        start = 0
        while start < n:
            prio = items[start].priority
            end = start
            while end < n and items[end].priority == prio:
                end += 1
            for i in range(start, end):
                c = items[i]
                if c.channel.can_deliver(c):
                    # as the plain rotation: skipped (blocked) ones and c move to the band's end
                    items[start:end] = items[i + 1 : end] + items[start : i + 1]
                    consumers.clear()
                    consumers.extend(items)
                    return c
            start = end
        return None

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
                return entry
        return None

    def _peek_head(self) -> Entry | None:
        for level in reversed(self.levels) if self.max_priority else self.levels:
            if level:
                return level[0]
        return None

    def drop_expired(self) -> None:
        if not self.uses_ttl or not self.count:
            return
        now = time.monotonic()
        expired: list[Entry] = []
        for level in self.levels:
            while level and level[0].expires and level[0].expires <= now:
                entry = level.popleft()
                self.count -= 1
                self.bytes -= len(entry.msg.body)
                expired.append(entry)
        if expired:
            self.dead_letter(expired, "expired")
        if self.count:
            self._arm_ttl()

    def _arm_ttl(self) -> None:
        loop = self.vhost.loop
        if loop is None:
            return
        head = self._peek_head()
        soonest = min((lv[0].expires for lv in self.levels if lv and lv[0].expires), default=0.0)
        if head is None or not soonest:
            return
        if self._ttl_timer is not None and self._ttl_at <= soonest:
            return
        if self._ttl_timer is not None:
            self._ttl_timer.cancel()
        self._ttl_at = soonest
        delay = max(0.0, soonest - time.monotonic())
        self._ttl_timer = loop.call_later(delay + 0.001, self._ttl_fire)

    def _ttl_fire(self) -> None:
        self._ttl_timer = None
        if not self.deleted:
            self.drop_expired()

    def try_deliver(self) -> None:
        """Push ready messages to consumers with credit, round-robin."""
        if self._delivering or not self.consumers or not self.count or self.deleted:
            return
        self._delivering = True
        try:
            if self.uses_ttl:
                self.drop_expired()
            consumers = self.consumers
            while self.count and consumers:
                if self.one_active:
                    c = self.sac_active or consumers[0]
                    if not c.channel.can_deliver(c):
                        return
                elif self.prioritized:
                    picked = self._pick_prioritized()
                    if picked is None:
                        return
                    c = picked
                else:
                    for _ in range(len(consumers)):
                        c = consumers[0]
                        if c.channel.can_deliver(c):
                            consumers.rotate(-1)
                            break
                        consumers.rotate(-1)
                    else:
                        return
                entry = self._pop_head()
                if entry is None:
                    return
                if entry.expires and entry.expires <= time.monotonic():
                    self.dead_letter([entry], "expired")
                    continue
                if c.no_ack:
                    self.stat_deliver_no_ack += 1
                else:
                    self.unacked += 1
                    self.stat_deliver += 1
                if entry.redelivered:
                    self.stat_redeliver += 1
                c.channel.deliver(c, self, entry)
        finally:
            self._delivering = False

    def get(self, no_ack: bool) -> Entry | None:
        """basic.get: take the head message (the caller records it as unacked if needed)."""
        if self.uses_ttl:
            self.drop_expired()
        self.reset_expiry()
        entry = self._pop_head()
        if entry is None:
            self.stat_empty_get = True
        elif no_ack:
            self.stat_get_no_ack += 1
        else:
            self.stat_get += 1
        if entry is not None and entry.redelivered:
            self.stat_redeliver += 1
        return entry

    @property
    def stats(self) -> dict[str, int]:
        """The queue's message_stats counters as RabbitMQ 3.10.8 reports them (observed live).

        `publish` appears once a message entered the queue; the deliver-side keys once a basic.get
        or a delivery happened, zeros included. `get_empty` stays 0: 3.10.8 counts empty gets per
        channel, never per queue.
        """
        out: dict[str, int] = {}
        if self.seq:
            out["publish"] = self.seq
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
        """Unacked messages left the queue (acked, rejected, or requeued)."""
        self.unacked -= n

    def purge(self) -> int:
        n = self.count
        if self.store is not None and n:  # store: forget the ready messages (unacked ones stay)
            if self.unacked:
                from broker.durability import stored_seqs

                seqs = [s for level in self.levels for s in stored_seqs(level)]
                self.store.remove_messages(self.vhost.name, self.name, seqs)
            else:
                self.store.purge_queue(self.vhost.name, self.name)
        for level in self.levels:
            level.clear()
        self.count = 0
        self.bytes = 0
        return n

    # -- consumers ----------------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        self.had_consumers = True
        if consumer.group is not None:
            self.ring_members += 1
            self.one_active = True
        if consumer.priority and not self.one_active:
            self.prioritized = True
        if self.prioritized and not self.one_active:
            # higher x-priority consumers go first; equal priorities keep arrival order
            items = self.consumers
            idx = next((i for i, c in enumerate(items) if c.priority < consumer.priority), len(items))
            items.insert(idx, consumer)
        else:
            self.consumers.append(consumer)
        if self.one_active:
            self.select_active()
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None
        self.try_deliver()

    def remove_consumer(self, consumer: Consumer) -> None:
        try:
            self.consumers.remove(consumer)
        except ValueError:
            return
        if self.prioritized and consumer.priority:
            self.prioritized = any(c.priority for c in self.consumers)
        if consumer.group is not None:
            self.ring_members -= 1
            self.one_active = self.single_active or self.ring_members > 0
        if self.one_active:
            self.select_active()
        if not self.consumers:
            if self.auto_delete and self.had_consumers:
                self.vhost.delete_queue(self, reason="auto_delete")
                return
            self.reset_expiry()
        else:
            self.try_deliver()

    # -- issue 4: single active consumer selection, policies ------------------------------------------

    def select_active(self) -> None:
        """(Re)choose the single active consumer: registration order ("first", RabbitMQ 3.10) or
        Pulsar's consumer ring ("consistent-hash", PIP-392). A demoted consumer keeps its unacked
        deliveries (as RabbitMQ keeps a cancelled SAC consumer's), so the switch itself never
        delivers a message twice; the new active one gets the ready messages."""
        consumers = self.consumers
        if not consumers:
            self.sac_active = None
            return
        ring = self.ring_members > 0 or self.vhost.active_consumer_selection == "consistent-hash"
        if not ring or len(consumers) == 1:
            self.sac_active = consumers[0]
            return
        keys = tuple(_consumer_key(c) for c in consumers)
        self.sac_active = consumers[_ring(keys).owner_index_in(self.name, keys)]

    def apply_policy(self, policy: Any) -> None:
        """Apply an effective policy (or None) combined with the x-arguments (broker.policy rules)."""
        from broker.policy import queue_settings

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
        if self.store is not None and entries:  # store: rejected, dropped or expired: gone from here
            from broker.durability import stored_seqs

            self.store.remove_messages(self.vhost.name, self.name, stored_seqs(entries))
        if not entries or self.dlx is None:
            return
        self.vhost.dead_letter(self, [e.msg for e in entries], reason)

    def header_field(self) -> Field:
        return Field("longstr", self.name.encode())
