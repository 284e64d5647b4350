"""The state every part of a channel shares, and the output helper they all use.

The parts are stacked in one line, each module's class extending the one below it, so a part may
call the parts under it: delivery < confirms < publish < acks < tx < declare < consume < `Channel`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker.session.limiter import Limiter
from broker.session.permissions import WriteCache

if TYPE_CHECKING:
    from broker.entities.queues.catalog import Consumer, Entry, Queue
    from broker.session.connection import Connection

REPLY_TO = "amq.rabbitmq.reply-to"
REPLY_TO_PREFIX = "amq.rabbitmq.reply-to."


class Unacked:
    """One delivery awaiting an ack: where it came from and who holds its credit."""

    __slots__ = ("consumer", "entry", "queue")

    def __init__(self, queue: Queue, entry: Entry, consumer: Consumer | None) -> None:
        self.queue = queue
        self.entry = entry
        self.consumer = consumer


class ChannelBase:
    """State of one open channel. `conn` provides output, identity and the vhost."""

    def __init__(self, conn: Connection, number: int) -> None:
        self.conn = conn
        self.number = number
        self.vhost = conn.vhost_obj
        self.open = True
        self.closing = False  # sent channel.close, waiting for close-ok
        self.may_write = WriteCache(conn.broker.auth, conn.check_access)
        self.limiter = Limiter()
        # consumers and acks
        self.consumers: dict[str, Consumer] = {}
        self.reply_consumer: tuple[str, str] | None = None  # (ctag, suffix)
        self.next_tag = 1
        self.unacked: dict[int, Unacked] = {}
        self.unacked_order: deque[int] = deque()
        self.last_queue = ""
        # confirms / tx
        self.confirm = False
        self.publish_seq = 0
        self._ack_upto = 0  # acks not yet sent cover (last_sent, _ack_upto]
        self._ack_sent = 0
        # confirms waiting for store commits, in publish order: [seq, ack, committed]
        self._commit_wait: deque[list[Any]] = deque()
        self.tx: list[Callable[[], None]] | None = None
        self.tx_acks: list[tuple[int, Unacked]] = []
        # deliveries rejected/nacked inside the open transaction (still owed by this channel)
        self.tx_rejects: list[tuple[int, Unacked]] = []

    def reply(self, payload: bytes) -> None:
        self.conn.send_method(self.number, payload)

    def flush_confirms(self, upto: int | None = None) -> None:
        """Send the publisher confirms due (implemented by the confirms part)."""
        raise NotImplementedError

    def teardown(self) -> None:
        """The channel closed (either side) or the connection went (implemented by `Channel`)."""
        raise NotImplementedError


def members(consumer: Consumer) -> list[Consumer]:
    """The queue-level consumers behind one channel consumer (several for a pseudo-queue consumer)."""
    return list(consumer.group) if consumer.group is not None else [consumer]
