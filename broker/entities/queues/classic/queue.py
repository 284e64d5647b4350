"""The classic queue type: ready messages, TTL, length limits, dead-lettering, priorities.

Delivery is push-based and synchronous: publishing, acking, consuming or a writer resuming calls
`try_deliver`, which hands ready messages to the consumer `broker.entities.queues.consumers` picks while
its channel has credit (prefetch) and its connection's transport is not paused. No task per queue;
message TTL and x-expires run on the vhost's clock, writes go to its injected persistence. The
messages themselves are a `ReadyList` (priority levels, TTL, limits, paging), the consumers a
`QueueConsumers`, x-expires an `IdleExpiry`: the parts a quorum queue composes too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Unpack

from amqpwire.errors import access_refused, precondition_failed, resource_name
from amqpwire.fields import FieldTable
from broker.entities.message import EXPIRATION_FLAG, StoredMessage
from broker.entities.queues import arguments as A
from broker.entities.queues.base import Consumer, Declared, Entry, PageSpool, QueueHost, register
from broker.entities.queues.held import HeldQueue
from broker.entities.queues.ready import ReadyList

if TYPE_CHECKING:
    from broker.entities.policy import Policy
    from broker.entities.queues.classic.paging import Backlog, Pager


def _classic_overflow(value: str | None) -> str:
    return value or "drop-head"


@register
class ClassicQueue(HeldQueue):
    type_name = "classic"

    def __init__(self, vhost: QueueHost, name: str, **declared: Unpack[Declared]) -> None:
        super().__init__(vhost, name, **declared)
        self.max_priority = A.int_value(self.arguments.get("x-max-priority")) or 0
        self.hold(ReadyList(self, max_priority=self.max_priority), _classic_overflow)
        self.reset_expiry()

    @classmethod
    def validate_arguments(
        cls, args: FieldTable, qname: str, vhost: str, *, durable: bool, exclusive: bool, auto_delete: bool
    ) -> None:
        A.check_classic_arguments(args, resource_name("queue", qname, vhost), exclusive=exclusive)

    def check_equivalent(self, durable: bool, auto_delete: bool, arguments: FieldTable) -> None:
        A.check_redeclare(self, durable, auto_delete, arguments, A.CLASSIC_QUEUE_ARGS)

    def check_consume(self, arguments: FieldTable, *, exclusive: bool, no_ack: bool, prefetch: int) -> None:
        """The consume arguments, then exclusive use, as RabbitMQ orders them."""
        A.check_consume_arguments(arguments, self.rs)
        if self.consumers and (exclusive or any(c.exclusive for c in self.consumers)):
            raise access_refused(f"{self.rs} in exclusive use")

    def check_delete(self, *, if_unused: bool, if_empty: bool) -> None:
        if if_unused and self.consumers:
            raise precondition_failed(f"{self.rs} in use")
        if if_empty and self.message_count:
            raise precondition_failed(f"{self.rs} not empty")

    # -- reading -------------------------------------------------------------------------------

    @property
    def pager(self) -> Pager | None:
        """Where the messages past the in-memory window are (None until the window was full)."""
        return self.ready.pager

    @property
    def page_window(self) -> int:
        """How many messages stay in memory before new ones page out."""
        return self.ready.page_window

    @property
    def sac_active(self) -> Consumer | None:
        """The single active consumer (`active_consumer`)."""
        return self.selection.chosen

    # -- x-expires -----------------------------------------------------------------------------

    def reset_expiry(self) -> None:
        """(Re)start the x-expires countdown: the queue dies after being unused that long."""
        self.restart_expiry()

    # -- publishing ----------------------------------------------------------------------------

    def would_overflow(self, size: int) -> bool:
        """True when a reject-publish queue is full (checked before enqueueing)."""
        if self._overflow == "drop-head":
            return False
        self.ready.drop_expired()
        return self.ready.full(size)

    def enqueue(self, msg: StoredMessage, seq: int = 0) -> None:
        """deliver_or_enqueue: with nothing ready, a consumer with credit takes the message at once
        (attempt_delivery, before any length limit or TTL applies); otherwise it joins the queue,
        and a message that expires on arrival (TTL 0) is dead-lettered instead."""
        if not seq:
            seq = self.seq = self.seq + 1
        ready = self.ready
        expires = 0.0
        if ready.uses_ttl or msg.flags & EXPIRATION_FLAG:  # only an expiring message reads the clock
            expires = ready.expiry_at(msg, self.clock.now())
        entry = Entry(seq, msg, expires)
        if not ready.count and self.consumers and not ready.delivering and not self.deleted:
            c = self.selection.next()
            if c is not None:
                self.deliver_to(c, entry)
                return
        if expires and expires <= self.clock.now():
            self.dead_letter([entry], "expired")
            return
        # the priority lookup only where priorities exist: this is every publish's path
        ready.add(entry, ready.level_of(msg) if self.max_priority else 0)
        if ready.limited and self._overflow == "drop-head":
            ready.trim()
        if self.consumers:
            self.try_deliver()
        if expires and ready.count:
            ready.arm_ttl()

    def enqueue_run(self, msgs: list[StoredMessage]) -> None:
        """`enqueue` of each of `msgs`, in order. When none can be delivered, expire or be dropped
        on the way in (no consumer, no TTL, no length limit, no priorities), they join the ready
        list together; anything else takes them one by one."""
        ready = self.ready
        if self.consumers or ready.uses_ttl or ready.limited or self.max_priority or self.deleted:
            super().enqueue_run(msgs)
            return
        entries: list[Entry] = []
        seq = self.seq
        for msg in msgs:
            if msg.flags & EXPIRATION_FLAG:  # from here on, one by one
                break
            seq += 1
            entries.append(Entry(seq, msg, 0.0))
        self.seq = seq
        ready.add_run(entries)
        super().enqueue_run(msgs[len(entries) :])

    def restore(self, seq: int, msg: StoredMessage, redelivered: bool) -> None:
        entry = Entry(seq, msg, self.ready.expiry(msg))
        entry.redelivered = redelivered
        self.ready.restore(entry)
        if seq > self.seq:
            self.seq = seq
        if entry.expires:
            self.ready.arm_ttl()

    def restore_backlog(self, backlog: Backlog, last_seq: int, new_spool: Callable[[], PageSpool]) -> None:
        """Put back the stored messages at boot without reading them: they are read as the head
        advances (broker.entities.queues.classic.paging). Only for a queue without priorities."""
        self.ready.restore_backlog(backlog, new_spool)
        self.seq = max(self.seq, last_seq)

    # -- taking messages -----------------------------------------------------------------------

    def try_deliver(self) -> None:
        """Hand the ready messages to consumers with credit, in the order `selection` picks them."""
        if self.consumers and not self.deleted:
            self.ready.dispatch(self.selection.next, self.deliver_to)

    def get(self, no_ack: bool) -> Entry | None:
        """basic.get. After taking the head, the expired messages it exposed are dropped before the
        caller reads `count` for get-ok, as rabbit_amqqueue_process:fetch does."""
        ready = self.ready
        ready.drop_expired()
        self.reset_expiry()
        entry = ready.pop()
        if entry is None:
            self.stat_empty_get = True
            return None
        self.count_get(entry, no_ack)
        ready.drop_expired()
        return entry

    def requeue(self, entries: list[Entry]) -> None:
        """Put entries back at their original positions, marked redelivered."""
        ready = self.ready
        for entry in sorted(entries, key=lambda e: e.seq, reverse=True):
            entry.redelivered = True
            ready.put_back(entry)
        if ready.limited and self._overflow == "drop-head":
            ready.trim()
        # a message whose TTL ran out while it was unacked expires as soon as it is back (RabbitMQ
        # 3.10.8 dead-letters it, reason expired); the TTL timer may have fired meanwhile for a
        # later message, so nothing else would look at the requeued head
        ready.drop_expired()
        self.try_deliver()

    def forget_unstored(self, seq: int) -> bool:
        """Take a ready message whose store write failed back out (a reject-publish queue may
        reopen: the limits are judged again)."""
        if not self.ready.forget(seq):
            return False
        if self._overflow == "drop-head":
            self.ready.trim()
        return True

    def purge(self) -> int:
        return self.ready.purge()

    # -- policies ------------------------------------------------------------------------------

    def apply_policy(self, policy: Policy | None) -> None:
        self.take_policy(policy)
        if self.ready.limited and self._overflow == "drop-head":
            self.ready.trim()
