"""The quorum queue type (x-queue-type: quorum) with RabbitMQ 3.10.8's observable behaviour.

RabbitMQ keeps a quorum queue in a Raft state machine (rabbit_fifo); hashbroker keeps only what a
client can observe of it, composing the parts a classic queue composes too (a ready list for
messages, TTL and limits; consumer selection; the x-expires countdown):

* every message carries a delivery count: a return (nack/reject with requeue, or a closed channel)
  adds one; consumer deliveries show it as `x-delivery-count` from the first return on, basic.get
  always shows it; the stored message never carries it (a dead-lettered copy has none);
* returns go to the back without `x-delivery-limit` (re-enqueued) and to a `returns` list served
  before the other messages with one; a closed channel's messages always go to `returns`; a message
  returned more often than the limit is dead-lettered with reason `delivery_limit`;
* `x-overflow: reject-publish` lets one message over the limit in, then refuses publishes until the
  ready (+ dead-letter held) messages are at or below 80% of it; `reject-publish-dlx` is drop-head;
* `x-dead-letter-strategy: at-least-once` (with reject-publish) keeps a dead letter that no queue
  took in the queue's dead-letter store and retries it on a timer, as rabbit_fifo_dlx does
  (broker.entities.queues.quorum.dlx);
* across a restart the queue keeps what its Raft log keeps: every message, transient ones too,
  with its delivery count; the store marks which were checked out (delivered, unacked), and a
  restart returns those as rabbit_fifo does when the leader learns the consumers are gone
  (`return_all`: each return counts, over the limit is dead-lettered, the rest wait in `returns`);
  the dead-letter store's messages are held again; members and leader are those of its record.
Raft's timing (leader election, replication) is not emulated.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Unpack

from amqpwire.errors import not_implemented, resource_locked
from amqpwire.fields import Field, FieldTable, name_bytes
from broker.entities.message import StoredMessage
from broker.entities.queues import arguments as A
from broker.entities.queues.base import Consumer, Declared, Entry, QueueHost, register
from broker.entities.queues.held import HeldQueue
from broker.entities.queues.quorum import arguments as QA
from broker.entities.queues.quorum.dlx import DeadLetterStore
from broker.entities.queues.quorum.membership import place
from broker.entities.queues.quorum.restart import MESSAGES, RETURNS, BootRestore, back_order
from broker.entities.queues.ready import ReadyList
from broker.protocol import properties as P

if TYPE_CHECKING:
    from broker.entities.policy import Policy

DELIVERY_COUNT = "x-delivery-count"
#: rabbit_fifo unblocks a reject-publish queue at or below this share of its limits.
SOFT_LIMIT = 0.8


class QuorumEntry(Entry):
    """A quorum message: `count` returns so far, `orig` the message as published (what is stored
    and dead-lettered); `msg` is what the last delivery showed."""

    __slots__ = ("count", "orig")
    always_stored = True  # the Raft log keeps every message

    def __init__(self, seq: int, msg: StoredMessage, expires: float, count: int = 0) -> None:
        super().__init__(seq, msg, expires)
        self.orig = msg
        self.count = count
        self.redelivered = count > 0


def with_delivery_count(msg: StoredMessage, count: int) -> StoredMessage:
    """The message with `x-delivery-count: count` (long) set in its headers, as rabbit_basic's
    add_header does it (keystore, then the table sorted by key)."""
    headers = msg.headers()
    entries = [(k, v) for k, v in (headers or ()) if k != DELIVERY_COUNT]
    entries.append((DELIVERY_COUNT, Field("long", count)))
    entries.sort(key=lambda kv: name_bytes(kv[0]))
    return msg.with_props(P.rewrite(msg.props, {"headers": FieldTable(entries)}))


def _quorum_overflow(value: str | None) -> str:
    """reject-publish-dlx is drop-head for a quorum queue (rabbit_fifo has no such mode)."""
    return "drop-head" if value in (None, "reject-publish-dlx") else str(value)


@register
class QuorumQueue(HeldQueue):
    type_name = "quorum"
    replicated = True
    keeps_transient = True  # the Raft log keeps every message

    def __init__(self, vhost: QueueHost, name: str, **declared: Unpack[Declared]) -> None:
        super().__init__(vhost, name, **declared)
        arguments = self.arguments
        # two lists served in order: returned messages waiting at the front, then the others
        self.hold(ReadyList(self, levels=2, pages=False), _quorum_overflow)
        #: cancelled consumers that held unacked deliveries when they left (see `consumer_count`)
        self.draining: list[Consumer] = []
        self.delivery_limit = QA.delivery_limit(arguments.get("x-delivery-limit"))
        self.dlx_strategy = A.str_value(arguments.get("x-dead-letter-strategy")) or "at-most-once"
        size = arguments.get("x-quorum-initial-group-size")
        self.initial_group_size = int(size.value) if size is not None else None
        self.leader_locator = A.str_value(arguments.get("x-queue-leader-locator")) or "client-local"
        self.members: list[str] = []  # set by `place` (the emulated cluster's placement)
        self.leader: str | None = None
        self.blocked = False  # reject-publish: over the limit, refusing until below the soft limit
        self.dlx_store = DeadLetterStore(self, self._update_blocked)
        self._rank = 0  # return order of the latest return (broker.entities.queues.quorum.restart)
        #: some ready message may have been returned (and needs `_deliver`'s care); false again
        #: once nothing is ready, so a queue never returned to delivers without that look per message
        self._returned_ready = False
        self._boot: BootRestore[QuorumEntry] | None = None
        self.reset_expiry()

    # -- declaration -------------------------------------------------------------------------

    #: queue.declare's refusals, as the quorum type's argument rules state them
    validate_arguments = staticmethod(QA.check_declaration)

    def check_equivalent(self, durable: bool, auto_delete: bool, arguments: FieldTable) -> None:
        A.check_redeclare(self, durable, auto_delete, arguments, QA.QUORUM_QUEUE_ARGS)

    def check_consume(self, arguments: FieldTable, *, exclusive: bool, no_ack: bool, prefetch: int) -> None:
        """Consume arguments only: an exclusive consumer does not lock a quorum queue (observed)."""
        QA.check_quorum_consume_arguments(arguments, self.rs)

    def check_global_qos(self, global_prefetch: int) -> None:
        """A channel-wide prefetch is not supported by quorum queues (540, a connection error)."""
        if global_prefetch:
            raise not_implemented(f"{self.rs} does not support global qos")

    def check_delete(self, *, if_unused: bool, if_empty: bool) -> None:
        flag = "if-unused" if if_unused else "if-empty" if if_empty else None
        if flag is not None:
            raise not_implemented(
                f"cannot delete {self.rs}. queue.delete operations with "
                f"{flag} flag set are not supported by quorum queues"
            )

    def is_policy_applicable(self, policy: Policy) -> bool:
        """rabbit_quorum_queue:is_policy_applicable: no key of the policy is one the type refuses."""
        return not any(k in QA.UNSUPPORTED_POLICY_KEYS for k in policy.definition)

    def apply_policy(self, policy: Policy | None) -> None:
        """The x-arguments with the policy on top (one holding a key the quorum type does not
        support is not applied at all); new limits apply at once, as rabbit_fifo's config update
        evaluates them."""
        if policy is not None and not self.is_policy_applicable(policy):
            policy = None
        self.take_policy(policy)
        dl = policy.definition.get("delivery-limit") if policy is not None else None
        limit = QA.delivery_limit(self.arguments.get("x-delivery-limit"))
        if isinstance(dl, int) and not isinstance(dl, bool):
            limit = float(dl) if limit is None else min(limit, float(dl))
        self.delivery_limit = limit
        self._enforce_limits()
        self._update_blocked()

    # -- reading -------------------------------------------------------------------------------

    @property
    def consumer_count(self) -> int:
        """The size of rabbit_fifo's consumer map, which declare-ok reports: with single active
        consumer only the active one is in it (the others wait apart); a cancelled consumer stays
        until its unacked deliveries are settled; and every unsettled basic.get is a consumer of
        its own (the channel dequeues under the delivery tag, released on settlement). Observed on
        3.10.8 once the settlements were applied (they reach the queue asynchronously there)."""
        members = self.consumers
        live = (1 if members else 0) if self.single_active else len(members)
        self.draining = [c for c in self.draining if c.unacked > 0]
        held = sum(c.unacked for c in members) + sum(c.unacked for c in self.draining)
        # every unsettled delivery is a consumer's or a basic.get's: the rest are gets
        return live + len(self.draining) + max(0, self.unacked - held)

    @property
    def returns(self) -> deque[Entry]:
        """Returned messages waiting at the front (served before `messages`)."""
        return self.ready.levels[RETURNS]

    @property
    def messages(self) -> deque[Entry]:
        """The other ready messages, in the order rabbit_fifo keeps them."""
        return self.ready.levels[MESSAGES]

    @property
    def max_length(self) -> int | None:
        """The effective x-max-length (the argument or the policy's, the smaller)."""
        return self.ready.max_length

    # -- x-expires -----------------------------------------------------------------------------

    def reset_expiry(self) -> None:
        """Declaring (even passively) does not count as a use of a quorum queue: only consumers and
        basic.get restart its x-expires countdown (rabbit_fifo's last-active time)."""
        if not self.idle.running:
            self.restart_expiry()

    # -- limits --------------------------------------------------------------------------------

    def _update_blocked(self) -> None:
        """reject-publish: blocked once over a limit (counting the held dead letters), open again
        at or below SOFT_LIMIT of it."""
        if self._overflow != "reject-publish":
            self.blocked = False
        elif self.blocked:
            self.blocked = not self.ready.within(SOFT_LIMIT, len(self.dlx_store), self.dlx_store.bytes)
        else:
            self.blocked = self.ready.over(len(self.dlx_store), self.dlx_store.bytes)

    def would_overflow(self, size: int) -> bool:
        if self._overflow != "reject-publish":
            return False
        self.ready.drop_expired()
        if self.blocked:
            self._update_blocked()
        return self.blocked

    def _enforce_limits(self) -> None:
        if self._overflow != "drop-head":
            self._update_blocked()
        elif self.ready.limited:
            self.ready.trim(len(self.dlx_store), self.dlx_store.bytes)

    # -- messages in ---------------------------------------------------------------------------

    def enqueue(self, msg: StoredMessage, seq: int = 0) -> None:
        if not seq:
            seq = self.seq = self.seq + 1
        ready = self.ready
        entry = QuorumEntry(seq, msg, ready.expiry(msg))
        if not ready.count and self.consumers and not ready.delivering and not self.deleted:
            # a waiting consumer takes it in the same command, before it can expire (TTL 0 too)
            c = self.selection.next()
            if c is not None:
                self._deliver(c, entry)
                return
        # a message that expires on arrival still waits for its turn at the head (rabbit_fifo
        # expires from the head only): basic.get's count includes it until then
        ready.add(entry, MESSAGES)
        self._enforce_limits()
        if self.consumers:
            self.try_deliver()
        if entry.expires and ready.count:
            ready.arm_ttl()

    def restore_state(self, state: dict[int, tuple[int, int, int]]) -> None:
        self._boot = BootRestore(state)

    def restore_dead_letters(self, held: Mapping[int, tuple[str, int]]) -> None:
        if self._boot is None:
            self._boot = BootRestore({})
        self._boot.held = held

    def restore(self, seq: int, msg: StoredMessage, redelivered: bool) -> None:
        """A message read back at boot with its delivery count and place. `redelivered` is the
        store's checked-out mark: the restart returns that message, one more delivery
        (broker.entities.queues.quorum.restart); `_after_boot` settles what that put over the limit."""
        boot = self._boot
        if boot is None:
            boot = self._boot = BootRestore({})
        if not boot.scheduled:
            boot.scheduled = True
            self.clock.call_later(0.0, self._after_boot)
        if seq > self.seq:
            self.seq = seq
        held = boot.held.get(seq)
        if held is not None:  # in the dead-letter store, not in the queue
            self.dlx_store.restore(seq, msg, *held)
            return
        expires = self.ready.expiry(msg)
        count, order = boot.counts(seq)
        self._rank = boot.rank
        entry = QuorumEntry(seq, msg, expires, count + 1 if redelivered else count)
        level, index = boot.place(entry, order, redelivered)
        self.ready.place(entry, level, index)
        if entry.count:
            self._returned_ready = True
        if expires:
            self.ready.arm_ttl()

    def _after_boot(self) -> None:
        """Once the store is attached and policies apply: the dead-letter worker starts (it
        forwards what the store holds), and the restart's returns are settled."""
        boot, self._boot = self._boot, None
        if boot is None or self.deleted:
            return
        self.dlx_store.start()
        if boot.returned:
            self._settle_returned(boot)

    def _settle_returned(self, boot: BootRestore[QuorumEntry]) -> None:
        """Dead-letter the restart's returns that went over the delivery limit (rabbit_fifo's
        return_one), and write the others' counts and places (a second restart must not count
        them again)."""
        limit = self.delivery_limit
        over = [e for e in boot.returned if limit is not None and e.count > limit]
        for e in over:
            self.ready.remove(e, RETURNS)
        persistence = self.vhost.persistence
        if self.store is not None and persistence is not None:
            states = []
            for e in boot.returned:
                if limit is None or e.count <= limit:
                    self._rank += 1
                    states.append((e.seq, False, e.count, -self._rank))
            persistence.delivery_state(self, states)
        if over:
            self.dead_letter(list(over), "delivery_limit")
        self._enforce_limits()
        self.try_deliver()

    # -- messages out --------------------------------------------------------------------------

    def try_deliver(self) -> None:
        if self.consumers and not self.deleted:
            ready = self.ready
            if self._returned_ready:
                ready.dispatch(self.selection.next, self._deliver)
                self._returned_ready = ready.count > 0
            else:  # nothing ready was returned: every delivery is a first one
                ready.dispatch(self.selection.next, self.deliver_to)
            if self.blocked:
                self._update_blocked()

    def _deliver(self, c: Consumer, entry: Entry) -> None:
        """Consumer deliveries show x-delivery-count once the message was returned."""
        if entry.redelivered and isinstance(entry, QuorumEntry) and entry.count:  # returned before
            entry.msg = with_delivery_count(entry.orig, entry.count)
            if not c.no_ack:
                self._checked_out(entry)
        self.deliver_to(c, entry)

    def _checked_out(self, entry: QuorumEntry) -> None:
        """Mark a returned message checked out again in the store (a first delivery the channel
        marks itself, as for every queue type)."""
        persistence = self.vhost.persistence
        if entry.count and self.store is not None and persistence is not None:
            persistence.delivery_state(self, [(entry.seq, True, entry.count, 0)])

    def get(self, no_ack: bool) -> Entry | None:
        """basic.get: 405 on a single-active-consumer queue; the message always shows its count.
        Expired messages are dropped from the head before the fetch; a settled (no-ack) fetch
        drops those it brought to the head too before get-ok's count, as rabbit_fifo settles it at
        once and expires at that command, while an unsettled fetch's count still includes them
        (observed on 3.10.8: m.0, two expired messages, m.3: message_count 1 without ack, 3 with)."""
        if self.single_active:
            raise resource_locked(
                f"cannot obtain access to locked {self.rs}. basic.get "
                "operations are not supported by quorum queues with single active consumer"
            )
        self.restart_expiry()
        self.ready.drop_expired()
        entry = self.ready.pop()
        if entry is not None and self.blocked:
            self._update_blocked()
        if entry is None:
            self.stat_empty_get = True
            return None
        if no_ack:
            self.ready.drop_expired()
        self.count_get(entry, no_ack)
        if isinstance(entry, QuorumEntry):
            entry.msg = with_delivery_count(entry.orig, entry.count)
            if not no_ack:
                self._checked_out(entry)
        return entry

    def requeue(self, entries: list[Entry]) -> None:
        """nack/reject with requeue (and basic.recover): each return counts; without a delivery limit
        the message is re-enqueued at the back, with one it waits in `returns` at the front."""
        self._return(entries, front=self.delivery_limit is not None)

    def requeue_on_close(self, entries: list[Entry]) -> None:
        """A closed channel's (or cancelled-by-close consumer's) unacked messages: rabbit_fifo's
        return_all puts them in `returns`, in message order, limit or not."""
        self._return(entries, front=True)

    def _return(self, entries: Sequence[Entry], *, front: bool) -> None:
        """A returned message goes back even if it expired meanwhile: like any other it expires
        once it reaches the head (observed on 3.10.8: an expired message rejected with requeue
        behind a live one is counted until the live one is taken)."""
        over: list[Entry] = []
        kept: list[tuple[int, bool, int, int]] = []
        ready = self.ready
        for entry in entries:
            if not isinstance(entry, QuorumEntry):
                continue
            entry.count += 1
            entry.redelivered = True
            entry.msg = entry.orig
            if self.delivery_limit is not None and entry.count > self.delivery_limit:
                over.append(entry)
                continue
            ready.add(entry, RETURNS if front else MESSAGES)
            self._returned_ready = True
            self._rank += 1
            kept.append(
                (entry.seq, False, entry.count, -self._rank if front else back_order(self.seq, self._rank))
            )
        persistence = self.vhost.persistence
        if kept and self.store is not None and persistence is not None:
            persistence.delivery_state(self, kept)
        if over:
            self.dead_letter(over, "delivery_limit")
        self._enforce_limits()
        ready.drop_expired()
        self.try_deliver()

    def forget_unstored(self, seq: int) -> bool:
        """Take a ready message whose store write failed back out; the limits are judged again."""
        if not self.ready.forget(seq):
            return False
        self._enforce_limits()
        return True

    def purge(self) -> int:
        n = self.ready.purge()
        self._update_blocked()
        return n

    def purge_keeps_stored(self) -> bool:
        return self.unacked > 0 or len(self.dlx_store) > 0

    def delete(self) -> int:
        self.dlx_store.clear()
        return super().delete()

    # -- consumers -----------------------------------------------------------------------------

    def remove_consumer(self, consumer: Consumer) -> None:
        if not self.selection.remove(consumer, self.name, self.vhost.active_consumer_selection):
            return
        if self.draining:  # forget those settled since (the list stays as short as the live ones)
            self.draining = [c for c in self.draining if c.unacked > 0]
        if consumer.unacked > 0:
            self.draining.append(consumer)
        self.consumer_left()

    # -- dead lettering ------------------------------------------------------------------------

    def _at_least_once(self) -> bool:
        """at-least-once is in effect only with reject-publish (rabbit_fifo:dlh/5)."""
        strategy = self.dlx_strategy == "at-least-once"
        return strategy and self._overflow == "reject-publish" and self.dlx is not None

    def dead_letter(self, entries: list[Entry], reason: str) -> None:
        """Dead letters are the messages as published (no x-delivery-count); at-least-once hands
        them to the queue's dead-letter store, which holds those no queue takes."""
        for e in entries:
            if isinstance(e, QuorumEntry):
                e.msg = e.orig
        if self._at_least_once() and entries:
            self.dlx_store.dead_letter(entries, reason)
            self._update_blocked()
            return
        super().dead_letter(entries, reason)
        if self.blocked:  # messages left the queue: a blocked one may open again
            self._update_blocked()

    # -- placement -----------------------------------------------------------------------------

    def place(
        self, nodes: Sequence[str], declaring: str, replicas: Mapping[str, int], leaders: Mapping[str, int]
    ) -> None:
        """Choose members and leader once, at declaration (broker.entities.queues.quorum.membership), and
        keep them with the queue's record, as RabbitMQ keeps the node list in its queue record."""
        self.members, self.leader = place(
            nodes, declaring, self.initial_group_size, self.leader_locator, replicas, leaders
        )
        persistence = self.vhost.persistence
        if self.store is not None and persistence is not None:
            persistence.queue_placed(self.vhost, self)

    def restore_placement(self, members: Sequence[str], leader: str) -> None:
        """The members and leader of the stored record, kept as they are whatever nodes run now:
        RabbitMQ keeps a queue's node list across a restart, and `online` (the management view)
        leaves out the members whose node is not running. Raft is not emulated, so no election
        moves the leadership off a node that is not running."""
        if members:
            self.members = list(members)
            self.leader = leader or self.members[0]

    def details(self) -> dict[str, object]:
        """What management and ctl show beyond the classic fields: membership (leader None and no
        members until `place` ran; which members are online is the cluster's to say) and the
        dead-letter store of at-least-once dead-lettering."""
        return {
            "leader": self.leader,
            "members": list(self.members),
            "messages_dlx": len(self.dlx_store),
            "message_bytes_dlx": self.dlx_store.bytes,
            "initial_group_size": self.initial_group_size,
            "leader_locator": self.leader_locator,
            "delivery_limit": self.delivery_limit,
        }
