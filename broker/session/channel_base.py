"""A channel's parts and the state its publish side reads.

A channel is composed of parts that each own their state, as RabbitMQ keeps a channel's limiter,
unacked messages and consumers apart: `Limiter` (prefetch credit), `UnackedTracker` (delivery
tags, deliveries awaiting an ack), `ConsumerRegistry` (consumers), `Declarations` (exchange and
queue methods, the queue declared last) and `WriteCache` (granted write permissions). The publish
side (`broker.session.publish`, `confirms`, `tx`) is mixed into the channel and keeps its own state
here (confirm mode and sequence, the transaction's pending work).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker.session.consume import ConsumerRegistry
from broker.session.declarations import REPLY_TO, REPLY_TO_PREFIX
from broker.session.declare import Declarations
from broker.session.limiter import Limiter
from broker.session.permissions import WriteCache
from broker.session.unacked import Unacked, UnackedTracker

if TYPE_CHECKING:
    from broker.session.ports import ChannelOwner

__all__ = ["REPLY_TO", "REPLY_TO_PREFIX", "ChannelBase"]


class ChannelBase:
    """One open channel's parts and shared state. `conn` is its output, user and vhost."""

    tx_unstored = False
    """A publish of the transaction being committed was not stored (see broker.session.confirms)."""

    def __init__(self, conn: ChannelOwner, number: int) -> None:
        self.conn = conn
        self.number = number
        self.vhost = conn.vhost_obj
        self.open = True
        self.closing = False  # sent channel.close, waiting for close-ok
        server = conn.broker
        self.ledger = server.ledger
        self.may_write = WriteCache(server.auth, conn.check_access)
        self.limiter = Limiter()
        self.consumers = ConsumerRegistry(self.limiter, server)
        self.tracker = UnackedTracker(self.limiter, self.ledger, self.consumers.queues)
        self.declarations = Declarations(self.vhost, conn, server.reply_channel_exists)
        # publisher confirms
        self.confirm = False
        self.publish_seq = 0
        self._ack_upto = 0  # acks not yet sent cover (last_sent, _ack_upto]
        self._ack_sent = 0
        # confirms waiting for store commits, in publish order: [seq, ack, committed]
        self._commit_wait: deque[list[Any]] = deque()
        # transactions: the work tx.commit runs, acks held until then
        self.tx: list[Callable[[], None]] | None = None
        self.tx_acks: list[tuple[int, Unacked]] = []
        # deliveries rejected/nacked inside the open transaction (still owed by this channel)
        self.tx_rejects: list[tuple[int, Unacked]] = []

    @property
    def unacked(self) -> dict[int, Unacked]:
        """Deliveries awaiting an ack, by delivery tag."""
        return self.tracker.unacked

    @property
    def reply_consumer(self) -> tuple[str, str] | None:
        """(tag, suffix) of the channel's direct reply-to consumer."""
        return self.consumers.reply_consumer

    def reply(self, payload: bytes) -> None:
        """Send one method (its payload encoded by broker.protocol.replies or methods)."""
        self.conn.send_method(self.number, payload)

    def flush_confirms(self, upto: int | None = None) -> None:
        """Send the publisher confirms due (implemented by the confirms part)."""
        raise NotImplementedError

    def teardown(self) -> None:
        """The channel closed (either side) or the connection went (implemented by `Channel`)."""
        raise NotImplementedError
