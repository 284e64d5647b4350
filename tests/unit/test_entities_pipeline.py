"""The vhost's one delivery pipeline (route, overflow, store write, enqueue) and its delay table,
sans I/O: a ManualClock and a persistence that records what it is told."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from amqpwire.fields import FieldTable
from broker.entities.clock import ManualClock
from broker.entities.exchange import Exchange
from broker.entities.message import StoredMessage
from broker.entities.queues.catalog import Queue
from broker.entities.vhost import ACCEPTED_BY_ONE, RETURNED, VHost
from broker.protocol import properties as P
from exchanges.base import Binding, Destination
from tests.unit.entities_support import COMPAT, args, declare, drain_bodies


class Commit:
    """A store write's completion, failed or committed by the test."""

    def __init__(self) -> None:
        self.callbacks: list[Callable[[Any], object]] = []
        self.error: BaseException | None = None

    def add_done_callback(self, fn: Callable[[Any], object], /) -> None:
        self.callbacks.append(fn)

    def cancelled(self) -> bool:
        return False

    def exception(self) -> BaseException | None:
        return self.error

    def fail(self) -> None:
        self.error = OSError("disk full")
        for fn in self.callbacks:
            fn(self)


class Kept:
    """Keeps durable queues (marks them with `store`) and records message and delay-table writes."""

    def __init__(self) -> None:
        self.log: list[tuple[Any, ...]] = []
        self.commits: list[Commit] = []

    def queue_added(self, vhost: VHost, q: Queue) -> None:
        if q.durable:
            q.store = self  # type: ignore[assignment]

    def exchange_declared(self, vhost: VHost, x: Exchange) -> None:
        pass

    def exchange_deleted(self, vhost: VHost, x: Exchange) -> None:
        pass

    def binding_added(self, vhost: VHost, source: Exchange, binding: Binding) -> None:
        pass

    def messages_removed(self, q: Queue, entries: Sequence[Any]) -> None:
        self.log.append(("removed", q.name))

    def publish(
        self, vhost: VHost, msg: StoredMessage, queues: Sequence[Queue]
    ) -> tuple[Commit | None, list[int]]:
        seqs = []
        for q in queues:
            q.seq += 1
            seqs.append(q.seq)
        self.log.append(("publish", msg.body, [q.name for q in queues]))
        commit = Commit()
        self.commits.append(commit)
        return commit, seqs

    def delayed_held(self, vhost: VHost, x: Exchange, key: int, due_ms: int, msg: StoredMessage) -> None:
        self.log.append(("held", x.name, key, due_ms, msg.body))

    def delayed_released(self, vhost: VHost, keys: Iterable[int]) -> None:
        self.log.append(("released", list(keys)))


def setup() -> tuple[VHost, Kept, ManualClock]:
    clock = ManualClock()
    kept = Kept()
    return VHost("/", COMPAT, clock, persistence=kept), kept, clock  # type: ignore[arg-type]


def durable(v: VHost, name: str, **arguments: object) -> Queue:
    q = Queue(v, name, durable=True, exclusive_owner=None, auto_delete=False, arguments=args(**arguments))
    v.add_queue(q)
    return q


def bind(v: VHost, x: Exchange, queue: str, key: str = "k") -> None:
    v.add_binding(x, Binding(Destination.queue(queue), key, FieldTable()))


def delayed_into(v: VHost, queue: str) -> Exchange:
    """A durable delayed-message exchange "dx" (direct) bound to `queue` with key "k"."""
    x = delayed_exchange(v, "dx", durable=True)
    bind(v, x, queue)
    return x


def delayed_exchange(v: VHost, name: str, *, durable: bool) -> Exchange:
    arguments = FieldTable.from_python({"x-delayed-type": "direct"})
    return v.declare_exchange(
        name, "x-delayed-message", durable=durable, auto_delete=False, internal=False, arguments=arguments
    )


def publish(
    exchange: str, key: str, body: bytes, *, delay: int | None = None, persistent: bool = True
) -> StoredMessage:
    props: dict[str, object] = {"delivery_mode": 2 if persistent else 1}
    if delay is not None:
        props["headers"] = FieldTable.from_python({"x-delay": delay})
    msg = StoredMessage(exchange, key, P.encode(props), body)
    msg.compute_routing_keys()
    return msg


def test_message_stats_count_client_publishes_only() -> None:
    v, _kept, _clock = setup()
    fast = declare(v, "fast")
    fan = v.exchanges["amq.fanout"]
    bind(v, fan, "fast")
    declare(v, "other")
    bind(v, fan, "other")
    default = v.exchanges[""]
    assert v.publish(default, publish("", "fast", b"1", persistent=False)) is ACCEPTED_BY_ONE
    assert default.publish_in == 1 and default.publish_out == 1
    out = v.publish(fan, publish("amq.fanout", "", b"2"))
    assert (out.routed, out.refused, out.returned) == (2, False, False)
    assert fan.publish_in == 1 and fan.publish_out == 2
    assert v.publish(default, publish("", "nowhere", b"3"), True) is RETURNED
    assert default.publish_in == 2 and default.publish_out == 1
    v.publish(fan, publish("amq.fanout", "", b"4"), counted=False)  # a dead letter, a trace copy
    assert fan.publish_in == 1 and fan.publish_out == 2
    assert drain_bodies(fast) == [b"1", b"2", b"4"]


