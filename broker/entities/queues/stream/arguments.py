"""A stream's declare and consume arguments, checked and parsed as RabbitMQ 3.10.8 does.

The declare checks run the value validators of the arguments a stream takes, in RabbitMQ's fixed
`rabbit_amqqueue:declare_args()` order (first failure wins), then refuse, in the client's table
order, the keys a stream does not take, then the properties (auto-delete, exclusive, non-durable),
as `rabbit_stream_queue:declare` does after the argument checks. `x-max-age` and interval offsets
share `rabbit_amqqueue:check_max_age`, which crashes (541, 0/0) on a value without leading digits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from amqpwire.errors import internal_error, not_implemented, precondition_failed
from amqpwire.fields import Field, FieldTable
from broker.entities.queues import arguments as A
from exchanges.erlang.format import format_term

MODULE = "rabbit_stream_queue"

#: rabbit_stream_queue:capabilities() queue_arguments: the keys a stream takes, in the order a
#: redeclare compares them.
STREAM_QUEUE_ARGS: tuple[str, ...] = (
    "x-max-length-bytes",
    "x-queue-type",
    "x-max-age",
    "x-stream-max-segment-size-bytes",
    "x-initial-cluster-size",
    "x-queue-leader-locator",
)
#: Keys RabbitMQ knows (another queue type takes them) and a stream refuses.
STREAM_UNSUPPORTED: frozenset[str] = A.STREAM_UNSUPPORTED_ARGS
#: Consume arguments a stream refuses ("... of queue type rabbit_stream_queue").
CONSUME_UNSUPPORTED: frozenset[str] = frozenset({"x-priority", "x-cancel-on-ha-failover"})

_UNIT_MS = {
    "Y": 365 * 86_400_000,
    "M": 30 * 86_400_000,
    "D": 86_400_000,
    "h": 3_600_000,
    "m": 60_000,
    "s": 1000,
}
_LEADING = re.compile(rb"([0-9]*)(.*)", re.DOTALL)
DEFAULT_SEGMENT_BYTES = 500_000_000
OFFSET_ARG = "x-stream-offset"


class InvalidMaxAge(ValueError):
    """check_max_age's {error, invalid_max_age}."""


def max_age_ms(raw: bytes) -> int:
    """rabbit_amqqueue:check_max_age: "<digits><unit>" in milliseconds.

    No leading digit is `list_to_integer("")` crashing there: 541 INTERNAL_ERROR, 0/0.
    """
    m = _LEADING.match(raw)
    assert m is not None
    digits, unit = m.group(1), m.group(2)
    if not digits:
        raise internal_error()
    value = int(digits)
    per = _UNIT_MS.get(unit.decode("latin-1"))
    if value == 0 or per is None:
        raise InvalidMaxAge(raw)
    return value * per


def _max_age(f: Field, _a: FieldTable) -> object | None:
    if f.type != "longstr":
        return (A.Atom("unacceptable_type"), A.Atom(f.type))
    try:
        max_age_ms(f.value)
    except InvalidMaxAge:
        return A.Atom("invalid_max_age")
    return None


#: rabbit_stream_queue's ceiling for x-stream-max-segment-size-bytes, checked once the arguments
#: passed their value checks (observed: 3,000,000,000 is taken, one more refused).
MAX_SEGMENT_BYTES = 3_000_000_000


#: The value checks of the arguments a stream takes, in rabbit_amqqueue:declare_args() order
#: (x-queue-type is checked before the type is chosen). Keys a stream does not take are refused
#: as such, their values never checked (observed: x-max-priority 300 is "of queue type ...").
DECLARE_CHECKS: tuple[tuple[str, A.Check], ...] = (
    ("x-max-length-bytes", A.non_negative),
    ("x-max-age", _max_age),
    ("x-stream-max-segment-size-bytes", A.non_negative),
    ("x-initial-cluster-size", A.positive),
    (
        "x-queue-leader-locator",
        A.atom_choice(
            (b"client-local", b"balanced", b"random", b"least-leaders"), "invalid_queue_locator_arg"
        ),
    ),
)


def check_declare(args: FieldTable, rs: str, *, durable: bool, exclusive: bool, auto_delete: bool) -> None:
    """All of a stream declaration's refusals, in RabbitMQ 3.10.8's order."""
    for key, check in DECLARE_CHECKS:
        f = args.get(key)
        if f is not None:
            A.raise_if(f, check(f, args), key, rs)
    for key, _f in args:
        if key in STREAM_UNSUPPORTED:
            raise precondition_failed(f"invalid arg '{key}' for {rs} of queue type {MODULE}")
    flags = ((auto_delete, "auto-delete"), (exclusive, "exclusive-owner"), (not durable, "non-durable"))
    for bad, prop in flags:
        if bad:
            raise precondition_failed(f"invalid property '{prop}' for {rs}")
    segment = args.get("x-stream-max-segment-size-bytes")
    if segment is not None and segment.type in A.INTEGER_TYPES and int(segment.value) > MAX_SEGMENT_BYTES:
        raise precondition_failed("Exceeded max value for x-stream-max-segment-size-bytes")


# -- consuming ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where a consumer starts: `kind` is first / last / next / offset / timestamp (`value`: the
    offset, or wall-clock milliseconds)."""

    kind: str
    value: int = 0


_NAMED = {b"first": "first", b"last": "last", b"next": "next"}


def parse_offset(f: Field | None, rs: str, now_ms: int) -> OffsetSpec:
    """rabbit_stream_queue:parse_offset_arg, with what osiris then does with the value.

    A longstr that is neither a name nor an interval is 406 {invalid_stream_offset_arg,...}; an
    interval without leading digits crashes check_max_age, and any other type that is not a name,
    an integer or a timestamp reaches osiris unparsed and crashes the channel (541, 0/0).
    """
    if f is None:
        return OffsetSpec("next")
    if f.type in ("longstr", "binary") and f.value in _NAMED:
        return OffsetSpec(_NAMED[f.value])
    if f.type == "timestamp":
        return OffsetSpec("timestamp", int(f.value) * 1000)
    if f.type in A.INTEGER_TYPES:
        return OffsetSpec("offset", int(f.value))
    if f.type == "longstr":
        try:
            ms = max_age_ms(f.value)
        except InvalidMaxAge:
            raise precondition_failed(
                f"invalid arg 'x-stream-offset' for {rs}: {{invalid_stream_offset_arg,{{longstr,"
                f"{format_term(bytes(f.value))}}}}}"
            ) from None
        return OffsetSpec("timestamp", now_ms - ms)
    raise internal_error()


def check_consume(args: FieldTable, rs: str, *, no_ack: bool, prefetch: int, now_ms: int) -> OffsetSpec:
    """basic.consume on a stream: refused consume arguments, the consumer prefetch a stream needs
    (a channel-wide one alone is not enough), no-ack, then the offset."""
    for key, _f in args:
        if key in CONSUME_UNSUPPORTED:
            raise precondition_failed(f"invalid arg '{key}' for {rs} of queue type {MODULE}")
    if prefetch == 0:
        raise precondition_failed(f"consumer prefetch count is not set for '{rs}'")
    if no_ack:
        raise not_implemented(f"automatic acknowledgement not supported by stream queues {rs}")
    return parse_offset(args.get(OFFSET_ARG), rs, now_ms)
