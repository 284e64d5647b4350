"""Persistence is an object the vhost is given (broker.entities.persistence.Persistence): the
entities say what durable thing changed, and import no store, no event loop and no server."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from amqpwire.fields import FieldTable
from broker.entities.clock import ManualClock
from broker.entities.message import StoredMessage
from broker.entities.queues.catalog import Entry, Queue
from broker.entities.vhost import VHost
from exchanges.base import Binding, Destination
from tests.unit.entities_support import COMPAT, args, declare, message

ENTITIES = Path(__file__).resolve().parents[2] / "broker" / "entities"


class RecordingPersistence:
    """Keeps every durable queue (marks it with `store`) and records what it was told."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.next_seq = 100

    def exchange_declared(self, vhost: VHost, x: Any) -> None:
        self.calls.append(("exchange_declared", x.name))

    def exchange_deleted(self, vhost: VHost, x: Any) -> None:
        self.calls.append(("exchange_deleted", x.name))

    def binding_added(self, vhost: VHost, source: Any, binding: Binding) -> None:
        self.calls.append(("binding_added", source.name, binding.destination.name))

    def binding_removed(self, vhost: VHost, source: Any, binding: Binding) -> None:
        self.calls.append(("binding_removed", source.name, binding.destination.name))

    def queue_added(self, vhost: VHost, q: Queue) -> None:
        if q.durable:
            q.store = self  # type: ignore[assignment]
        self.calls.append(("queue_added", q.name, q.durable))

    def queue_deleted(self, vhost: VHost, q: Queue) -> None:
        self.calls.append(("queue_deleted", q.name))

    def messages_removed(self, q: Queue, entries: Sequence[Entry]) -> None:
        self.calls.append(("messages_removed", q.name, [e.msg.body for e in entries]))

    def queue_purged(self, q: Queue, ready: Sequence[Entry]) -> None:
        self.calls.append(("queue_purged", q.name, [e.msg.body for e in ready]))

    def publish(self, vhost: VHost, msg: StoredMessage, queues: Sequence[Queue]) -> tuple[None, list[int]]:
        seqs = []
        for _q in queues:
            self.next_seq += 1
            seqs.append(self.next_seq)
        self.calls.append(("publish", msg.body, [q.name for q in queues]))
        return None, seqs


def test_vhost_reports_durable_changes_to_its_persistence() -> None:
    p = RecordingPersistence()
    v = VHost("/", COMPAT, ManualClock(), persistence=p)
    x = v.declare_exchange(
        "durable-x", "fanout", durable=True, auto_delete=False, internal=False, arguments=FieldTable()
    )
    v.declare_exchange(
        "transient-x", "fanout", durable=False, auto_delete=False, internal=False, arguments=FieldTable()
    )
    kept = Queue(v, "kept", durable=True, exclusive_owner=None, auto_delete=False, arguments=args())
    v.add_queue(kept)
    loose = declare(v, "loose")
    b = Binding(Destination.queue("kept"), "", FieldTable())
    v.add_binding(x, b)
    v.remove_binding(x, b)
    assert p.calls == [
        ("exchange_declared", "durable-x"),
        ("queue_added", "kept", True),
        ("queue_added", "loose", False),
        ("binding_added", "durable-x", "kept"),
        ("binding_removed", "durable-x", "kept"),
    ]
    assert kept.store is p and loose.store is None
    p.calls.clear()
    for body in (b"1", b"2", b"3"):
        kept.enqueue(message(body))
        loose.enqueue(message(body))
    assert kept.purge() == 3 and loose.purge() == 3
    assert p.calls == [("queue_purged", "kept", [b"1", b"2", b"3"])]  # the transient queue writes nothing
    p.calls.clear()
    v.delete_queue(kept)
    v.delete_queue(loose)
    v.delete_exchange(x)
    assert p.calls == [("queue_deleted", "kept"), ("exchange_deleted", "durable-x")]


def test_expired_messages_leave_the_store_and_their_dead_letters_are_written_once() -> None:
    clock = ManualClock()
    p = RecordingPersistence()
    v = VHost("/", COMPAT, clock, persistence=p)
    src = Queue(
        v,
        "src",
        durable=True,
        exclusive_owner=None,
        auto_delete=False,
        arguments=args(x_message_ttl=10, x_dead_letter_exchange="amq.direct", x_dead_letter_routing_key="dl"),
    )
    v.add_queue(src)
    dl = Queue(v, "dl", durable=True, exclusive_owner=None, auto_delete=False, arguments=args())
    v.add_queue(dl)
    v.add_binding(v.exchanges["amq.direct"], Binding(Destination.queue("dl"), "dl", FieldTable()))
    p.calls.clear()
    src.enqueue(message(b"m"))
    clock.advance(1)
    assert p.calls == [("messages_removed", "src", [b"m"]), ("publish", b"m", ["dl"])]
    entry = dl.get(no_ack=True)
    assert entry is not None and entry.seq == 101  # the position the persistence reserved


def test_entity_modules_import_no_io_and_nothing_above_them() -> None:
    forbidden = (
        "asyncio",
        "socket",
        "broker.runtime.durability",
        "broker.server",
        "broker.store",
        "broker.session",
    )
    offenders = []
    for path in sorted(ENTITIES.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
                node.body = []
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [(path.name, n) for n in names if n.startswith(forbidden)]
    assert offenders == []
