"""A quorum queue's dead-letter store (at-least-once) and placement as the store sees them, driven
without sockets: held dead letters keep their positions with reason and order, come back held in
that order after a restart and are forwarded by the worker that starts then; a forwarded one is
forgotten only after its copy was written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from amqpwire.fields import FieldTable
from broker.entities.clock import ManualClock
from broker.entities.message import StoredMessage
from broker.entities.queues.catalog import Entry, Queue
from broker.entities.queues.quorum.queue import QuorumEntry, QuorumQueue
from broker.entities.vhost import VHost
from exchanges.base import Binding, Destination
from tests.unit.entities_support import args, declare, message, vhost

AT_LEAST_ONCE = {
    "x_dead_letter_exchange": "dlx",
    "x_dead_letter_strategy": "at-least-once",
    "x_overflow": "reject-publish",
}


class KeptPositions:
    """The store's side as broker.runtime.durability keeps it: each queue's positions (message, held
    reason and order), and every write in the order the entities made it."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, int], list[Any]] = {}
        self.log: list[tuple[Any, ...]] = []

    def exchange_declared(self, vhost: VHost, x: object) -> None:
        pass

    def binding_added(self, vhost: VHost, source: object, binding: Binding) -> None:
        pass

    def queue_added(self, vhost: VHost, q: Queue) -> None:
        q.store = self  # type: ignore[assignment]

    def publish(self, vhost: VHost, msg: StoredMessage, queues: Sequence[Queue]) -> tuple[None, list[int]]:
        seqs = []
        for q in queues:
            q.seq += 1
            seqs.append(q.seq)
            self.rows[(q.name, q.seq)] = [msg, None]
        self.log.append(("publish", msg.body, [q.name for q in queues]))
        return None, seqs

    def messages_removed(self, q: Queue, entries: Sequence[Entry]) -> None:
        self.positions_removed(q, [e.seq for e in entries])

    def positions_removed(self, q: Queue, seqs: Sequence[int]) -> None:
        for seq in seqs:
            self.rows.pop((q.name, seq), None)
        self.log.append(("removed", q.name, list(seqs)))

    def dead_letters_held(self, q: Queue, held: Sequence[tuple[int, str, int]]) -> None:
        for seq, reason, order in held:
            self.rows[(q.name, seq)][1] = (reason, order)
        self.log.append(("held", q.name, [seq for seq, _r, _o in held]))

    def delivery_state(self, q: Queue, states: Sequence[tuple[int, bool, int, int]]) -> None:
        pass

    def restart(self, clock: ManualClock, *, bound: bool) -> tuple[QuorumQueue, Queue]:
        """A new vhost rebuilt from the rows (broker.runtime.durability.rebuild's order), the dead-letter
        exchange bound to `dlq` or not; the clock is not advanced (the after-boot step is due)."""
        v = vhost(clock)
        v.persistence = self  # type: ignore[assignment]
        dlx = v.declare_exchange("dlx", "direct", durable=True, auto_delete=False, internal=False,
                                 arguments=FieldTable())  # fmt: skip
        q = quorum(v)
        dlq = declare(v, "dlq")
        if bound:
            v.add_binding(dlx, Binding(Destination.queue("dlq"), "q", FieldTable()))
        rows = sorted((seq, row) for (name, seq), row in self.rows.items() if name == "q")
        q.restore_state({})
        q.restore_dead_letters({seq: row[1] for seq, row in rows if row[1] is not None})
        for seq, row in rows:
            q.restore(seq, row[0], False)
        self.log.clear()
        return q, dlq


def quorum(v: VHost) -> QuorumQueue:
    q = Queue(v, "q", durable=True, exclusive_owner=None, auto_delete=False,
              arguments=args(x_queue_type="quorum", **AT_LEAST_ONCE))  # fmt: skip
    assert isinstance(q, QuorumQueue)
    v.add_queue(q)
    return q


def held_rejects(clock: ManualClock, kept: KeptPositions, order: Sequence[bytes]) -> QuorumQueue:
    """Three messages published, fetched, and rejected in `order` while the DLX routes nowhere."""
    v = vhost(clock)
    v.persistence = kept  # type: ignore[assignment]
    v.declare_exchange(
        "dlx", "direct", durable=True, auto_delete=False, internal=False, arguments=FieldTable()
    )
    q = quorum(v)
    for body in (b"m0", b"m1", b"m2"):
        _done, seqs = kept.publish(v, message(body), [q])
        q.enqueue(message(body), seqs[0])
    fetched: dict[bytes, Entry] = {}
    for _ in range(3):
        e = q.get(False)
        assert isinstance(e, QuorumEntry)
        fetched[e.orig.body] = e
    for body in order:
        q.settled()
        q.dead_letter([fetched[body]], "rejected")
    return q


def test_held_dead_letters_keep_their_positions_with_reason_and_order() -> None:
    kept = KeptPositions()
    q = held_rejects(ManualClock(), kept, [b"m2", b"m0", b"m1"])
    assert q.info().details["messages_dlx"] == 3
    assert {seq: row[1] for (_n, seq), row in kept.rows.items()} == {
        3: ("rejected", 1),
        1: ("rejected", 2),
        2: ("rejected", 3),
    }
    assert ("removed", "q", [1]) not in kept.log  # a held message's position stays
    assert q.purge_keeps_stored()  # a purge must not take the held positions along


def test_a_restart_holds_them_again_in_order_and_the_starting_worker_forwards_them() -> None:
    """Restored in position order, held in dead-letter order; they count toward the queue's limits
    before the worker starts; it forwards each (x-death rejected) and only then forgets it."""
    clock = ManualClock()
    kept = KeptPositions()
    held_rejects(clock, kept, [b"m2", b"m0", b"m1"])
    q, dlq = kept.restart(clock, bound=True)
    assert (q.count, q.info().details["messages_dlx"], q.info().details["message_bytes_dlx"]) == (0, 3, 6)
    assert q.seq == 3  # new publishes take positions after the held ones
    clock.advance(0)  # the after-boot step: the worker starts
    bodies = []
    while (e := dlq.get(True)) is not None:
        headers = e.msg.headers()
        assert headers is not None
        death = dict(dict(headers)["x-death"].value[0].value)
        assert (death["reason"].value, death["count"].value, death["queue"].value) == (b"rejected", 1, b"q")
        bodies.append(e.msg.body)
    assert bodies == [b"m2", b"m0", b"m1"]
    assert kept.log == [
        ("publish", b"m2", ["dlq"]),
        ("publish", b"m0", ["dlq"]),
        ("publish", b"m1", ["dlq"]),
        ("removed", "q", [3, 1, 2]),
    ]
    assert not [key for key in kept.rows if key[0] == "q"]
    assert q.info().details["messages_dlx"] == 0 and not q.purge_keeps_stored()


def test_without_a_route_the_restart_keeps_them_held_until_the_retry_finds_one() -> None:
    clock = ManualClock()
    kept = KeptPositions()
    held_rejects(clock, kept, [b"m0", b"m1", b"m2"])
    q, dlq = kept.restart(clock, bound=False)
    clock.advance(0)
    assert q.info().details["messages_dlx"] == 3 and kept.log == []
    v = q.vhost
    v.add_binding(v.exchanges["dlx"], Binding(Destination.queue("dlq"), "q", FieldTable()))
    clock.advance(v.dead_letter_retry_seconds - 1)
    assert dlq.count == 0  # a new route does not hurry the worker
    clock.advance(1)
    assert dlq.count == 3 and q.info().details["messages_dlx"] == 0
    assert kept.log[-1] == ("removed", "q", [1, 2, 3])
