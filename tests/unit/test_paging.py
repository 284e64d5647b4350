"""Paging of classic queues (broker.entities.queues.classic.paging) against an in-memory spool: past the
window
messages leave memory, and order, priorities, TTL, length limits, requeue, purge and counts stay
exact; a restart backlog comes back before what is published after it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from amqpwire.fields import FieldTable
from broker.entities.clock import ManualClock
from broker.entities.message import StoredMessage
from broker.entities.queues import ready as page_window
from broker.entities.queues.catalog import ClassicQueue, Entry, Queue
from broker.entities.queues.classic import paging
from broker.entities.vhost import VHost
from broker.protocol import properties as P
from exchanges.base import Binding, Destination
from tests.unit.entities_support import COMPAT, RecordingChannel, args, consumer, drain_bodies, message
from tests.unit.test_entities_persistence import RecordingPersistence

N = 3 * page_window.WINDOW + 123


class MemorySpool:
    """A PageSpool in a bytearray; counts what is read and released."""

    def __init__(self, spools: list[MemorySpool]) -> None:
        self.data = bytearray()
        self.released = 0
        self.closed = False
        spools.append(self)

    def append(self, blob: bytes) -> int:
        off = len(self.data)
        self.data += blob
        return off

    def read(self, start: int, end: int) -> bytes:
        assert not self.closed and start >= self.released
        return bytes(self.data[start:end])

    def release(self, upto: int) -> None:
        assert upto >= self.released
        self.released = upto

    def close(self) -> None:
        self.closed = True


class PagingPersistence(RecordingPersistence):
    def __init__(self) -> None:
        super().__init__()
        self.spools: list[MemorySpool] = []

    def spool_factory(self) -> Callable[[], MemorySpool]:
        return lambda: MemorySpool(self.spools)

    def queue_purged(self, q: Queue, ready: Sequence[Entry], paged: Sequence[int] = ()) -> None:
        self.calls.append(("queue_purged", q.name, len(ready), list(paged)))


def setup(**arguments: object) -> tuple[VHost, ClassicQueue, PagingPersistence, ManualClock]:
    clock = ManualClock()
    p = PagingPersistence()
    v = VHost("/", COMPAT, clock, persistence=p)
    q = Queue(v, "q", durable=False, exclusive_owner=None, auto_delete=False, arguments=args(**arguments))
    v.add_queue(q)
    assert isinstance(q, ClassicQueue)
    return v, q, p, clock


def in_memory(q: ClassicQueue) -> int:
    return sum(len(level) for level in q.levels)


def body(i: int) -> bytes:
    return b"m%06d-" % i + b"x" * (i % 7)


def test_past_the_window_bodies_leave_memory_and_come_back_in_order() -> None:
    _v, q, p, _clock = setup()
    for i in range(N):
        q.enqueue(message(body(i)))
    assert q.pager is not None
    assert in_memory(q) == page_window.WINDOW and q.pager.count == N - page_window.WINDOW
    assert q.message_count == N and q.bytes == sum(len(body(i)) for i in range(N))
    got = []
    while (e := q.get(no_ack=True)) is not None:
        got.append(e.msg.body)
        assert q.count == N - len(got) and in_memory(q) <= page_window.WINDOW
        assert q.count == 0 or q.levels[0]  # the head is always in memory
    assert got == [body(i) for i in range(N)]
    assert q.bytes == 0 and q.pager.count == 0 and q.pager.bytes == 0
    assert p.spools and all(s.closed for s in p.spools)  # a spool read to its end is dropped


def test_publishing_while_the_tail_drains_keeps_order_and_consumers_get_everything() -> None:
    _v, q, _p, _clock = setup()
    ch = RecordingChannel()
    for i in range(N):
        q.enqueue(message(body(i)))
    c = consumer(ch, q, "c", prefetch=500)
    q.add_consumer(c)
    nxt = N
    while len(ch.delivered) < N + 2000:
        ch.ack_all()
        q.try_deliver()
        if nxt < N + 2000:
            for _ in range(min(300, N + 2000 - nxt)):
                q.enqueue(message(body(nxt)))
                nxt += 1
    assert [b for _tag, b in ch.delivered] == [body(i) for i in range(N + 2000)]
    assert q.count == 0 and q.bytes == 0


def test_properties_routing_keys_and_redelivered_survive_a_page_out() -> None:
    _v, q, _p, _clock = setup()
    props = P.encode({"delivery_mode": 2, "message_id": "id-7", "headers": FieldTable()})
    for i in range(N):
        msg = StoredMessage("ex", f"rk{i}", props, body(i))
        msg.routing_keys = [f"rk{i}", "cc"]
        q.enqueue(msg)
    entries = []
    while (e := q.get(no_ack=True)) is not None:
        entries.append(e)
    last = entries[-1]
    assert last.msg.props == props and last.msg.exchange == "ex" and last.msg.prop("message_id") == "id-7"
    assert list(last.msg.routing_keys) == [f"rk{N - 1}", "cc"]
    assert [e.seq for e in entries] == list(range(1, N + 1))


def test_priorities_are_served_highest_first_across_paged_levels() -> None:
    _v, q, _p, _clock = setup(x_max_priority=5)
    msgs = [(i, i % 6) for i in range(N)]
    for i, prio in msgs:
        q.enqueue(message(body(i), priority=prio))
    assert q.pager is not None and q.pager.count > 0
    expected = [body(i) for i, _prio in sorted(msgs, key=lambda m: (-m[1], m[0]))]
    assert drain_bodies(q) == expected


def test_a_high_priority_message_arriving_when_the_window_is_full_is_served_first() -> None:
    _v, q, _p, _clock = setup(x_max_priority=9)
    for i in range(N):
        q.enqueue(message(body(i)))
    q.enqueue(message(b"urgent", priority=9))
    assert q.get(no_ack=True).msg.body == b"urgent"  # type: ignore[union-attr]


def dead_lettering(**arguments: object) -> tuple[ClassicQueue, Queue, ManualClock]:
    """A queue holding N messages that dead-letters through amq.direct to the queue "dl"."""
    v, q, _p, clock = setup(x_dead_letter_exchange="amq.direct", x_dead_letter_routing_key="dl", **arguments)
    dl = Queue(v, "dl", durable=False, exclusive_owner=None, auto_delete=False, arguments=args())
    v.add_queue(dl)
    v.add_binding(v.exchanges["amq.direct"], Binding(Destination.queue("dl"), "dl", FieldTable()))
    for i in range(N):
        q.enqueue(message(body(i)))
    return q, dl, clock


def test_paged_messages_expire_on_time_and_are_dead_lettered_with_their_bodies() -> None:
    q, dl, clock = dead_lettering(x_message_ttl=1000)
    clock.advance(0.5)
    assert q.message_count == N
    clock.advance(1.0)
    assert q.message_count == 0 and q.bytes == 0
    assert dl.count == N
    assert drain_bodies(dl) == [body(i) for i in range(N)]  # type: ignore[arg-type]


def test_drop_head_dead_letters_from_the_head_and_counts_stay_exact() -> None:
    q, dl, _clock = dead_lettering(x_max_length=5000)
    assert q.count == 5000 and q.bytes == sum(len(body(i)) for i in range(N - 5000, N))
    assert drain_bodies(dl) == [body(i) for i in range(N - 5000)]  # type: ignore[arg-type]
    assert drain_bodies(q) == [body(i) for i in range(N - 5000, N)]


def test_reject_publish_counts_paged_messages() -> None:
    _v, q, _p, _clock = setup(x_max_length=N, x_overflow="reject-publish")
    for i in range(N):
        assert not q.would_overflow(len(body(i)))
        q.enqueue(message(body(i)))
    assert q.would_overflow(1)


def test_requeued_messages_go_back_to_the_head_in_memory() -> None:
    _v, q, _p, _clock = setup()
    for i in range(N):
        q.enqueue(message(body(i)))
    taken = [q.get(no_ack=False) for _ in range(10)]
    q.requeue([e for e in reversed(taken) if e is not None])
    got = drain_bodies(q)
    assert got == [body(i) for i in range(N)]


def test_purge_drops_paged_messages_and_names_stored_ones_while_some_are_unacked() -> None:
    _v, q, p, _clock = setup()
    q.store = p  # type: ignore[assignment]  # a kept queue
    props = P.encode({"delivery_mode": 2})
    for i in range(N):
        q.enqueue(StoredMessage("", "q", props, body(i)), seq=i + 1)
    assert q.get(no_ack=False) is not None
    q.unacked = 1
    p.calls.clear()
    assert q.purge() == N - 1
    (call,) = p.calls
    name, qname, ready, paged = call
    assert (name, qname) == ("queue_purged", "q")
    assert sorted(paged) == list(range(ready + 2, N + 1)) and ready + len(paged) == N - 1
    assert q.count == 0 and q.bytes == 0 and all(s.closed for s in p.spools)
    q.enqueue(message(b"after"))
    assert drain_bodies(q) == [b"after"]


def test_without_paging_persistence_the_queue_keeps_everything_in_memory() -> None:
    v = VHost("/", COMPAT, ManualClock())
    q = Queue(v, "q", durable=False, exclusive_owner=None, auto_delete=False, arguments=args())
    v.add_queue(q)
    for i in range(N):
        q.enqueue(message(body(i)))
    assert isinstance(q, ClassicQueue) and q.pager is None and in_memory(q) == N
    assert q.page_window == page_window.NEVER


class ListBacklog:
    def __init__(self, rows: list[tuple[int, StoredMessage, bool]]) -> None:
        self.rows = rows
        self.count = len(rows)
        self.bytes = sum(len(m.body) for _s, m, _r in rows)
        self.reads = 0

    def read(self, limit: int) -> list[tuple[int, StoredMessage, bool]]:
        self.reads += 1
        out, self.rows = self.rows[:limit], self.rows[limit:]
        self.count -= len(out)
        self.bytes -= sum(len(m.body) for _s, m, _r in out)
        return out

    def remaining_seqs(self) -> list[int]:
        return [s for s, _m, _r in self.rows]


def test_a_restart_backlog_is_read_as_the_head_advances_and_comes_before_new_messages() -> None:
    _v, q, p, _clock = setup()
    rows = [(i * 2, message(body(i)), i == 1) for i in range(1, N + 1)]  # stored seqs may have gaps
    backlog = ListBacklog(rows)
    paging.restore_backlog(q, backlog, rows[-1][0], p.spool_factory())
    assert q.count == N and q.seq == 2 * N and backlog.reads == 1 and in_memory(q) <= paging.BATCH
    for i in range(N + 1, N + 5000):
        q.enqueue(message(body(i)))
    entries: list[Any] = []
    while (e := q.get(no_ack=True)) is not None:
        entries.append(e)
    assert [e.msg.body for e in entries] == [body(i) for i in range(1, N + 5000)]
    assert entries[0].redelivered and not entries[1].redelivered
    assert [e.seq for e in entries[N : N + 2]] == [2 * N + 1, 2 * N + 2]
    assert q.count == 0 and q.bytes == 0


def test_a_paged_message_whose_store_write_failed_is_forgotten() -> None:
    """drop_unstored's path for a paged queue: the message leaves the tail and the counts."""
    _v, q, _p, _clock = setup()
    for i in range(N):
        q.enqueue(message(body(i)))
    assert q.pager is not None
    last, middle = q.seq, q.seq - 5
    assert q.pager.forget(last) and q.pager.forget(middle)
    assert not q.pager.forget(last)  # gone already
    assert not q.pager.forget(1)  # in memory, not paged
    kept = [body(i) for i in range(N) if i not in (N - 1, N - 6)]
    assert q.message_count == N - 2 and q.bytes == sum(len(b) for b in kept)
    assert drain_bodies(q) == kept
    assert q.count == 0 and q.bytes == 0 and q.pager.count == 0