def test_overflow_refuses_and_a_dead_letter_refused_by_reject_publish_dlx_is_dead_lettered_again() -> None:
    """Observed on RabbitMQ 3.10.8: a dead letter reaching a full reject-publish-dlx queue is
    dead-lettered by it (reason maxlen); refusals count in the queue's message_stats only for a
    client's publish."""
    v, _kept, clock = setup()
    dead = {"x_dead_letter_exchange": "", "x_dead_letter_routing_key": "last"}
    src = declare(v, "src", x_message_ttl=0, x_dead_letter_exchange="", x_dead_letter_routing_key="full")
    full = declare(v, "full", x_max_length=1, x_overflow="reject-publish-dlx", **dead)
    last = declare(v, "last")
    default = v.exchanges[""]
    v.publish(default, publish("", "full", b"fill"))
    out = v.publish(default, publish("", "full", b"refused"))
    assert out.refused and full.stat_refused == 1
    v.publish(default, publish("", "src", b"expires"))
    clock.advance(0)
    assert full.stat_refused == 1  # the refused dead letter is not a client's publish
    got = []
    while (e := last.get(no_ack=True)) is not None:
        headers = e.msg.headers()
        deaths = headers.get("x-death") if headers is not None else None
        assert deaths is not None
        got.append((e.msg.body, [d.value.get("queue").value for d in deaths.value]))
    assert got == [(b"refused", [b"full"]), (b"expires", [b"full", b"src"])]
    assert drain_bodies(full) == [b"fill"] and src.count == 0


def test_a_failed_store_write_takes_the_message_back_out_of_the_kept_queues() -> None:
    v, kept, _clock = setup()
    q = durable(v, "dq")
    loose = declare(v, "loose")
    fan = v.exchanges["amq.fanout"]
    bind(v, fan, "dq")
    bind(v, fan, "loose")
    out = v.publish(fan, publish("amq.fanout", "", b"m"))
    assert out.stored is kept.commits[0] and q.count == 1 and loose.count == 1
    kept.commits[0].fail()
    assert q.count == 0 and loose.count == 1


def test_a_delayed_message_is_held_kept_and_released_on_the_clock() -> None:
    v, kept, clock = setup()
    q = durable(v, "dq")
    x = delayed_into(v, "dq")
    start = int(clock.wall() * 1000)
    out = v.publish(x, publish("dx", "k", b"later", delay=100), True)
    assert out is RETURNED and x.publish_in == 1 and x.publish_out == 0  # routed nowhere now
    assert kept.log == [("held", "dx", 1, start + 100, b"later")]
    assert v.publish(x, publish("dx", "k", b"now")).routed == 1  # no x-delay: routed at once
    clock.advance(0.099)
    assert drain_bodies(q) == [b"now"] and len(v.delayed) == 1
    kept.log.clear()
    clock.advance(0.001)
    # written like any publish into a kept queue, then forgotten by the delay table
    assert kept.log == [("publish", b"later", ["dq"]), ("released", [1])]
    assert drain_bodies(q) == [b"later"] and len(v.delayed) == 0
    assert x.publish_in == 2 and x.publish_out == 1  # the release is no client's publish


def test_a_transient_exchange_keeps_nothing_and_a_deleted_one_releases_nothing() -> None:
    v, kept, clock = setup()
    x = delayed_exchange(v, "tx", durable=False)
    gone = delayed_exchange(v, "gone", durable=True)
    q = declare(v, "q")
    bind(v, x, "q")
    bind(v, gone, "q")
    v.publish(x, publish("tx", "k", b"transient exchange", delay=10))
    v.publish(gone, publish("gone", "k", b"deleted", delay=10))
    assert kept.log == [("held", "gone", 1, int(clock.wall() * 1000) + 10, b"deleted")]
    v.delete_exchange(gone)
    clock.advance(0.01)
    assert drain_bodies(q) == [b"transient exchange"]
    assert kept.log[-1] == ("released", [1])


def test_restored_messages_are_held_again_and_released_when_due() -> None:
    v, kept, clock = setup()
    q = declare(v, "q")
    x = delayed_into(v, "q")
    now = int(clock.wall() * 1000)
    v.restore_delayed(x, publish("dx", "k", b"overdue", delay=5), 7, now - 1000)
    v.restore_delayed(x, publish("dx", "k", b"later", delay=5), 9, now + 50)
    clock.advance(0)
    assert drain_bodies(q) == [b"overdue"] and kept.log == [("released", [7])]
    clock.advance(0.05)
    assert drain_bodies(q) == [b"later"]
    v.publish(x, publish("dx", "k", b"new", delay=5))
    assert kept.log[-1][:3] == ("held", "dx", 10)  # keys continue above the restored ones
