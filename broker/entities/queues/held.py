"""What the queue types that hold their messages in process (classic, quorum) have in common.

Both compose the same parts: a `ReadyList` for the messages, TTL and length limits, a
`QueueConsumers` for who gets the next message, an `IdleExpiry` for x-expires. `HeldQueue` keeps
those parts and the rules that only tie them together, the same for both types: a consumer's
arrival stops the x-expires countdown and starts delivering, the last one leaving auto-deletes the
queue or restarts the countdown, a deletion cancels the consumers and timers, the x-arguments and
a policy set the same limits and dead-letter target. Each type's own rules (what a full queue
does, what counts as a use for x-expires, a quorum queue's returns and delivery counts) stay in
its module; this part calls only the `Queue` interface back (`try_deliver`, `reset_expiry`,
`purge`), never a type's private method.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from amqpwire.fields import FieldTable
from broker.entities.queues import arguments as A
from broker.entities.queues.base import Consumer, Entry, Queue
from broker.entities.queues.consumers import QueueConsumers
from broker.entities.queues.expiry import IdleExpiry

if TYPE_CHECKING:
    from broker.entities.policy import Policy
    from broker.entities.queues.ready import ReadyList


def declared_settings(arguments: FieldTable) -> dict[str, Any]:
    """The settings a queue's own x-arguments give before any policy, keyed by policy key as
    `broker.entities.policy.queue_settings` keys them."""
    return {
        "message-ttl": A.int_value(arguments.get("x-message-ttl")),
        "max-length": A.int_value(arguments.get("x-max-length")),
        "max-length-bytes": A.int_value(arguments.get("x-max-length-bytes")),
        "overflow": A.str_value(arguments.get("x-overflow")),
        "dead-letter-exchange": A.str_value(arguments.get("x-dead-letter-exchange")),
        "dead-letter-routing-key": A.str_value(arguments.get("x-dead-letter-routing-key")),
        "expires": A.int_value(arguments.get("x-expires")),
    }


class HeldQueue(Queue):
    """The parts and the shared rules of a queue type whose messages wait in a `ReadyList`."""

    ready: ReadyList
    selection: QueueConsumers
    idle: IdleExpiry
    _overflow: str
    #: the type's reading of an x-overflow value (None: absent) as the overflow it applies
    overflow_rule: Callable[[str | None], str]

    def hold(self, ready: ReadyList, overflow_rule: Callable[[str | None], str]) -> None:
        """Compose the parts from the declared x-arguments (the constructor's second half)."""
        arguments = self.arguments
        settings = declared_settings(arguments)
        self.ready = ready
        self.overflow_rule = overflow_rule
        self.idle = IdleExpiry(self.clock, self.expired_unused, settings["expires"])
        self.apply_settings(settings)
        sac = arguments.get("x-single-active-consumer")
        self.single_active = bool(sac is not None and sac.type == "bool" and sac.value)
        self.selection = QueueConsumers(self.single_active)
        self.consumers = self.selection.members
        self.seq = 0

    # -- settings ------------------------------------------------------------------------------

    def apply_settings(self, settings: Mapping[str, Any]) -> None:
        """Limits, TTL, overflow, dead-letter target and x-expires from effective settings; a
        changed x-expires restarts the countdown. New limits apply with the type's next trim."""
        self.ready.configure(
            message_ttl=settings.get("message-ttl"),
            max_length=settings.get("max-length"),
            max_length_bytes=settings.get("max-length-bytes"),
        )
        self._overflow = self.overflow_rule(settings.get("overflow"))
        self.dlx = settings.get("dead-letter-exchange")
        self.dlrk = settings.get("dead-letter-routing-key")
        if self.idle.change(settings.get("expires")):
            self.restart_expiry()

    def take_policy(self, policy: Policy | None) -> None:
        """Apply an effective policy (or None) combined with the x-arguments (broker.entities.policy
        rules)."""
        from broker.entities.policy import queue_settings  # loaded with the first policy applied

        self.policy = policy
        self.apply_settings(queue_settings(policy, A.plain_arguments(self.arguments)))

    # -- reading -------------------------------------------------------------------------------

    @property
    def count(self) -> int:
        return self.ready.count

    @property
    def bytes(self) -> int:
        return self.ready.bytes

    @property
    def overflow(self) -> str:
        return self._overflow

    @property
    def message_count(self) -> int:
        self.ready.drop_expired()
        return self.ready.count

    @property
    def levels(self) -> list[deque[Entry]]:
        """The in-memory ready messages, one deque per level, in the ready list's order."""
        return self.ready.levels

    @property
    def active_consumer(self) -> Consumer | None:
        return self.selection.chosen

    # -- x-expires -----------------------------------------------------------------------------

    def restart_expiry(self) -> None:
        """Count x-expires again from now, or stop counting while consumers are attached."""
        if self.deleted:
            return
        if self.consumers:
            self.idle.cancel()
        else:
            self.idle.restart()

    def expired_unused(self) -> None:
        if not self.deleted and not self.consumers:
            self.vhost.delete_queue(self, reason="expired")

    # -- consumers and deletion ----------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        self.selection.add(consumer, self.name, self.vhost.active_consumer_selection)
        self.idle.cancel()
        self.try_deliver()

    def remove_consumer(self, consumer: Consumer) -> None:
        if self.selection.remove(consumer, self.name, self.vhost.active_consumer_selection):
            self.consumer_left()

    def consumer_left(self) -> None:
        """After a consumer was removed: the others get its share, or the queue was last used now
        (an auto-delete queue that ever had a consumer goes)."""
        if self.consumers:
            self.try_deliver()
        elif self.auto_delete and self.selection.ever_had:
            self.vhost.delete_queue(self, reason="auto_delete")
        else:
            self.reset_expiry()

    def delete(self) -> int:
        n = self.ready.count
        self.deleted = True
        self.selection.cancel_all(self.clock)
        self.ready.cancel_timer()
        self.idle.cancel()
        self.purge()
        return n
