"""Paging a queue's ready messages out of memory, and reading them back near the head.

A ready list (broker.entities.queues.ready) keeps the messages nearest its head in memory (its
`levels`, one deque per priority) and, once that window is full, the rest in a `Pager`: per level
a tail of compact index rows (seq, body size, expiry, flags: about 44 bytes a message in `array`s)
whose bodies sit in a `PageSpool`, an append-only file the persistence hands out, as RabbitMQ's
classic queues page to disk. Messages join a tail in runs: the newest few (`STAGE` messages or
`STAGE_BYTES` body bytes at most) wait in the tail's `staged` list and are packed and written
together, since the usual ingest pages out every message past the window one by one. A tail may
also start with a `Backlog`: the messages a restarted broker has in its store but has not read yet,
so a queue of any depth is back at once and is read as its head advances.

Order is kept by one rule: while a level has a tail, new messages join the tail, never the deque,
and the tail refills the deque from its front. Every seq in a tail is therefore above every seq in
its deque, and a requeued message (delivered from the deque) goes back into the deque. A level's
deque is refilled whenever it falls below `ready.REFILL_BELOW`, so it is empty only when its tail is.
Reads are synchronous: a refill happens inside the pop that needs it. The pager keeps its own
state only: the ready list decides what pages out, and it is told (`gone`) when messages leave the
pager without being read back.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Protocol

from broker.entities.message import StoredMessage, pack_messages, unpack_message
from broker.entities.queues.base import Entry, PageSpool

#: A level's deque is refilled (below `REFILL_BELOW`) with up to this many messages, or this many
#: body bytes (at least one message).
BATCH = 1024
BATCH_BYTES = 4 << 20
#: Messages paged out are packed and written together once a tail has staged this many of them, or
#: this many body bytes (and before anything reads, drops or looks for a paged message).
STAGE = 256
STAGE_BYTES = 1 << 20
_REDELIVERED = 1
_STORED = 2  # the message is also in the durable store (persistent, kept queue)


class Backlog(Protocol):
    """A queue's stored messages not read yet (after a restart), read front to back."""

    count: int
    bytes: int

    def read(self, limit: int) -> list[tuple[int, StoredMessage, bool]]:
        """The next up to `limit` messages as (seq, message, redelivered), in seq order."""
        ...

    def remaining_seqs(self) -> list[int]:
        """The positions of the messages not read yet."""
        ...


class Tail:
    """One level's paged messages: an optional backlog first, then spooled index rows, then the
    staged messages not written yet (while there are any, `spool` is set)."""

    __slots__ = (
        "backlog",
        "bytes",
        "ends",
        "expires",
        "flags",
        "head",
        "offs",
        "seqs",
        "sizes",
        "spool",
        "staged",
        "staged_bytes",
        "staged_stored",
    )

    def __init__(self) -> None:
        self.backlog: Backlog | None = None
        self.spool: PageSpool | None = None
        # unsigned rows ("Q", "I"): appending to them converts the int directly, where the signed
        # and the one-octet types go through the argument parser; none of these is ever negative
        self.seqs = array("Q")
        self.sizes = array("Q")
        self.expires = array("d")
        self.flags = array("I")
        self.offs = array("Q")
        self.ends = array("Q")
        self.head = 0  # rows before it were read back
        self.bytes = 0  # body bytes of the spooled and staged rows not read back
        self.staged: list[Entry] = []
        self.staged_stored: list[bool] = []
        self.staged_bytes = 0

    def __len__(self) -> int:
        """Messages in the tail: it has some exactly while it has a backlog or a spool (an
        exhausted backlog and a spool read to its end are dropped at once)."""
        n = len(self.seqs) - self.head + len(self.staged)
        return n + self.backlog.count if self.backlog is not None else n

    def compact(self) -> None:
        """Forget the rows read back once they are most of the arrays."""
        h = self.head
        if h and h * 2 >= len(self.seqs):
            for arr in (self.seqs, self.sizes, self.expires, self.flags, self.offs, self.ends):
                del arr[:h]
            self.head = 0


