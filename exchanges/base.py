"""The contract every exchange type implements, modelled on RabbitMQ's `rabbit_exchange_type` behaviour.

An exchange *type* is a class; an *instance* holds the routing state of one declared exchange (its
bindings, its bucket ring...). The broker and `exchanges.predict` only talk to this interface, so a
type can be swapped or added without either of them knowing the details.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, NamedTuple

from amqpwire.fields import FieldTable
from exchanges.compat import DEFAULT_COMPAT, Compat

DestinationKind = Literal["exchange", "queue"]


class Destination(NamedTuple):
    """A binding's target. Tuple order (kind, name) is RabbitMQ's resource order.

    RabbitMQ compares `#resource{virtual_host, kind, name}` records: the atom `exchange` sorts before
    `queue`, then names compare as binaries. Python compares `str` by code point, which is the same
    order as comparing their UTF-8 bytes, so plain tuple comparison reproduces it.
    """

    kind: DestinationKind
    name: str

    @classmethod
    def queue(cls, name: str) -> Destination:
        return cls("queue", name)

    @classmethod
    def exchange(cls, name: str) -> Destination:
        return cls("exchange", name)


@dataclass(frozen=True, slots=True)
class Binding:
    """One `queue.bind` / `exchange.bind`: destination, binding key and binding arguments."""

    destination: Destination
    key: str = ""
    arguments: FieldTable = field(default_factory=FieldTable)
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Every binding index (the exchange's, the vhost's by destination, the store's) hashes it
        # on each bind and unbind: computed once, not per lookup.
        object.__setattr__(self, "_hash", hash((self.destination, self.key, self.arguments)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled without the hash, which another process (string hash seed) would not share."""
        return (Binding, (self.destination, self.key, self.arguments))


class Message(ABC):
    """What routing may look at. The broker implements this lazily over the raw content header.

    `routing_keys` is RabbitMQ's `[RoutingKey | CC ++ BCC]`: most types route on every entry, the
    consistent-hash exchange hashes only the first, the modulus-hash exchange hashes the whole list.
    """

    @property
    @abstractmethod
    def routing_keys(self) -> Sequence[str]: ...

    @abstractmethod
    def headers(self) -> FieldTable | None:
        """The `headers` property as a typed field table, or None when the message has none."""

    @abstractmethod
    def property(self, name: str) -> Any:
        """A basic property by AMQP name (`message_id`, `timestamp`, ...), None when absent."""


@dataclass(slots=True)
class SimpleMessage(Message):
    """A plain in-memory message, used by `exchanges.predict` and by tests."""

    keys: Sequence[str]
    header_table: FieldTable | None = None
    properties: Mapping[str, Any] = field(default_factory=dict)

    @property
    def routing_keys(self) -> Sequence[str]:
        return self.keys

    def headers(self) -> FieldTable | None:
        return self.header_table

    def property(self, name: str) -> Any:
        return self.properties.get(name)


class ExchangeType(ABC):
    """Routing state of one exchange. Subclasses register themselves by `type_name`.

    The life cycle mirrors RabbitMQ: `validate(arguments)` runs once when the exchange is created
    (redeclaration does not re-validate), `validate_binding` before each bind, then `add_binding` /
    `remove_bindings` keep the state, and `route` maps a message to destinations.

    The bindings are kept in the order they were made (x-consistent-hash's ring and a definitions
    export depend on it) and indexed by destination, so adding or removing one costs the same
    however many the exchange has, and `remove_destination` costs only the bindings it removes:
    an exchange bound by 20,000 queues must not stall the broker for each queue that goes away.
    Subclasses extend `add_binding` / `remove_bindings` (calling these first) with their own
    indexes, under the same rule.
    """

    type_name: ClassVar[str]

    def __init__(self, arguments: FieldTable | None = None, compat: Compat = DEFAULT_COMPAT) -> None:
        self.arguments = arguments if arguments is not None else FieldTable()
        self.compat = compat
        self._bound: dict[Binding, None] = {}
        self._by_destination: dict[Destination, dict[Binding, None]] = {}

    @property
    def bindings(self) -> list[Binding]:
        """Every binding, in the order it was made."""
        return list(self._bound)

    @bindings.setter
    def bindings(self, value: Sequence[Binding]) -> None:
        """Replace every binding (removed, then `value` added in order)."""
        self.remove_bindings(list(self._bound))
        for binding in value:
            self.add_binding(binding)

    def has_binding(self, binding: Binding) -> bool:
        return binding in self._bound

    def bindings_of(self, destination: Destination) -> list[Binding]:
        """The bindings to `destination`, in the order they were made."""
        return list(self._by_destination.get(destination, ()))

    @property
    def binding_count(self) -> int:
        return len(self._bound)

    @classmethod  # noqa: B027 - most types accept any arguments
    def validate(cls, arguments: FieldTable) -> None:
        """Raise `AmqpError` if declare arguments are unacceptable for this type."""

    def validate_binding(self, binding: Binding) -> None:  # noqa: B027 - most types accept any binding
        """Raise `AmqpError` if this binding cannot be added (e.g. a weight that is not a number)."""

    def add_binding(self, binding: Binding) -> None:
        """Record a binding. Adding one already present changes nothing (callers do not)."""
        if binding in self._bound:
            return
        self._bound[binding] = None
        of_destination = self._by_destination.get(binding.destination)
        if of_destination is None:
            self._by_destination[binding.destination] = {binding: None}
        else:
            of_destination[binding] = None

    def remove_bindings(self, bindings: Sequence[Binding]) -> None:
        """Forget bindings (unbind, or destination deleted); ones not present are ignored."""
        bound = self._bound
        by_destination = self._by_destination
        for binding in bindings:
            if binding not in bound:
                continue
            del bound[binding]
            of_destination = by_destination[binding.destination]
            del of_destination[binding]
            if not of_destination:
                del by_destination[binding.destination]

    def remove_destination(self, destination: Destination) -> list[Binding]:
        """Forget every binding to `destination` (it was deleted) and return them, at the cost of
        those bindings alone."""
        gone = self.bindings_of(destination)
        if gone:
            self.remove_bindings(gone)
        return gone

    def bound(self, binding: Binding) -> Sequence[Message]:
        """Called once a new binding was added (not for one already present): the messages to
        deliver through it now, oldest first (x-recent-history replays its history). A refusal
        raises `AmqpError`; the default delivers nothing."""
        return ()

    @abstractmethod
    def route(self, message: Message) -> list[Destination]:
        """Destinations for `message`, without duplicates, in the order RabbitMQ would list them."""

    def bucket_of(self, message: Message) -> tuple[int, int, Destination] | None:
        """For hashing types: (bucket, number of buckets, destination) that `route` picks for
        `message`, so tools can show where a message went and why; None for other types and when
        nothing is bound. It never changes routing state that `route` reads."""
        return None

    @property
    def state_summary(self) -> Mapping[str, Any]:
        """Type-specific state for tools (the dashboard shows the consistent-hash ring from this)."""
        return {}


def dedupe(destinations: list[Destination]) -> list[Destination]:
    """Remove repeats while keeping the first occurrence's position."""
    if len(destinations) < 2:
        return destinations
    return list(dict.fromkeys(destinations))
