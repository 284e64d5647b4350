"""The ready-list component classic and quorum queues compose (broker.entities.queues.ready), on its
own: a fake owner records what leaves for good, a ManualClock drives TTL, an in-memory spool takes
what pages out."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from broker.entities.clock import ManualClock
from broker.entities.message import StoredMessage
from broker.entities.queues.base import Consumer, Entry
from broker.entities.queues.ready import WINDOW, ReadyList
from broker.protocol import properties as P
from tests.unit.entities_support import message


class MemorySpool:
    def __init__(self) -> None:
        self.data = bytearray()
        self.closed = False

    def append(self, blob: bytes) -> int:
        off = len(self.data)
        self.data += blob
        return off

    def read(self, start: int, end: int) -> bytes:
        return bytes(self.data[start:end])

    def release(self, upto: int) -> None:
        pass

    def close(self) -> None:
        self.closed = True


class Store:
    """The persistence as the ready list sees it: pages to memory, records purges."""

    def __init__(self, pages: bool = True) -> None:
        self.pages = pages
        self.purged: list[tuple[list[bytes], list[int]]] = []

    def spool_factory(self) -> Callable[[], MemorySpool] | None:
        return MemorySpool if self.pages else None

    def queue_purged(self, q: Any, ready: Sequence[Entry], paged: Sequence[int] = ()) -> None:
        self.purged.append(([e.msg.body for e in ready], list(paged)))


class Owner:
    """What a ReadyList uses of its queue."""

    def __init__(self, clock: ManualClock, store: Store | None = None) -> None:
        self.clock = clock
        self.deleted = False
        self.store: object | None = None
        self.unacked = 0
        self.vhost = SimpleNamespace(persistence=store)
        self.dead: list[tuple[str, list[bytes]]] = []

    def dead_letter(self, entries: list[Entry], reason: str) -> None:
        self.dead.append((reason, [e.msg.body for e in entries]))

    def purge_keeps_stored(self) -> bool:
        return self.unacked > 0


def ready_list(
    clock: ManualClock | None = None, store: Store | None = None, **kw: Any
) -> tuple[ReadyList, Owner]:
    owner = Owner(clock or ManualClock(), store)
    return ReadyList(owner, **kw), owner  # type: ignore[arg-type]


def fill(r: ReadyList, bodies: Sequence[bytes], start: int = 1, **props: Any) -> list[Entry]:
    out = []
    for seq, body in enumerate(bodies, start):
        msg = message(body, **props)
        entry = Entry(seq, msg, r.expiry(msg))
        r.add(entry, r.level_of(msg))
        out.append(entry)
    return out


def drain(r: ReadyList) -> list[bytes]:
    out = []
    while (e := r.pop()) is not None:
        out.append(e.msg.body)
    return out


def test_priority_levels_serve_the_highest_first_in_arrival_order() -> None:
    r, _ = ready_list(max_priority=5)
    for i, prio in enumerate((0, 3, 9, 3, 0)):
        msg = message(b"m%d" % i, priority=prio)
        r.add(Entry(i + 1, msg, 0.0), r.level_of(msg))
    assert (r.count, r.bytes) == (5, 10)
    assert drain(r) == [b"m2", b"m1", b"m3", b"m0", b"m4"]  # priority 9 is capped at 5
    assert (r.count, r.bytes) == (0, 0)


def test_ordered_levels_serve_the_first_level_first() -> None:
    r, _ = ready_list(levels=2, pages=False)
    r.add(Entry(1, message(b"back"), 0.0), 1)
    r.add(Entry(2, message(b"front"), 0.0), 0)
    assert drain(r) == [b"front", b"back"]


def test_a_requeued_message_goes_back_to_its_place() -> None:
    r, _ = ready_list()
    entries = fill(r, [b"a", b"b", b"c", b"d"])
    taken = [r.pop(), r.pop()]
    r.pop()  # c
    for e in reversed(taken):
        assert e is not None
        r.put_back(e)
    r.put_back(entries[2])
    assert drain(r) == [b"a", b"b", b"c", b"d"]


def test_an_expired_message_waits_behind_a_live_head() -> None:
    clock = ManualClock()
    r, owner = ready_list(clock)
    fill(r, [b"live"])
    fill(r, [b"short"], start=2, expiration="10")
    r.cancel_timer()
    clock.advance(1)
    r.drop_expired()
    assert owner.dead == [] and r.count == 2
    assert r.pop() is not None
    r.drop_expired()
    assert owner.dead == [("expired", [b"short"])] and (r.count, r.bytes) == (0, 0)


def test_the_timer_expires_heads_without_a_read() -> None:
    clock = ManualClock()
    r, owner = ready_list(clock)
    r.configure(message_ttl=100, max_length=None, max_length_bytes=None)
    fill(r, [b"a", b"b"])
    r.arm_ttl()
    clock.advance(0.05)
    assert owner.dead == []
    clock.advance(0.1)
    assert owner.dead == [("expired", [b"a", b"b"])] and r.count == 0


def test_trim_drops_from_the_head_counting_what_is_held_elsewhere() -> None:
    r, owner = ready_list()
    r.configure(message_ttl=None, max_length=3, max_length_bytes=None)
    fill(r, [b"1", b"2", b"3", b"4", b"5"])
    assert r.limited and r.over() and r.full(1)
    r.trim(held=1)
    assert owner.dead == [("maxlen", [b"1", b"2", b"3"])] and drain(r) == [b"4", b"5"]


def test_full_and_within_judge_the_byte_limit_too() -> None:
    r, _ = ready_list()
    r.configure(message_ttl=None, max_length=None, max_length_bytes=10)
    fill(r, [b"12345678"])
    assert not r.full(2) and r.full(3)
    assert r.within(1.0) and not r.within(0.5) and r.within(0.5, held=0, held_bytes=-4)


def test_dispatch_dead_letters_an_expired_head_and_is_not_reentered() -> None:
    clock = ManualClock()
    r, owner = ready_list(clock)
    fill(r, [b"gone"], expiration="5")
    fill(r, [b"kept", b"next"], start=2)
    r.cancel_timer()
    clock.advance(1)
    given: list[bytes] = []
    picks = iter([object(), object(), None])

    def deliver(_c: Consumer, entry: Entry) -> None:
        given.append(entry.msg.body)
        r.dispatch(lambda: pytest.fail("re-entered"), deliver)  # type: ignore[arg-type,return-value]

    r.dispatch(lambda: next(picks), deliver)  # type: ignore[arg-type,return-value]
    assert owner.dead == [("expired", [b"gone"])] and given == [b"kept", b"next"] and r.count == 0


def test_past_the_window_messages_page_out_and_come_back_in_order() -> None:
    r, _ = ready_list(store=Store())
    n = WINDOW + 500
    fill(r, [b"%05d" % i for i in range(n)])
    assert r.pager is not None and r.pager.count == n - WINDOW
    assert sum(len(level) for level in r.levels) == WINDOW and r.count == n
    assert drain(r) == [b"%05d" % i for i in range(n)]
    assert (r.count, r.bytes, r.pager.count) == (0, 0, 0)


def test_without_a_page_spool_the_list_stops_asking() -> None:
    r, _ = ready_list(store=Store(pages=False))
    fill(r, [b"x"] * (WINDOW + 10))
    assert r.pager is None and sum(len(level) for level in r.levels) == WINDOW + 10


def test_forget_finds_a_recent_message_in_memory_or_in_the_pager() -> None:
    r, _ = ready_list(store=Store())
    n = WINDOW + 20
    fill(r, [b"%05d" % i for i in range(n)])
    before = r.bytes
    assert r.forget(n) and r.forget(3)  # the newest is paged, seq 3 is in memory
    assert not r.forget(n) and not r.forget(10_000)
    assert (r.count, r.bytes) == (n - 2, before - 10)
    assert drain(r) == [b"%05d" % i for i in range(n) if i not in (2, n - 1)]


def test_purge_names_the_paged_stored_positions_only_while_others_stay_stored() -> None:
    store = Store()
    r, owner = ready_list(store=store)
    owner.store = store
    persistent = P.encode({"delivery_mode": 2})
    n = WINDOW + 3
    for seq in range(1, n + 1):
        r.add(Entry(seq, StoredMessage("", "q", persistent, b"m"), 0.0))
    owner.unacked = 1
    assert r.purge() == n and r.count == 0
    ((ready, paged),) = store.purged
    assert len(ready) == WINDOW and paged == [WINDOW + 1, WINDOW + 2, WINDOW + 3]
    owner.unacked = 0
    fill(r, [b"a"])
    r.purge()
    assert store.purged[-1] == ([b"a"], [])
