"""A virtual host: exchanges, queues, bindings, RabbitMQ's routing walk (rabbit_exchange:route) and
the one delivery pipeline every message goes through on its way into queues.

Exchange-to-exchange routing, alternate exchanges, de-duplication and loop protection happen here;
each exchange type only maps a message to its direct destinations.

The pipeline (`publish`, or `route_publish` then `deliver` where routing and delivery happen at
different times) is what a client's basic.publish, a transaction's commit, a management publish,
dead-lettering (classic, and a quorum queue's at-least-once forwarding), a delayed message's
release and the firehose tracer's copies all use: route (an x-delayed-message exchange holding the
message routes it nowhere for now), apply each queue's overflow (reject-publish refuses;
reject-publish-dlx also dead-letters the refused copy), write the message once through the
`Persistence` port when it goes to kept queues, and enqueue. The publisher's side of the outcome
(confirm or nack, basic.return, waiting for the write) is the caller's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container
from functools import partial
from typing import TYPE_CHECKING, Any

from amqpwire.errors import AmqpError, internal_error, resource_name, resource_not_found
from amqpwire.fields import FieldTable
from broker.entities import events as ev
from broker.entities.clock import Clock, UnscheduledClock
from broker.entities.cluster import DEFAULT_NODE
from broker.entities.dead_letter import is_cycle, make_dead_letter
from broker.entities.delay_scheduler import DELAYED_TYPE, DelayedMessages, Held
from broker.entities.exchange import Exchange
from broker.entities.message import RoutingView, StoredMessage
from broker.entities.message_stats import VHostStats
from broker.entities.persistence import failed
from broker.entities.queues.catalog import Entry, Queue
from exchanges.base import Binding, Destination, Message
from exchanges.compat import Compat
from exchanges.types.delayed import delay_ms

if TYPE_CHECKING:
    from collections.abc import Sequence

    from broker.entities.persistence import Commit, Persistence
    from exchanges.base import ExchangeType

log = logging.getLogger("hashbroker.vhost")

# rabbit_vhost:declare_default_exchanges: (name, type, internal). amq.rabbitmq.trace is where the
# firehose tracer publishes; it is internal, so clients can bind to it but not publish to it.
PREDECLARED: tuple[tuple[str, str, bool], ...] = (
    ("amq.direct", "direct", False),
    ("amq.fanout", "fanout", False),
    ("amq.topic", "topic", False),
    ("amq.headers", "headers", False),
    ("amq.match", "headers", False),
    ("amq.rabbitmq.trace", "topic", True),
)


def get_exchange_type(name: str, compat: Compat) -> type[ExchangeType]:
    from broker.entities.exchange_types import get_type

    return get_type(name, compat)


class PublishOutcome:
    """What the pipeline did with one message, for its publisher.

    `routed`: how many queues it was routed to (those whose overflow refused it included; 0 when
    unroutable or held by a delayed exchange); `refused`: a queue's overflow refused it
    (reject-publish, reject-publish-dlx): the publisher is nacked; `returned`: it was mandatory and
    routed nowhere: the publisher gets basic.return; `stored`: the commit of its store write when
    it went to kept queues as a kept message (confirm once done), else None. Never mutated: the
    common outcomes are shared constants.
    """

    __slots__ = ("refused", "returned", "routed", "stored")

    def __init__(self, routed: int, refused: bool, returned: bool, stored: Commit | None) -> None:
        self.routed = routed
        self.refused = refused
        self.returned = returned
        self.stored = stored


#: Taken by exactly one queue, nothing written (the ingest fast path's outcome).
ACCEPTED_BY_ONE = PublishOutcome(1, False, False, None)
UNROUTED = PublishOutcome(0, False, False, None)
RETURNED = PublishOutcome(0, False, True, None)


class VHost:
    """`clock`: time and timers for TTL and x-expires (the server passes its event loop's);
    `persistence`: what keeps durable state (None: nothing is kept), see broker.entities.persistence.
    """

    def __init__(
        self,
        name: str,
        compat: Compat,
        clock: Clock | None = None,
        *,
        persistence: Persistence[VHost] | None = None,
    ) -> None:
        self.name = name
        self.compat = compat
        self.clock: Clock = clock if clock is not None else UnscheduledClock()
        self.persistence = persistence
        # the node this vhost runs on (the emulated cluster's local node; the firehose's `node`)
        self.node = DEFAULT_NODE
        self.exchanges: dict[str, Exchange] = {}
        self.queues: dict[str, Queue] = {}
        # destination -> {(source exchange name, binding)} so deleting a destination is cheap
        self.bindings_to: dict[Destination, set[tuple[str, Binding]]] = {}
        # queue-deleted listeners (channels cancel consumers, connections forget exclusive queues)
        self.on_queue_deleted: list[Callable[[Queue], None]] = []
        # policies/sharding/delayed hooks (broker.runtime.policies.BrokerPolicies) and the
        # single-active-consumer selection mode ("first" | "consistent-hash")
        self.hooks: Any = None
        self.active_consumer_selection = "first"
        # what `PUT /api/vhosts/{name}` (or a definitions import) said about it
        self.description = ""
        self.tags: tuple[str, ...] = ()
        # the broker's enabled plugins (None = all): a disabled plugin's exchange type is unknown
        self.plugins: Container[str] | None = None
        # message_stats above the queues (the overview sums the vhosts')
        self.stats = VHostStats()
        # how long a quorum queue's dead-letter worker waits before forwarding again what no queue
        # took (broker.entities.queues.quorum.dlx; Settings.dead_letter_worker_publisher_confirm_timeout)
        self.dead_letter_retry_seconds = 180.0
        # the messages its x-delayed-message exchanges hold until their x-delay is over
        self.delayed = DelayedMessages(self.clock, self._release_delayed)
        # the firehose (rabbit_trace): publishes and deliveries are copied to amq.rabbitmq.trace
        self.tracing = False
        # hash exchanges the dashboard watches: exchange name -> broker.entities.hash_watch.HashWatch
        self.hash_watches: dict[str, Any] = {}
        # tracing or a watch: the one attribute the publish path reads (see `retap`)
        self.tapped = False
        # what is told of its exchanges, queues and bindings (the broker's hub once attached)
        self.events: ev.Events = ev.NO_EVENTS
        self.exchanges[""] = Exchange(
            "", "direct", None, durable=True, auto_delete=False, internal=False, arguments=FieldTable()
        )
        for name_, type_name, internal in PREDECLARED:
            try:
                cls = get_exchange_type(type_name, compat)
            except AmqpError:
                log.debug("exchange type %s not available; %s not pre-declared", type_name, name_)
                continue
            self.exchanges[name_] = Exchange(
                name_,
                type_name,
                cls(FieldTable(), compat),
                durable=True,
                auto_delete=False,
                internal=internal,
                arguments=FieldTable(),
            )

    def set_tracing(self, on: bool) -> None:
        self.tracing = on
        self.retap()

    def retap(self) -> None:
        """Recompute `tapped` after tracing or a watch changed."""
        self.tapped = self.tracing or bool(self.hash_watches)

    def rs(self, kind: str, name: str) -> str:
        return resource_name(kind, name, self.name)

    # -- lookups ----------------------------------------------------------------------------------

    def exchange_or_404(self, name: str) -> Exchange:
        x = self.exchanges.get(name)
        if x is None:
            raise resource_not_found("exchange", name, self.name)
        return x

    def queue_or_404(self, name: str) -> Queue:
        q = self.queues.get(name)
        if q is None:
            raise resource_not_found("queue", name, self.name)
        return q

    # -- exchanges --------------------------------------------------------------------------------

    def declare_exchange(
        self,
        name: str,
        type_name: str,
        *,
        durable: bool,
        auto_delete: bool,
        internal: bool,
        arguments: FieldTable,
    ) -> Exchange:
        cls = get_exchange_type(type_name, self.compat)
        cls.validate(arguments)
        impl = cls(arguments, self.compat)
        x = Exchange(
            name,
            type_name,
            impl,
            durable=durable,
            auto_delete=auto_delete,
            internal=internal,
            arguments=arguments,
        )
        self.exchanges[name] = x
        if self.persistence is not None and durable:
            self.persistence.exchange_declared(self, x)
        if self.hooks is not None:
            self.hooks.exchange_declared(self, x)
        self.events.emit("exchange.created", lambda: ev.exchange_created(self.name, x))
        return x

    def delete_exchange(self, x: Exchange, *, auto: bool = False) -> None:
        """`auto`: it goes because its last binding went (auto-delete), which RabbitMQ tells as
        exchange.deleted alone; a deletion asked for is told with its delete-in-progress parameter."""
        if self.persistence is not None and x.durable:  # also drops its bindings
            self.persistence.exchange_deleted(self, x)
        self.exchanges.pop(x.name, None)
        self.stats.publish += x.publish_in  # the vhost's message_stats keep its publishes
        self.stats.routed += x.publish_out
        if self.hooks is not None:
            self.hooks.exchange_deleted(self, x)
        # bindings where x is the source
        for b in list(x.binding_set):
            self._forget_dest_index(x.name, b)
        x.binding_set.clear()
        if auto:
            self.events.emit("exchange.deleted", lambda: ev.resource("name", x.name, self.name))
        else:
            ev.announce_exchange_deleted(self.events, self.name, x.name)
        # bindings where x is the destination
        self._remove_destination(Destination.exchange(x.name))

    def exchange_in_use(self, x: Exchange) -> bool:
        """if-unused: an exchange is used while it is the source of any binding."""
        return bool(x.binding_set)

    # -- bindings ---------------------------------------------------------------------------------

    def add_binding(self, src: Exchange, binding: Binding) -> None:
        if not src.add_binding(binding):
            return
        replay = src.impl.bound(binding) if src.impl is not None else ()
        if replay:
            try:
                self._deliver_bound(src, binding.destination, replay)
            except AmqpError:
                src.remove_binding(binding)  # refused inside the binding's transaction: not made
                raise
        self.bindings_to.setdefault(binding.destination, set()).add((src.name, binding))
        if self.persistence is not None and src.durable:
            self.persistence.binding_added(self, src, binding)
        self.events.emit("binding.created", lambda: ev.binding_props(self.name, src.name, binding))

    def _deliver_bound(self, src: Exchange, dest: Destination, messages: Sequence[Message]) -> None:
        """Deliver what the source's type hands a new binding (`ExchangeType.bound`), in its order:
        into the queue, or routed through the exchange, where a message that reaches no queue
        refuses the binding with 541 (rabbit_exchange_type_recent_history:add_binding crashes)."""
        for message in messages:
            msg = message.msg if isinstance(message, RoutingView) else None
            if msg is None:
                continue
            if dest.kind == "queue":
                q = self.queues.get(dest.name)
                queues = [q] if q is not None else []
            else:
                x = self.exchanges.get(dest.name)
                queues = self.route(x, msg) if x is not None else []
            if not queues:
                raise internal_error()
            self.deliver(src, msg, queues, counted=False)

    def remove_binding(self, src: Exchange, binding: Binding) -> bool:
        if binding not in src.binding_set:
            return False
        if self.persistence is not None and src.durable:  # before a possible auto-delete of src
            self.persistence.binding_removed(self, src, binding)
        self._forget_dest_index(src.name, binding)
        self._remove_binding_from(src, binding)
        self.events.emit("binding.deleted", lambda: ev.binding_props(self.name, src.name, binding))
        return True

    def _forget_dest_index(self, source: str, binding: Binding) -> None:
        s = self.bindings_to.get(binding.destination)
        if s is not None:
            s.discard((source, binding))
            if not s:
                del self.bindings_to[binding.destination]

    def _remove_binding_from(self, src: Exchange, binding: Binding) -> None:
        src.remove_binding(binding)
        if src.auto_delete and not src.binding_set and src.name in self.exchanges:
            self.delete_exchange(src, auto=True)

    def _remove_destination(self, dest: Destination) -> None:
        """Every binding to `dest` (a queue or exchange being deleted) goes, one source exchange at
        a time (by name), each at the cost of its own bindings to `dest`; an auto-delete source left
        without bindings goes too. RabbitMQ tells these as its internal user's: a source's deletion,
        then its bindings'."""
        sources = sorted({source for source, _binding in self.bindings_to.pop(dest, ())})
        events = self.events
        with events.acting(ev.INTERNAL_USER):
            for source_name in sources:
                src = self.exchanges.get(source_name)
                if src is None:
                    continue
                gone = src.remove_destination(dest)
                if src.auto_delete and not src.binding_set and src.name in self.exchanges:
                    self.delete_exchange(src, auto=True)
                for binding in sorted(gone, key=lambda b: b.key):
                    events.emit("binding.deleted", partial(ev.binding_props, self.name, source_name, binding))

    # -- queues -----------------------------------------------------------------------------------

    def add_queue(self, q: Queue) -> None:
        self.queues[q.name] = q
        if self.persistence is not None:
            self.persistence.queue_added(self, q)
        if self.hooks is not None:
            self.hooks.queue_added(self, q)
        self.events.emit("queue.created", lambda: ev.queue_created(q))

    def delete_queue(self, q: Queue, reason: str = "deleted") -> int:
        """Remove a queue, its bindings and its consumers; returns the ready count it had."""
        if q.deleted:
            return 0
        q.deleted = True
        if q.store is not None and self.persistence is not None:  # also drops its messages, bindings
            self.persistence.queue_deleted(self, q)
        q.store = None
        self.queues.pop(q.name, None)
        self._remove_destination(Destination.queue(q.name))
        self.stats.retire(q.stats)
        n = q.delete()
        # asked for (by a client, or with its vhost) or not (auto-delete, expiry, owner gone)
        actor = None if reason in ("deleted", "vhost deleted") else ev.INTERNAL_USER
        self.events.emit("queue.deleted", lambda: ev.resource("name", q.name, self.name), actor=actor)
        for cb in list(self.on_queue_deleted):
            cb(q)
        log.debug("queue %r deleted (%s)", q.name, reason)
        return n

    # -- routing ----------------------------------------------------------------------------------

    def route(self, x: Exchange, msg: StoredMessage) -> list[Queue]:
        """Queues a message published to `x` reaches (rabbit_exchange:route), de-duplicated."""
        if x.impl is None:  # default exchange: every queue is bound by its name
            keys = msg.extra_keys
            if keys is None:
                q = self.queues.get(msg.routing_key)
                return [q] if q is not None else []
            if len(keys) == 1:
                q = self.queues.get(keys[0])
                return [q] if q is not None else []
            out: dict[str, Queue] = {}
            for k in sorted(set(keys)):
                q = self.queues.get(k)
                if q is not None:
                    out[k] = q
            return list(out.values())
        view = RoutingView(msg)
        dests = x.impl.route(view)
        if x.alternate is None and all(d.kind == "queue" for d in dests):
            qs = self.queues
            if len(dests) == 1:
                q = qs.get(dests[0].name)
                return [q] if q is not None else []
            found: dict[str, Queue] = {}
            for d in dests:
                q = qs.get(d.name)
                if q is not None:
                    found[d.name] = q
            return list(found.values())
        return self._route_walk(x, view, dests)

    def _route_walk(self, x: Exchange, view: RoutingView, first: list[Destination]) -> list[Queue]:
        seen: set[str] = {x.name}
        work: list[tuple[Exchange, list[Destination] | None]] = [(x, first)]
        queue_names: dict[str, None] = {}
        while work:
            ex, dests = work.pop()
            if dests is None:
                assert ex.impl is not None
                dests = ex.impl.route(view) if ex.impl is not None else []
            extra: list[Destination] = []
            if not dests and ex.alternate is not None:
                extra.append(Destination.exchange(ex.alternate))
            for d in extra + dests:
                if d.kind == "queue":
                    queue_names[d.name] = None
                elif d.name not in seen:
                    seen.add(d.name)
                    nxt = self.exchanges.get(d.name)
                    if nxt is not None:
                        if nxt.impl is None:
                            # default exchange as a destination: route by name
                            for k in view.routing_keys:
                                queue_names[k] = None
                        else:
                            work.append((nxt, None))
        out = []
        for name in sorted(queue_names):
            q = self.queues.get(name)
            if q is not None:
                out.append(q)
        return out

    # -- the delivery pipeline ----------------------------------------------------------------------

    def publish(
        self, x: Exchange, msg: StoredMessage, mandatory: bool = False, *, counted: bool = True
    ) -> PublishOutcome:
        """Route `msg` from `x` and deliver it (see the module docstring).

        `counted`: a client's publish (basic.publish, management's): it counts in the exchange's
        message_stats and in those of a queue whose overflow refuses it. RabbitMQ counts these per
        channel, so a dead letter, a delayed release or a trace copy is not counted.
        """
        q = self.sole_queue(x, msg)
        if q is not None:
            if counted:
                x.publish_in += 1
            q.enqueue(msg)
            return ACCEPTED_BY_ONE
        return self.deliver(x, msg, self.route_publish(x, msg), mandatory=mandatory, counted=counted)

    def sole_queue(self, x: Exchange, msg: StoredMessage) -> Queue | None:
        """The ingest fast path's queue: the one queue a publish to `x` reaches when there is
        nothing to refuse, write or return on the way (the default exchange, one routing key, a
        queue that keeps nothing and drops from its head when full); None otherwise. The same
        exchange and routing key give the same answer until a declaration or policy changes."""
        if x.impl is None and msg.extra_keys is None:
            q = self.queues.get(msg.routing_key)
            if q is not None and q.store is None and q.overflow == "drop-head":
                return q
        return None

    def enqueue_run(self, x: Exchange, q: Queue, msgs: list[StoredMessage]) -> None:
        """Client publishes to `x` that `sole_queue` sends to `q`, in order (`publish` of each)."""
        x.publish_in += len(msgs)
        q.enqueue_run(msgs)

    def route_publish(self, x: Exchange, msg: StoredMessage) -> list[Queue]:
        """The queues a publish to `x` reaches now: none when x is an x-delayed-message exchange
        that holds the message (the plugin's route/2 returns [] and releases it later)."""
        if x.type_name == DELAYED_TYPE and self._hold(x, msg):
            return []
        return self.route(x, msg)

    def _hold(self, x: Exchange, msg: StoredMessage) -> bool:
        """Hold a message published to the delayed exchange `x` for its x-delay, kept when `x` is
        durable; False: it is not delayed, route it now."""
        delay = delay_ms(RoutingView(msg))
        if delay <= 0:
            return False
        delayed = self.delayed
        due = delayed.now_ms() + delay
        key = 0
        if x.durable and self.persistence is not None:
            key = delayed.next_key()
            self.persistence.delayed_held(self, x, key, due, msg)
        delayed.hold(Held(x, msg, key), due)
        return True

    def restore_delayed(self, x: Exchange, msg: StoredMessage, key: int, due_ms: int) -> None:
        """A message the durable delayed exchange `x` held before a restart (read back at boot, in
        key order): held again until `due_ms`, released at once when that is past."""
        self.delayed.hold(Held(x, msg, key), due_ms)

    def _release_delayed(self, due: list[Held]) -> None:
        """Route what the delay table released through the pipeline, as the plugin's timer does;
        a message whose exchange was deleted meanwhile (or deleted and declared again) is dropped.
        The kept ones are forgotten after their released copies were written."""
        released: list[int] = []
        for x, msg, key in due:
            if key:
                released.append(key)
            if self.exchanges.get(x.name) is x:
                self.deliver(x, msg, self.route(x, msg), counted=False)
        if released and self.persistence is not None:
            self.persistence.delayed_released(self, released)

    def deliver(
        self,
        x: Exchange,
        msg: StoredMessage,
        queues: Sequence[Queue],
        mandatory: bool = False,
        *,
        counted: bool = True,
    ) -> PublishOutcome:
        """Deliver `msg`, published to `x`, to the `queues` it was routed to (those deleted since,
        as in a transaction routed at publish, are skipped): overflow, store write, enqueue."""
        live = queues
        for q in queues:
            if q.deleted:
                live = [q for q in queues if not q.deleted]
                break
        n = len(live)
        if counted:
            x.publish_in += 1  # message_stats: one count when the publish reaches exactly one queue
            if n != 1:
                x.fanout_extra += n - 1
        if not n:
            return RETURNED if mandatory else UNROUTED
        if msg.has_bcc:
            msg = msg.strip_bcc()  # as delivered (rabbit_basic:strip_bcc)
        refused = False
        size = len(msg.body)
        accepted: list[Queue] = []
        kept = False
        for q in live:
            overflow = q.overflow
            if overflow != "drop-head" and q.would_overflow(size):
                refused = True
                if counted:
                    q.stat_refused += 1
                if overflow == "reject-publish-dlx":
                    q.dead_letter([Entry(0, msg, 0.0)], "maxlen")
                continue
            accepted.append(q)
            if q.store is not None:
                kept = True
        persistence = self.persistence
        if not kept or persistence is None:
            for q in accepted:
                q.enqueue(msg)
            return PublishOutcome(n, refused, False, None)
        # positions are reserved and the write submitted before any enqueue: an enqueue may remove
        # the message again (a no-ack delivery, a drop-head), and the store applies writes in order
        stored, seqs = persistence.publish(self, msg, accepted)
        for q, seq in zip(accepted, seqs, strict=True):
            q.enqueue(msg, seq)
        if stored is not None:
            stored.add_done_callback(lambda commit: _forget_unstored(commit, accepted, seqs))
        return PublishOutcome(n, refused, False, stored)

    # -- dead lettering -----------------------------------------------------------------------------

    def dead_letter(self, q: Queue, msgs: list[StoredMessage], reason: str) -> int:
        """rabbit_dead_letter:publish for each of `msgs` leaving `q` ("rejected", "expired",
        "maxlen"): its x-death copy (broker.entities.dead_letter) is routed from the queue's
        dead-letter exchange, a fully automatic cycle dropped, and delivered through the pipeline,
        uncounted in message_stats as RabbitMQ counts per channel. Returns how many were routed to
        some queue (a quorum queue's at-least-once dead-lettering holds the others)."""
        dlx = q.dlx
        x = self.exchanges.get(dlx) if dlx is not None else None
        if x is None or dlx is None:
            return 0
        wall = self.clock.wall()
        routed = 0
        for msg in msgs:
            dl = make_dead_letter(msg, reason, dlx, q.dlrk, q.name, wall)
            targets = self.route(x, dl)
            if reason != "rejected":
                targets = [t for t in targets if not is_cycle(t.name, dl)]
            targets = [t for t in targets if not t.crashes_on(dl)]
            if targets:
                routed += 1
                self.deliver(x, dl, targets, counted=False)
        return routed


def _forget_unstored(commit: Commit, queues: Sequence[Queue], seqs: Sequence[int]) -> None:
    """Once the store write of a message failed (its publisher is nacked), take it out of the kept
    queues where it is still ready, so a queue's depth counts only what a restart brings back. One
    already delivered stays with its consumer: as on RabbitMQ, a nacked message may or may not
    have been delivered."""
    if failed(commit):
        for q, seq in zip(queues, seqs, strict=True):
            if q.store is not None and not q.deleted:
                q.forget_unstored(seq)
