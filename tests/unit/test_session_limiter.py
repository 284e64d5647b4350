"""The channel's credit (rabbit_limiter's rules) with real consumers on a real queue, no I/O."""

from __future__ import annotations

from typing import Any

from amqpwire.fields import FieldTable
from broker.entities.queues.catalog import Consumer, Queue
from broker.entities.vhost import VHost
from broker.session.limiter import Limiter
from exchanges import Compat


class Holder:
    """The consumers' channel: the limiter never calls it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the limiter used the channel ({name})")


def consumers(n: int, prefetch: int, no_ack: bool = False) -> list[Consumer]:
    vhost = VHost("/", Compat.for_version("3.10.8"))
    q = Queue(vhost, "q", durable=False, exclusive_owner=None, auto_delete=False, arguments=FieldTable())
    return [Consumer(Holder(), f"c{i}", q, no_ack, False, prefetch, FieldTable()) for i in range(n)]


def test_per_consumer_prefetch() -> None:
    limiter = Limiter()
    limiter.qos(2, global_=False)
    (c,) = consumers(1, limiter.prefetch)
    assert limiter.allows(c)
    limiter.delivered(c)
    limiter.delivered(c)
    assert not limiter.allows(c) and (c.unacked, limiter.unacked) == (2, 2)
    limiter.settled(c)
    assert limiter.allows(c)


def test_channel_wide_limit_counts_every_consumer_and_get() -> None:
    limiter = Limiter()
    limiter.qos(3, global_=True)
    a, b = consumers(2, 0)
    limiter.delivered(a)
    limiter.delivered(b)
    limiter.delivered(None)  # basic.get without no-ack holds credit too
    assert not limiter.allows(a) and not limiter.allows(b) and limiter.channel_wide
    limiter.settled(None)
    assert limiter.allows(a)


def test_per_consumer_qos_lifts_the_channel_wide_limit() -> None:
    """RabbitMQ 3.10.8: global 3 then per-consumer 2 leaves only the per-consumer limit."""
    limiter = Limiter()
    limiter.qos(3, global_=True)
    limiter.qos(2, global_=False)
    assert (limiter.global_prefetch, limiter.prefetch, limiter.channel_wide) == (0, 2, False)


def test_no_ack_consumers_are_never_limited() -> None:
    limiter = Limiter()
    limiter.qos(1, global_=True)
    (c,) = consumers(1, 1, no_ack=True)
    limiter.delivered(None)
    assert limiter.allows(c)


def test_a_group_shares_its_prefetch() -> None:
    limiter = Limiter()
    a, b = consumers(2, 2)
    a.group = b.group = [a, b]
    limiter.delivered(a)
    assert limiter.allows(b)
    limiter.delivered(b)
    assert not limiter.allows(a) and not limiter.allows(b)
