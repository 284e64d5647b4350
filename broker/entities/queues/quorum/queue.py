"""The quorum queue type (x-queue-type: quorum) with RabbitMQ 3.10.8's observable behaviour.

RabbitMQ keeps a quorum queue in a Raft state machine (rabbit_fifo); hashbroker keeps only what a
client can observe of it, on top of the classic queue's machinery (ready list, TTL, x-expires,
consumer selection, dead-lettering):

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
from typing import TYPE_CHECKING

from amqpwire.errors import not_implemented, resource_locked
from amqpwire.fields import Field, FieldTable
from broker.entities.message import EXPIRATION_FLAG, StoredMessage
from broker.entities.queues import arguments as A
from broker.entities.queues.base import Entry, register
from broker.entities.queues.classic.queue import ClassicQueue
from broker.entities.queues.quorum import arguments as QA
from broker.entities.queues.quorum.dlx import DeadLetterStore
from broker.entities.queues.quorum.membership import place
from broker.entities.queues.quorum.restart import BootRestore, back_order
from broker.protocol import properties as P

if TYPE_CHECKING:
    from broker.entities.policy import Policy
    from broker.entities.queues.consumers import Consumer
    from broker.entities.vhost import VHost

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
    entries.sort(key=lambda kv: kv[0].encode())
    return msg.with_props(P.rewrite(msg.props, {"headers": FieldTable(entries)}))


@register
class QuorumQueue(ClassicQueue):
    type_name = "quorum"
    replicated = True
    keeps_transient = True  # the Raft log keeps every message

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
        super().__init__(
            vhost,
            name,
            durable=durable,
            exclusive_owner=exclusive_owner,
            auto_delete=auto_delete,
            arguments=arguments,
        )
        self.returns: deque[Entry] = deque()
        self.messages: deque[Entry] = self.levels[0]
        # _pop_head, drop_expired, purge and _arm_ttl of the classic type walk `levels` in order
        self.levels = [self.returns, self.messages]
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
        self._boot: BootRestore | None = None
        self._normalise_overflow()

    def _normalise_overflow(self) -> None:
        if self.overflow == "reject-publish-dlx":
            self.overflow = "drop-head"

    # -- declaration -------------------------------------------------------------------------

    @classmethod
    def validate_arguments(
        cls, args: FieldTable, qname: str, vhost: str, *, durable: bool, exclusive: bool, auto_delete: bool
    ) -> None:
        rs = A.resource("queue", qname, vhost)
        QA.check_quorum_arguments(args, rs, durable=durable, exclusive=exclusive, auto_delete=auto_delete)

    def check_equivalent(self, durable: bool, auto_delete: bool, arguments: FieldTable) -> None:
        rs = A.resource("queue", self.name, self.vhost.name)
        A.assert_field_equivalence(self.durable, durable, rs, "durable")
        A.assert_field_equivalence(self.auto_delete, auto_delete, rs, "auto_delete")
        A.assert_args_equivalence(self.arguments, arguments, rs, QA.QUORUM_QUEUE_ARGS)

    def check_consume(self, arguments: FieldTable, *, exclusive: bool, no_ack: bool, prefetch: int) -> None:
        """Consume arguments only: an exclusive consumer does not lock a quorum queue (observed)."""
        QA.check_quorum_consume_arguments(arguments, A.resource("queue", self.name, self.vhost.name))

    def check_global_qos(self, global_prefetch: int) -> None:
        """A channel-wide prefetch is not supported by quorum queues (540, a connection error)."""
        if global_prefetch:
            raise not_implemented(f"{self.vhost.rs('queue', self.name)} does not support global qos")

    def check_delete(self, *, if_unused: bool, if_empty: bool) -> None:
        flag = "if-unused" if if_unused else "if-empty" if if_empty else None
        if flag is not None:
            raise not_implemented(
                f"cannot delete {self.vhost.rs('queue', self.name)}. queue.delete operations with "
                f"{flag} flag set are not supported by quorum queues"
            )

    def is_policy_applicable(self, policy: Policy) -> bool:
        """rabbit_quorum_queue:is_policy_applicable: no key of the policy is one the type refuses."""
        return not any(k in QA.UNSUPPORTED_POLICY_KEYS for k in policy.definition)

    def apply_policy(self, policy: Policy | None) -> None:
        """A policy holding a key the quorum type does not support is not applied at all."""
        if policy is not None and not self.is_policy_applicable(policy):
            policy = None
        old_expires = self.expires
        super().apply_policy(policy)
        if self.expires != old_expires and self.expires is not None:
            self._restart_expiry()
        self._normalise_overflow()
        dl = policy.definition.get("delivery-limit") if policy is not None else None
        limit = QA.delivery_limit(self.arguments.get("x-delivery-limit"))
        if isinstance(dl, int) and not isinstance(dl, bool):
            limit = float(dl) if limit is None else min(limit, float(dl))
        self.delivery_limit = limit
        self._update_blocked()

    # -- limits --------------------------------------------------------------------------------

    def _held(self) -> int:
        return len(self.dlx_store)

    def _held_bytes(self) -> int:
        return self.dlx_store.bytes

    def _over(self) -> bool:
        n, b = self.count + self._held(), self.bytes + self._held_bytes()
        return (self.max_length is not None and n > self.max_length) or (
            self.max_length_bytes is not None and b > self.max_length_bytes
        )

    def _below_soft(self) -> bool:
        n, b = self.count + self._held(), self.bytes + self._held_bytes()
        return (self.max_length is None or n <= int(self.max_length * SOFT_LIMIT)) and (
            self.max_length_bytes is None or b <= int(self.max_length_bytes * SOFT_LIMIT)
        )

    def _update_blocked(self) -> None:
        if self.overflow != "reject-publish":
            self.blocked = False
        elif self.blocked:
            self.blocked = not self._below_soft()
        else:
            self.blocked = self._over()

    def would_overflow(self, size: int) -> bool:
        if self.overflow != "reject-publish":
            return False
        self.drop_expired()
        return self.blocked

    def _enforce_limits(self) -> None:
        if self.overflow != "drop-head":
            self._update_blocked()
            return
        dropped: list[Entry] = []
        while self.count and self._over():
            entry = self._pop_head()
            if entry is None:
                break
            dropped.append(entry)
        if dropped:
            self.dead_letter(dropped, "maxlen")

    # -- messages in ---------------------------------------------------------------------------

    def enqueue(self, msg: StoredMessage, seq: int = 0) -> None:
        if not seq:
            seq = self.seq = self.seq + 1
        expires = 0.0
        if self.uses_ttl or msg.flags & EXPIRATION_FLAG:
            expires = self._expiry_for(msg, self.clock.now())
        entry = QuorumEntry(seq, msg, expires)
        if not self.count and self.consumers and not self._delivering and not self.deleted:
            # a waiting consumer takes it in the same command, before it can expire (TTL 0 too)
            c = self.selection.next()
            if c is not None:
                self._deliver(c, entry)
                return
        # a message that expires on arrival still waits for its turn at the head (rabbit_fifo
        # expires from the head only): basic.get's count includes it until then
        self.messages.append(entry)
        self.count += 1
        self.bytes += len(msg.body)
        self._enforce_limits()
        if self.consumers:
            self.try_deliver()
        if self.count and expires:
            self._arm_ttl()

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
        expires = 0.0
        if self.uses_ttl or msg.flags & EXPIRATION_FLAG:
            expires = self._expiry_for(msg, self.clock.now())
        count, order = boot.counts(seq)
        self._rank = boot.rank
        entry = QuorumEntry(seq, msg, expires, count + 1 if redelivered else count)
        boot.place(entry, order, redelivered, self.returns, self.messages)  # type: ignore[arg-type]
        self.count += 1
        self.bytes += len(msg.body)
        if expires:
            self._arm_ttl()

    def _after_boot(self) -> None:
        """Once the store is attached and policies apply: the dead-letter worker starts (it
        forwards what the store holds), and the restart's returns are settled."""
        boot, self._boot = self._boot, None
        if boot is None or self.deleted:
            return
        self.dlx_store.start()
        if boot.returned:
            self._settle_returned(boot)

    def _settle_returned(self, boot: BootRestore) -> None:
        """Dead-letter the restart's returns that went over the delivery limit (rabbit_fifo's
        return_one), and write the others' counts and places (a second restart must not count
        them again)."""
        limit = self.delivery_limit
        over = [e for e in boot.returned if limit is not None and e.count > limit]
        for e in over:
            self.returns.remove(e)
            self.count -= 1
            self.bytes -= len(e.orig.body)
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

    def _pop_head(self) -> Entry | None:
        entry = super()._pop_head()
        if entry is not None and self.blocked:
            self._update_blocked()
        return entry

    def drop_expired(self) -> None:
        super().drop_expired()
        if self.blocked:
            self._update_blocked()

    def _deliver(self, c: Consumer, entry: Entry) -> None:
        """Consumer deliveries show x-delivery-count once the message was returned."""
        if isinstance(entry, QuorumEntry):
            entry.msg = with_delivery_count(entry.orig, entry.count) if entry.count else entry.orig
            if not c.no_ack:
                self._checked_out(entry)
        super()._deliver(c, entry)

    def _checked_out(self, entry: QuorumEntry) -> None:
        """Mark a returned message checked out again in the store (a first delivery the channel
        marks itself, as for every queue type)."""
        persistence = self.vhost.persistence
        if entry.count and self.store is not None and persistence is not None:
            persistence.delivery_state(self, [(entry.seq, True, entry.count, 0)])

    def get(self, no_ack: bool) -> Entry | None:
        """basic.get: 405 on a single-active-consumer queue; the message always shows its count.
        Expired messages are dropped from the head before the fetch only: get-ok's count still
        includes an expired message the fetch exposed (rabbit_fifo expires at the next command)."""
        if self.single_active:
            raise resource_locked(
                f"cannot obtain access to locked {self.vhost.rs('queue', self.name)}. basic.get "
                "operations are not supported by quorum queues with single active consumer"
            )
        self._restart_expiry()
        if self.uses_ttl:
            self.drop_expired()
        entry = self._pop_head()
        if entry is None:
            self.stat_empty_get = True
            return None
        self._count_get(entry, no_ack)
        if isinstance(entry, QuorumEntry):
            entry.msg = with_delivery_count(entry.orig, entry.count)
            if not no_ack:
                self._checked_out(entry)
        return entry

    def reset_expiry(self) -> None:
        """Declaring (even passively) does not count as a use of a quorum queue: only consumers and
        basic.get restart its x-expires countdown (rabbit_fifo's last-active time)."""
        if self._expiry_timer is None:
            super().reset_expiry()

    def _restart_expiry(self) -> None:
        super().reset_expiry()

    def requeue(self, entries: list[Entry]) -> None:
        """nack/reject with requeue (and basic.recover): each return counts; without a delivery limit
        the message is re-enqueued at the back, with one it waits in `returns` at the front."""
        self._return(entries, front=self.delivery_limit is not None)

    def requeue_on_close(self, entries: list[Entry]) -> None:
        """A closed channel's (or cancelled-by-close consumer's) unacked messages: rabbit_fifo's
        return_all puts them in `returns`, in message order, limit or not."""
        self._return(entries, front=True)

    def _return(self, entries: Sequence[Entry], *, front: bool) -> None:
        over: list[Entry] = []
        expired: list[Entry] = []
        kept: list[tuple[int, bool, int, int]] = []
        now = self.clock.now() if self.uses_ttl else 0.0
        for entry in entries:
            if not isinstance(entry, QuorumEntry):
                continue
            entry.count += 1
            entry.redelivered = True
            entry.msg = entry.orig
            if self.delivery_limit is not None and entry.count > self.delivery_limit:
                over.append(entry)
                continue
            if entry.expires and entry.expires <= now:
                expired.append(entry)
                continue
            (self.returns if front else self.messages).append(entry)
            self.count += 1
            self.bytes += len(entry.orig.body)
            self._rank += 1
            kept.append(
                (entry.seq, False, entry.count, -self._rank if front else back_order(self.seq, self._rank))
            )
        persistence = self.vhost.persistence
        if kept and self.store is not None and persistence is not None:
            persistence.delivery_state(self, kept)
        if over:
            self.dead_letter(over, "delivery_limit")
        if expired:
            self.dead_letter(expired, "expired")
        self._enforce_limits()
        if self.uses_ttl:
            self.drop_expired()
        self.try_deliver()

    def purge(self) -> int:
        n = super().purge()
        self._update_blocked()
        return n

    def purge_keeps_stored(self) -> bool:
        return self.unacked > 0 or len(self.dlx_store) > 0

    def delete(self) -> int:
        self.dlx_store.clear()
        return super().delete()

    # -- dead lettering ------------------------------------------------------------------------

    def _at_least_once(self) -> bool:
        """at-least-once is in effect only with reject-publish (rabbit_fifo:dlh/5)."""
        strategy = self.dlx_strategy == "at-least-once"
        return strategy and self.overflow == "reject-publish" and self.dlx is not None

    def dead_letter(self, entries: list[Entry], reason: str) -> None:
        """Dead letters are the messages as published (no x-delivery-count); at-least-once hands
        them to the queue's dead-letter store, which holds those no queue takes."""
        for e in entries:
            if isinstance(e, QuorumEntry):
                e.msg = e.orig
        if not self._at_least_once() or not entries:
            super().dead_letter(entries, reason)
            return
        self.dlx_store.dead_letter(entries, reason)
        self._update_blocked()

    # -- reading -------------------------------------------------------------------------------

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
            "messages_dlx": self._held(),
            "message_bytes_dlx": self._held_bytes(),
            "initial_group_size": self.initial_group_size,
            "leader_locator": self.leader_locator,
            "delivery_limit": self.delivery_limit,
        }
