"""`x-random` (rabbitmq_random_exchange 3.10.8): each message goes to one binding picked at random.

The plugin lists every binding of the exchange (`rabbit_router:match_routing_key(X, ['_'])`, one
entry per binding, routing and binding keys ignored) and picks one uniformly with `rand:uniform`,
so a destination bound with three keys gets three times the share of one bound once. With fewer
than two bindings the list is returned as it is. Declare arguments and bindings are never refused.

Erlang's per-process random state cannot be reproduced across brokers, so only the distribution is
RabbitMQ's; `seed` makes one exchange's picks repeatable for tests.
"""

from __future__ import annotations

import random
from typing import Any

from exchanges.base import Destination, Message
from exchanges.registry import register
from exchanges.types.fanout import FanoutExchange


@register
class RandomExchange(FanoutExchange):
    """Fanout's binding bookkeeping (its cached list, rebuilt after a bind or unbind), listing each
    binding's destination instead of each distinct destination, of which one is picked."""

    type_name = "x-random"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._rng = random.Random()

    def seed(self, value: int) -> None:
        """Make the picks repeatable (tests)."""
        self._rng.seed(value)

    def route(self, message: Message) -> list[Destination]:
        entries = self._route
        if entries is None:
            entries = self._route = [b.destination for b in self.bindings]
        if len(entries) < 2:
            return entries.copy()
        return [entries[self._rng.randrange(len(entries))]]
