"""What x-consistent-hash and x-modulus-hash share: the list of destinations a message's hash picks
one of, and the cache of what each routing key hashed to."""

from __future__ import annotations

from amqpwire.fields import FieldTable
from exchanges.base import Destination, ExchangeType, Message
from exchanges.compat import DEFAULT_COMPAT, Compat


class HashExchange(ExchangeType):
    """Routes a message to one of `targets`, the bucket its hash picks.

    `targets` is the bucket list (consistent-hash's ring, modulus-hash's route table), one entry per
    bucket. `key_cache` maps a routing key to what hashing it gave (a subclass says what, and when
    it is cleared besides when it holds `KEY_CACHE_LIMIT` keys): a repeated key then costs a dict
    lookup instead of encoding and hashing it.
    """

    def __init__(self, arguments: FieldTable | None = None, compat: Compat = DEFAULT_COMPAT) -> None:
        super().__init__(arguments, compat)
        self.targets: list[Destination] = []
        self.key_cache: dict[str, int] = {}

    def bucket(self, message: Message) -> int:
        """The index in `targets` (not empty) that `route` picks for `message`, computed afresh."""
        raise NotImplementedError

    def bucket_of(self, message: Message) -> tuple[int, int, Destination] | None:
        targets = self.targets
        if not targets:
            return None
        bucket = self.bucket(message)
        return bucket, len(targets), targets[bucket]
