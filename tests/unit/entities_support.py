"""Building blocks for the entities' unit tests: a vhost on a ManualClock and a channel that
records deliveries and grants credit by prefetch, as the session layer's channel does."""

from __future__ import annotations

from amqpwire.fields import Field, FieldTable
from broker.entities.clock import ManualClock
from broker.entities.message import StoredMessage
from broker.entities.queues.catalog import Consumer, Entry, Queue
from broker.entities.queues.quorum.queue import QuorumQueue
from broker.entities.vhost import VHost
from broker.protocol import properties as P
from exchanges.compat import Compat

COMPAT = Compat.for_version("3.10.8")


class RecordingChannel:
    """Delivers into `delivered` (tag, body) and refuses once a consumer holds `prefetch` unacked."""

    def __init__(self) -> None:
        self.delivered: list[tuple[str, bytes]] = []
        self.entries: list[tuple[Consumer, Queue, Entry]] = []
        self.cancelled: list[str] = []

    def can_deliver(self, consumer: Consumer) -> bool:
        return consumer.no_ack or not consumer.prefetch or consumer.unacked < consumer.prefetch

    def deliver(self, consumer: Consumer, queue: Queue, entry: Entry) -> None:
        if not consumer.no_ack:
            consumer.unacked += 1
        self.delivered.append((consumer.tag, entry.msg.body))
        self.entries.append((consumer, queue, entry))

    def consumer_cancelled_by_server(self, consumer: Consumer) -> None:
        self.cancelled.append(consumer.tag)

    def ack_all(self) -> None:
        """Settle everything delivered so far (as basic.ack multiple would)."""
        for consumer, queue, _entry in self.entries:
            if not consumer.no_ack:
                consumer.unacked -= 1
                queue.settled()
        self.entries.clear()


def vhost(clock: ManualClock | None = None) -> VHost:
    return VHost("/", COMPAT, clock if clock is not None else ManualClock())


def args(**values: object) -> FieldTable:
    """x-arguments from keyword names: x_message_ttl=0 -> ("x-message-ttl", long 0)."""
    out: list[tuple[str, Field]] = []
    for key, value in values.items():
        name = key.replace("_", "-")
        if isinstance(value, bool):
            out.append((name, Field("bool", value)))
        elif isinstance(value, int):
            out.append((name, Field("long", value)))
        else:
            out.append((name, Field("longstr", str(value).encode())))
    return FieldTable(out)


def declare(v: VHost, name: str = "q", **arguments: object) -> Queue:
    q = Queue(v, name, durable=False, exclusive_owner=None, auto_delete=False, arguments=args(**arguments))
    v.add_queue(q)
    return q


def quorum(v: VHost, name: str = "q", **arguments: object) -> QuorumQueue:
    """A durable quorum queue in `v` with `arguments` (written as in `args`)."""
    q = Queue(
        v,
        name,
        durable=True,
        exclusive_owner=None,
        auto_delete=False,
        arguments=args(x_queue_type="quorum", **arguments),
    )
    assert isinstance(q, QuorumQueue)
    v.add_queue(q)
    return q


def drain_bodies(q: Queue) -> list[bytes]:
    """The bodies of the queue's ready messages, in delivery order, taken with no-ack."""
    out = []
    while (e := q.get(no_ack=True)) is not None:
        out.append(e.msg.body)
    return out


def message(body: bytes, *, expiration: str | None = None, priority: int | None = None) -> StoredMessage:
    props: dict[str, object] = {}
    if expiration is not None:
        props["expiration"] = expiration
    if priority is not None:
        props["priority"] = priority
    raw = P.encode(props)
    msg = StoredMessage("", "q", raw, body)
    if msg.flags:
        msg.compute_routing_keys()
    return msg


def consumer(
    ch: RecordingChannel,
    q: Queue,
    tag: str,
    *,
    prefetch: int = 0,
    no_ack: bool = False,
    priority: int = 0,
    name: str | None = None,
) -> Consumer:
    cargs = FieldTable([("x-consumer-name", Field("longstr", name.encode()))]) if name else FieldTable()
    return Consumer(ch, tag, q, no_ack, False, prefetch, cargs, priority)
