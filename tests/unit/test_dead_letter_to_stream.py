"""Dead-lettering into a stream a message it cannot keep (a decimal header): a publishing channel
would get 541, but a dead letter has no channel, so that copy is not delivered to the stream while
the other targets get it, and the queue's expiry timer callback returns normally (an exception
there is a traceback in the log and the other dead letters of the batch are lost)."""

from __future__ import annotations

from amqpwire.fields import Field, FieldTable
from broker.entities.clock import ManualClock
from broker.entities.message import StoredMessage
from broker.entities.queues.catalog import Queue
from broker.entities.queues.stream.queue import StreamQueue
from broker.protocol import properties as P
from exchanges.base import Binding, Destination
from tests.unit.entities_support import args, declare, vhost

DECIMAL = P.encode({"headers": FieldTable([("d", Field("decimal", (1, 15)))])})


def _setup(clock: ManualClock) -> tuple[Queue, StreamQueue, Queue]:
    v = vhost(clock)
    dlx = v.declare_exchange(
        "dlx", "fanout", durable=True, auto_delete=False, internal=False, arguments=FieldTable()
    )
    stream = Queue(
        v, "s", durable=True, exclusive_owner=None, auto_delete=False, arguments=args(x_queue_type="stream")
    )
    assert isinstance(stream, StreamQueue)
    v.add_queue(stream)
    dlq = declare(v, "dlq")
    for name in ("s", "dlq"):
        v.add_binding(dlx, Binding(Destination.queue(name), "", FieldTable()))
    src = declare(v, "src", x_dead_letter_exchange="dlx", x_message_ttl=10)
    return src, stream, dlq


def test_expired_decimal_header_message_skips_the_stream_only() -> None:
    clock = ManualClock()
    src, stream, dlq = _setup(clock)
    src.enqueue(StoredMessage("", "src", DECIMAL, b"decimal"))
    src.enqueue(StoredMessage("", "src", b"\x00\x00", b"plain"))
    clock.advance(1)  # the ttl timer dead-letters both
    assert src.message_count == 0
    assert dlq.message_count == 2
    assert stream.count == 1  # the plain one only


def test_rejected_decimal_header_dead_letter_returns_normally() -> None:
    src, stream, dlq = _setup(ManualClock())
    routed = src.vhost.dead_letter(src, [StoredMessage("", "src", DECIMAL, b"d")], "rejected")
    assert routed == 1 and dlq.message_count == 1 and stream.count == 0
