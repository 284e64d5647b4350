"""When a connection writes deliveries: at once (the next loop turn) for a consumer that waits with
little in hand, after DELIVERY_HOLD for one that already holds more than PATIENT_BACKLOG
unacknowledged deliveries, so that a stream of them reaches the client in a few writes. Driven
with bytes on an in-memory transport and a manual clock."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from pamqp import commands

from broker.server import Broker
from broker.session import link
from broker.session.connection import Connection
from tests.sansio_support import MemoryTransport, m, open_stream, parse_frames, publish

BASIC_DELIVER = (60 << 16) | 60
QUEUE_DECLARE_OK = (50 << 16) | 11


class ManualTimer:
    def __init__(self, when: float, callback: Callable[..., object], args: tuple[Any, ...]) -> None:
        self.when, self.callback, self.args = when, callback, args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualLoop:
    """The connection's Scheduler with a clock that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 0.0
        self.soon: list[tuple[Callable[..., object], tuple[Any, ...]]] = []
        self.timers: list[ManualTimer] = []

    def call_soon(self, callback: Callable[..., object], *args: Any) -> object:
        self.soon.append((callback, args))
        return None

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> ManualTimer:
        timer = ManualTimer(self.now + delay, callback, args)
        self.timers.append(timer)
        return timer

    def turn(self) -> None:
        """One loop iteration: the callbacks made ready so far."""
        ready, self.soon = self.soon, []
        for callback, args in ready:
            callback(*args)

    def advance(self, seconds: float) -> None:
        self.now += seconds
        due = [t for t in self.timers if t.when <= self.now and not t.cancelled]
        self.timers = [t for t in self.timers if t not in due]
        for timer in due:
            timer.callback(*timer.args)
        self.turn()

    def pending(self) -> list[ManualTimer]:
        return [t for t in self.timers if not t.cancelled]


def methods(data: bytes) -> list[int]:
    return [int.from_bytes(p[:4], "big") for kind, _ch, p in parse_frames(data) if kind == 1]


class Consuming:
    """A broker, a consumer's connection on a manual loop, and a second connection that publishes
    (a connection writes its own output at the end of each read, so the publisher is another one)."""

    def __init__(self, broker: Broker, conn: Connection, publisher: Connection) -> None:
        self.broker, self.conn, self.publisher = broker, conn, publisher
        self.transport: MemoryTransport = conn.transport  # type: ignore[assignment]
        self.loop: ManualLoop = conn.loop  # type: ignore[assignment]

    def publish(self, count: int, body: bytes = b"") -> None:
        """`count` publishes in one read of the publisher's socket, then one loop turn."""
        self.publisher.data_received(
            b"".join(publish(1, body or b"m%d" % i, routing_key="q.hold") for i in range(count))
        )
        self.loop.turn()

    def consumer_sends(self, data: bytes) -> None:
        self.conn.data_received(data)
        self.loop.turn()

    def written(self) -> list[int]:
        """The methods written to the consumer so far (then forgotten)."""
        out = methods(b"".join(self.transport.out))
        self.transport.out.clear()
        return out


@contextlib.asynccontextmanager
async def consuming(no_ack: bool = False) -> AsyncIterator[Consuming]:
    """A consumer of q.hold (`no_ack` or with acks) and a publisher to it, on a new broker."""
    broker = Broker(port=0, data_dir=":memory:", log_level="CRITICAL")
    await broker.start()
    try:
        conns = []
        for _ in range(2):
            conn = Connection(broker, MemoryTransport(), ManualLoop())  # type: ignore[arg-type]
            broker.connection_made(conn)
            conn.data_received(open_stream(1) + m(1, commands.Queue.Declare(queue="q.hold")))
            conns.append(conn)
        c = Consuming(broker, conns[0], conns[1])
        c.consumer_sends(m(1, commands.Basic.Consume(queue="q.hold", consumer_tag="c", no_ack=no_ack)))
        c.written()
        yield c
    finally:
        await broker.stop()


async def test_a_consumer_with_little_in_hand_gets_each_delivery_on_the_next_turn() -> None:
    async with consuming() as c:
        for _ in range(link.PATIENT_BACKLOG):  # one publish per read, the backlog growing to the limit
            c.publish(1)
            assert c.written() == [BASIC_DELIVER]
        assert not c.loop.pending()


async def test_a_consumer_with_a_backlog_gets_its_deliveries_together_after_the_hold() -> None:
    async with consuming() as c:
        c.publish(link.PATIENT_BACKLOG + 1)
        assert c.written().count(BASIC_DELIVER) == link.PATIENT_BACKLOG + 1
        for _ in range(5):  # five more publisher reads while the consumer has work in hand
            c.publish(1)
        assert c.transport.out == []
        c.loop.advance(link.DELIVERY_HOLD / 2)
        assert c.transport.out == []
        c.loop.advance(link.DELIVERY_HOLD / 2)
        assert len(c.transport.out) == 1  # the five in one write
        assert c.written() == [BASIC_DELIVER] * 5
        assert not c.loop.pending()


async def test_any_other_output_takes_held_deliveries_along_in_order() -> None:
    async with consuming() as c:
        c.publish(link.PATIENT_BACKLOG + 1)
        c.written()
        c.publish(2)
        assert c.transport.out == []
        c.consumer_sends(m(1, commands.Queue.Declare(queue="q.other")))
        assert c.written() == [BASIC_DELIVER, BASIC_DELIVER, QUEUE_DECLARE_OK]
        assert not c.loop.pending()  # the hold's timer is cancelled with the flush


async def test_held_output_is_written_at_once_past_its_size_limit() -> None:
    async with consuming() as c:
        c.publish(link.PATIENT_BACKLOG + 1)
        c.written()
        many = link._HOLD_PIECES // 8  # 8 pieces per small delivery
        for _ in range(many - 1):
            c.publish(1)
        assert c.written() == []
        c.publish(1)
        assert c.written() == [BASIC_DELIVER] * many
        c.publish(1)
        assert c.written() == []


async def test_acks_that_shrink_the_backlog_end_the_hold() -> None:
    async with consuming() as c:
        c.publish(link.PATIENT_BACKLOG + 10)
        c.written()
        c.consumer_sends(m(1, commands.Basic.Ack(delivery_tag=link.PATIENT_BACKLOG + 10, multiple=True)))
        c.publish(1)
        assert c.written() == [BASIC_DELIVER]
        assert not c.loop.pending()


async def test_no_ack_consumers_and_big_bodies_are_never_held() -> None:
    async with consuming(no_ack=True) as c:
        c.publish(link.PATIENT_BACKLOG * 2)
        c.written()
        c.publish(1)
        assert c.written() == [BASIC_DELIVER]
    async with consuming() as c:
        c.publish(link.PATIENT_BACKLOG + 1)
        c.written()
        c.publish(1, b"x" * (link.PATIENT_BODY + 1))
        assert c.written() == [BASIC_DELIVER]
        c.publish(1, b"x" * link.PATIENT_BODY)
        assert c.written() == []


async def test_closing_cancels_the_hold() -> None:
    async with consuming() as c:
        c.publish(link.PATIENT_BACKLOG + 1)
        c.publish(1)
        assert c.loop.pending()
        c.conn.connection_lost()
        assert not c.loop.pending()