class Pager:
    """The paged part of one ready list (see the module docstring): one tail per level. `count`
    and `bytes` are the paged messages' share of the list's counts. `expiry_at(msg, now)` is when a
    message read from a backlog expires; `gone(n, size)` reports messages that leave the pager
    without being read back."""

    def __init__(
        self,
        levels: int,
        new_spool: Callable[[], PageSpool],
        expiry_at: Callable[[StoredMessage, float], float],
        gone: Callable[[int, int], None],
    ) -> None:
        self.new_spool = new_spool
        self.expiry_at = expiry_at
        self.gone = gone
        self.tails = [Tail() for _ in range(levels)]
        self.count = 0
        self.bytes = 0
        self.restored_at = 0.0

    # -- paging out ----------------------------------------------------------------------------

    def has_tail(self, level: int) -> bool:
        """Whether `level` has paged messages: then every newer message of it pages out too."""
        tail = self.tails[level]
        return tail.spool is not None or tail.backlog is not None

    def take(self, level: int, entry: Entry, stored: bool) -> None:
        """Page `entry` out at the end of `level`'s tail (`stored`: the durable store holds it)."""
        self.take_run(level, [entry], [stored])

    def take_run(self, level: int, entries: list[Entry], stored: list[bool] | None) -> int:
        """Page `entries` out, in order, at the end of `level`'s tail (`stored`: whether the durable
        store holds each; None: none): staged, and written with the ones staged before them once
        there are enough. Their body bytes."""
        tail = self.tails[level]
        if tail.spool is None:
            tail.spool = self.new_spool()
        size = 0
        for entry in entries:
            size += len(entry.msg.body)
        tail.staged += entries
        tail.staged_stored += stored if stored is not None else [False] * len(entries)
        tail.bytes += size
        self.count += len(entries)
        self.bytes += size
        tail.staged_bytes += size
        if len(tail.staged) >= STAGE or tail.staged_bytes >= STAGE_BYTES:
            self._write(tail)
        return size

    @staticmethod
    def _write(tail: Tail) -> None:
        """Pack `tail`'s staged messages into its spool and index rows."""
        staged = tail.staged
        if not staged:
            return
        spool = tail.spool
        assert spool is not None
        msgs = [e.msg for e in staged]
        blob, ends = pack_messages(msgs)
        off = spool.append(blob)
        tail.seqs.extend([e.seq for e in staged])
        tail.sizes.extend([len(m.body) for m in msgs])
        tail.expires.extend([e.expires for e in staged])
        tail.flags.extend(
            [
                (_REDELIVERED if e.redelivered else 0) | (_STORED if stored else 0)
                for e, stored in zip(staged, tail.staged_stored, strict=True)
            ]
        )
        tail.offs.append(off)
        tail.offs.extend([off + end for end in ends[:-1]])
        tail.ends.extend([off + end for end in ends])
        staged.clear()
        tail.staged_stored.clear()
        tail.staged_bytes = 0

    def add_backlog(self, backlog: Backlog, now: float) -> None:
        """A restarted queue's unread stored messages: they come before anything paged later (in
        level 0); their TTLs run from `now`, the restart."""
        self.tails[0].backlog = backlog
        self.restored_at = now
        self.count += backlog.count
        self.bytes += backlog.bytes

    # -- reading back --------------------------------------------------------------------------

    def read(self, level: int) -> list[Entry]:
        """The next batch of `level`'s tail, in order (the ready list runs short)."""
        tail = self.tails[level]
        if tail.backlog is not None:
            return self._from_backlog(tail)
        if tail.spool is not None:
            return self._from_spool(tail)
        return []

    def _from_backlog(self, tail: Tail) -> list[Entry]:
        backlog = tail.backlog
        assert backlog is not None
        per = max(1, backlog.bytes // max(1, backlog.count))
        rows = backlog.read(max(1, min(BATCH, BATCH_BYTES // per)))
        now = self.restored_at  # TTLs of restored messages run from the restart, read now or later
        out: list[Entry] = []
        size = 0
        for seq, msg, redelivered in rows:
            entry = Entry(seq, msg, self.expiry_at(msg, now))
            entry.redelivered = redelivered
            out.append(entry)
            size += len(msg.body)
        # the backlog's own counters went down as it read; a store that held fewer rows than it
        # counted at start leaves the queue's counts where the rows are
        left = backlog.count if not rows else 0
        left_bytes = backlog.bytes if not rows else 0
        self.count -= len(out) + left
        self.bytes -= size + left_bytes
        if left or left_bytes:
            self.gone(left, left_bytes)
        if not rows or not backlog.count:
            tail.backlog = None
        return out

    def _from_spool(self, tail: Tail) -> list[Entry]:
        spool = tail.spool
        assert spool is not None
        self._write(tail)
        h = tail.head
        stop = len(tail.seqs)
        end = h
        budget = 0
        while end < stop and end - h < BATCH and (budget < BATCH_BYTES or end == h):
            budget += tail.sizes[end]
            end += 1
        start = tail.offs[h]
        raw = spool.read(start, tail.ends[end - 1])
        view = memoryview(raw)
        seqs, expires, flags, offs, ends = tail.seqs, tail.expires, tail.flags, tail.offs, tail.ends
        out: list[Entry] = []
        for i in range(h, end):
            msg = unpack_message(view[offs[i] - start : ends[i] - start])
            entry = Entry(seqs[i], msg, expires[i])
            if flags[i] & _REDELIVERED:
                entry.redelivered = True
            out.append(entry)
        tail.head = end
        tail.bytes -= budget
        self.count -= end - h
        self.bytes -= budget
        if end == stop:
            # the spool is read to its end: start the next page-out on a fresh one
            spool.close()
            tail.spool = None
            for arr in (tail.seqs, tail.sizes, tail.expires, tail.flags, tail.offs, tail.ends):
                del arr[:]
            tail.head = 0
        else:
            spool.release(tail.offs[end])
            tail.compact()
        return out

    # -- dropping ------------------------------------------------------------------------------

    def stored_seqs(self) -> list[int]:
        """The positions of paged messages the durable store holds (for a purge)."""
        out: list[int] = []
        for tail in self.tails:
            self._write(tail)
            if tail.backlog is not None:
                out.extend(tail.backlog.remaining_seqs())
            flags, seqs = tail.flags, tail.seqs
            out.extend(seqs[i] for i in range(tail.head, len(seqs)) if flags[i] & _STORED)
        return out

    def forget(self, seq: int) -> bool:
        """Drop the paged message at `seq` (its store write failed, so it must not stay queued);
        False when no tail holds it. Such a message is recent: each search runs from the end."""
        for tail in self.tails:
            self._write(tail)
            seqs = tail.seqs
            for i in range(len(seqs) - 1, tail.head - 1, -1):
                if seqs[i] < seq:
                    break
                if seqs[i] != seq:
                    continue
                size = tail.sizes[i]
                for arr in (seqs, tail.sizes, tail.expires, tail.flags, tail.offs, tail.ends):
                    del arr[i]
                tail.bytes -= size
                self.count -= 1
                self.bytes -= size
                self.gone(1, size)
                if len(seqs) == tail.head and tail.spool is not None:
                    # an empty tail has no spool (see `Tail.__len__`)
                    tail.spool.close()
                    tail.spool = None
                    for arr in (seqs, tail.sizes, tail.expires, tail.flags, tail.offs, tail.ends):
                        del arr[:]
                    tail.head = 0
                return True
        return False

    def clear(self) -> None:
        """Drop every paged message and its spool (purge, delete)."""
        for tail in self.tails:
            if tail.spool is not None:
                tail.spool.close()
        self.tails = [Tail() for _ in self.tails]
        self.count = 0
        self.bytes = 0


class BacklogTarget(Protocol):
    """A queue that can take its stored messages as a backlog (a classic queue without priorities)."""

    def restore_backlog(
        self, backlog: Backlog, last_seq: int, new_spool: Callable[[], PageSpool]
    ) -> None: ...


def restore_backlog(
    q: BacklogTarget, backlog: Backlog, last_seq: int, new_spool: Callable[[], PageSpool]
) -> None:
    """Put back a queue's stored messages at boot without reading them: they are read as the head
    advances (`q.restore_backlog`)."""
    q.restore_backlog(backlog, last_seq, new_spool)
