"""The ready messages of a queue that hands them out in order: classic and quorum queues compose one.

A `ReadyList` keeps its queue's messages between arrival and delivery, and every rule about them
that does not depend on the queue type:

* levels: one deque per priority (classic queues with x-max-priority, served highest first), or
  lists served in a fixed order (a quorum queue's returns before its other messages);
* counts: the messages and body bytes ready (paged ones included);
* message TTL: when each message expires (the queue's x-message-ttl or the message's expiration,
  whichever is sooner), expiry at the head of each level only (RabbitMQ's drop_expired_msgs: an
  expired message behind a live one waits until it is the head), and the timer that expires heads
  without any read;
* length limits: x-max-length and x-max-length-bytes, dropping from the head (`trim`) or telling a
  publisher the queue is full (`full`); what to do when full is the queue's overflow setting;
* requeue positions: a requeued message goes back to the place its `seq` had;
* paging: past `WINDOW` messages or `WINDOW_BYTES` body bytes in memory, new messages go to a
  `broker.entities.queues.classic.paging.Pager` (loaded on a queue's first page-out, so an idle
  broker does not carry it) and come back as the head advances.

Messages leave it for good through its queue's `dead_letter` ("expired", "maxlen"), which forgets
them in the store and dead-letters them as the queue's type does.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.entities.message import (
    EXPIRATION_FLAG,
    PRIORITY_FLAG,
    StoredMessage,
    is_persistent,
    parse_expiration,
)

if TYPE_CHECKING:
    from broker.entities.clock import Timer
    from broker.entities.queues.base import Consumer, Entry, PageSpool, Queue
    from broker.entities.queues.classic.paging import Backlog, Pager

#: Messages a queue keeps in memory before it pages (RabbitMQ's classic queues keep a few thousand).
WINDOW = 2048
#: ... or body bytes, whichever comes first: a queue of large messages pages sooner.
WINDOW_BYTES = 8 << 20
#: A level's deque is refilled from the pager when it holds fewer messages than this.
REFILL_BELOW = 256
#: The window of a list that never pages (no persistence, a store without a page directory, or a
#: type that keeps every message in memory).
NEVER = 1 << 62


class ReadyList:
    """The ready messages of `owner` (see the module docstring).

    `max_priority` > 0: one level per priority, the highest served first; else `levels` lists
    served in order. `pages`: whether messages past the window may be paged out.
    """

    __slots__ = (
        "_index",
        "_ttl_at",
        "_ttl_timer",
        "bytes",
        "count",
        "delivering",
        "levels",
        "limited",
        "max_length",
        "max_length_bytes",
        "max_priority",
        "message_ttl",
        "owner",
        "page_bytes",
        "page_window",
        "pager",
        "serving",
        "uses_ttl",
    )

    def __init__(self, owner: Queue, *, max_priority: int = 0, levels: int = 1, pages: bool = True) -> None:
        self.owner = owner
        self.max_priority = max_priority
        n = max_priority + 1 if max_priority else levels
        self.levels: list[deque[Entry]] = [deque() for _ in range(n)]
        #: the levels in the order their heads are served
        self.serving = list(reversed(self.levels)) if max_priority else self.levels
        self._index = {id(level): i for i, level in enumerate(self.levels)}
        self.count = 0
        self.bytes = 0
        self.message_ttl: int | None = None
        self.uses_ttl = False  # some message may expire (a TTL was ever set or seen)
        self.max_length: int | None = None
        self.max_length_bytes: int | None = None
        self.limited = False  # either limit is set
        self.delivering = False  # `dispatch` is running (a delivery must not start another)
        self._ttl_timer: Timer | None = None
        self._ttl_at = 0.0
        # paging: no pager until the window is full; NEVER once found unavailable
        self.pager: Pager | None = None
        self.page_window = WINDOW if pages else NEVER
        self.page_bytes = WINDOW_BYTES if pages else NEVER

    def configure(
        self, *, message_ttl: int | None, max_length: int | None, max_length_bytes: int | None
    ) -> None:
        """The effective x-message-ttl and length limits (x-arguments with the policy on top).
        New limits are applied by the next `trim`."""
        self.message_ttl = message_ttl
        if message_ttl is not None:
            self.uses_ttl = True
        self.max_length = max_length
        self.max_length_bytes = max_length_bytes
        self.limited = max_length is not None or max_length_bytes is not None

    # -- message TTL ---------------------------------------------------------------------------

    def expiry_at(self, msg: StoredMessage, now: float) -> float:
        """When `msg`, arriving at `now`, expires (0.0: never): the queue's message TTL or the
        message's expiration, whichever is sooner."""
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

    def expiry(self, msg: StoredMessage) -> float:
        """`expiry_at` now; only a message that may expire reads the clock."""
        if self.uses_ttl or msg.flags & EXPIRATION_FLAG:
            return self.expiry_at(msg, self.owner.clock.now())
        return 0.0

    def drop_expired(self) -> None:
        """Dead-letter ("expired") the expired messages at the head of each level."""
        if not self.uses_ttl or not self.count:
            return
        now = self.owner.clock.now()
        expired: list[Entry] = []
        pager = self.pager
        for level in self.levels:
            while level and level[0].expires and level[0].expires <= now:
                entry = level.popleft()
                self.count -= 1
                self.bytes -= len(entry.msg.body)
                expired.append(entry)
                if pager is not None and len(level) < REFILL_BELOW:
                    self._refill(level)
        if expired:
            self.owner.dead_letter(expired, "expired")
        if self.count:
            self.arm_ttl()

    def arm_ttl(self) -> None:
        """Make sure the timer fires when the soonest-expiring head expires."""
        soonest = min((lv[0].expires for lv in self.levels if lv and lv[0].expires), default=0.0)
        if not soonest:
            return
        if self._ttl_timer is not None and self._ttl_at <= soonest:
            return
        if self._ttl_timer is not None:
            self._ttl_timer.cancel()
        self._ttl_at = soonest
        clock = self.owner.clock
        self._ttl_timer = clock.call_later(max(0.0, soonest - clock.now()) + 0.001, self._ttl_fire)

    def _ttl_fire(self) -> None:
        self._ttl_timer = None
        if not self.owner.deleted:
            self.drop_expired()

    def cancel_timer(self) -> None:
        """No head expires on the timer any more (the queue is deleted); reads still expire them."""
        if self._ttl_timer is not None:
            self._ttl_timer.cancel()
            self._ttl_timer = None

    # -- messages in ---------------------------------------------------------------------------

    def level_of(self, msg: StoredMessage) -> int:
        """The level of a message by its priority (level 0 without priorities)."""
        if not self.max_priority:
            return 0
        prio = msg.prop("priority") if msg.flags & PRIORITY_FLAG else 0
        return min(prio or 0, self.max_priority)

    def add(self, entry: Entry, level: int = 0) -> None:
        """Append `entry` to the tail of `level` (paged out when the window is full)."""
        lv = self.levels[level]
        if (self.pager is None and self.count < self.page_window and self.bytes < self.page_bytes) or (
            not self._page_out(level, lv, entry)
        ):
            lv.append(entry)
        self.count += 1
        self.bytes += len(entry.msg.body)

    def add_run(self, entries: list[Entry]) -> None:
        """`add` of each of `entries`, in order, to level 0; while the level pages, its pager takes
        them together."""
        pager = self.pager
        if pager is None or not pager.has_tail(0):
            for entry in entries:
                self.add(entry)
            return
        stored = [is_persistent(e.msg) for e in entries] if self.owner.store is not None else None
        self.count += len(entries)
        self.bytes += pager.take_run(0, entries, stored)

    def put_back(self, entry: Entry) -> None:
        """Return `entry` to the place its `seq` had in its priority level (a requeue). The head of
        a level is always in memory and paged messages are newer, so it goes into memory."""
        level = self.levels[self.level_of(entry.msg)]
        if not level or entry.seq < level[0].seq:
            level.appendleft(entry)
        else:
            level.insert(bisect.bisect_left(level, entry), entry)
        self.count += 1
        self.bytes += len(entry.msg.body)

    def place(self, entry: Entry, level: int, index: int) -> None:
        """Put `entry` at `index` of `level`, in memory (a restart rebuilding a known order)."""
        lv = self.levels[level]
        if index >= len(lv):
            lv.append(entry)
        else:
            lv.insert(index, entry)
        self.count += 1
        self.bytes += len(entry.msg.body)

    def restore(self, entry: Entry) -> None:
        """A stored message read back at boot, in seq order: to the tail of its priority level."""
        level = self.level_of(entry.msg)
        self.place(entry, level, len(self.levels[level]))

    # -- messages out --------------------------------------------------------------------------

    def pop(self) -> Entry | None:
        """Take the head message (the first level with any, in serving order)."""
        for level in self.serving:
            if level:
                entry = level.popleft()
                self.count -= 1
                self.bytes -= len(entry.msg.body)
                if self.pager is not None and len(level) < REFILL_BELOW:
                    self._refill(level)
                return entry
        return None

    def dispatch(
        self, pick: Callable[[], Consumer | None], deliver: Callable[[Consumer, Entry], None]
    ) -> None:
        """Hand the ready messages to the consumers `pick` chooses while one has credit; a message
        found expired as it is taken is dead-lettered instead. Not re-entered from a delivery."""
        if self.delivering or not self.count:
            return
        self.delivering = True
        try:
            if self.uses_ttl:
                self.drop_expired()
            clock = self.owner.clock
            while self.count:
                c = pick()
                if c is None:
                    return
                entry = self.pop()
                if entry is None:
                    return
                if entry.expires and entry.expires <= clock.now():
                    self.owner.dead_letter([entry], "expired")
                    continue
                deliver(c, entry)
        finally:
            self.delivering = False

    def remove(self, entry: Entry, level: int) -> None:
        """Take `entry` out of `level` (wherever it is in memory)."""
        self.levels[level].remove(entry)
        self.count -= 1
        self.bytes -= len(entry.msg.body)

    def forget(self, seq: int) -> bool:
        """Remove the ready message at `seq` (its store write failed); False when it is no longer
        ready. It is recent: in the pager when the window was full, else near the tail of its
        level, so each search runs from the tail and stops at the first older entry."""
        pager = self.pager
        if pager is not None and pager.forget(seq):  # the pager reports the counts (`_gone`)
            return True
        for level in self.levels:
            for index in range(len(level) - 1, -1, -1):
                s = level[index].seq
                if s < seq:
                    break
                if s == seq:
                    entry = level[index]
                    del level[index]
                    self.count -= 1
                    self.bytes -= len(entry.msg.body)
                    return True
        return False

    # -- length limits -------------------------------------------------------------------------

    def over(self, held: int = 0, held_bytes: int = 0) -> bool:
        """Whether the messages (plus `held` kept elsewhere that count too) exceed a limit."""
        n, b = self.count + held, self.bytes + held_bytes
        return (self.max_length is not None and n > self.max_length) or (
            self.max_length_bytes is not None and b > self.max_length_bytes
        )

    def within(self, share: float, held: int = 0, held_bytes: int = 0) -> bool:
        """Whether the messages (plus `held`) are at or below `share` of every limit."""
        n, b = self.count + held, self.bytes + held_bytes
        return (self.max_length is None or n <= int(self.max_length * share)) and (
            self.max_length_bytes is None or b <= int(self.max_length_bytes * share)
        )

    def full(self, size: int) -> bool:
        """Whether a message of `size` body bytes would not fit (a reject-publish refusal)."""
        if self.max_length is not None and self.count >= self.max_length:
            return True
        return self.max_length_bytes is not None and self.bytes + size > self.max_length_bytes

    def trim(self, held: int = 0, held_bytes: int = 0) -> None:
        """drop-head: dead-letter ("maxlen") head messages while over a limit."""
        dropped: list[Entry] = []
        while self.count and self.over(held, held_bytes):
            entry = self.pop()
            if entry is None:
                break
            dropped.append(entry)
        if dropped:
            self.owner.dead_letter(dropped, "maxlen")

    # -- purge ---------------------------------------------------------------------------------

    def purge(self) -> int:
        """Drop every ready message; a kept queue's store forgets them (those in memory and, while
        other stored positions of the queue stay, the paged ones by position). Returns how many."""
        n = self.count
        q = self.owner
        persistence = q.vhost.persistence
        if q.store is not None and n and persistence is not None:
            ready = [e for level in self.levels for e in level]
            paged = self.pager.stored_seqs() if self.pager is not None and q.purge_keeps_stored() else []
            if paged:
                persistence.queue_purged(q, ready, paged)
            else:
                persistence.queue_purged(q, ready)
        if self.pager is not None:
            self.pager.clear()
        for level in self.levels:
            level.clear()
        self.count = 0
        self.bytes = 0
        return n

    # -- paging --------------------------------------------------------------------------------

    def _page_out(self, i: int, level: deque[Entry], entry: Entry) -> bool:
        """Past the window: hand `entry` to the pager (made on first use) if its level has a tail or
        memory is full; False: it belongs in memory. A tail starts behind a non-empty deque only,
        so the head of every level is in memory."""
        pager = self.pager
        if pager is None:
            pager = self._start_paging()
            if pager is None:
                return False
        tail = pager.tails[i]  # `pager.has_tail(i)`, inlined: this runs for every message past the window
        if (
            tail.spool is None
            and tail.backlog is None
            and (
                not level
                or (
                    self.count - pager.count < self.page_window and self.bytes - pager.bytes < self.page_bytes
                )
            )
        ):
            return False
        pager.take(i, entry, self.owner.store is not None and is_persistent(entry.msg))
        return True

    def _start_paging(self) -> Pager | None:
        """The pager, on the first page-out; None (and no more asking) when the persistence
        cannot page."""
        persistence = self.owner.vhost.persistence
        new_spool = persistence.spool_factory() if persistence is not None else None
        if new_spool is None:
            self.page_window = self.page_bytes = NEVER
            return None
        return self._new_pager(new_spool)

    def _new_pager(self, new_spool: Callable[[], PageSpool]) -> Pager:
        from broker.entities.queues.classic.paging import Pager

        self.pager = Pager(len(self.levels), new_spool, self.expiry_at, self._gone)
        return self.pager

    def _refill(self, level: deque[Entry]) -> None:
        """Move the next batch of `level`'s paged messages into it (it runs short)."""
        pager = self.pager
        if pager is None or not pager.count:
            return
        level.extend(pager.read(self._index[id(level)]))
        if level and level[0].expires:
            self.arm_ttl()

    def _gone(self, n: int, size: int) -> None:
        """The pager lost `n` messages of `size` body bytes without handing them back (one whose
        store write failed; a restart backlog shorter than the store counted)."""
        self.count -= n
        self.bytes -= size

    def restore_backlog(self, backlog: Backlog, new_spool: Callable[[], PageSpool]) -> None:
        """A restarted queue's stored messages, not read yet: they are read as the head advances.
        Only for a list without priorities (the backlog is read into level 0)."""
        if not backlog.count:
            return
        pager = self._new_pager(new_spool)
        pager.add_backlog(backlog, self.owner.clock.now())
        self.count += backlog.count
        self.bytes += backlog.bytes
        self._refill(self.levels[0])
