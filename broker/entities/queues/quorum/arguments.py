"""Declaration and consume argument rules of quorum queues, with RabbitMQ 3.10.8's texts.

rabbit_quorum_queue's capabilities and rabbit_amqqueue's validators as the quorum type applies them;
the shared validators and message formatting are broker.entities.queues.arguments'.
"""

from __future__ import annotations

from collections.abc import Sequence

from amqpwire.errors import precondition_failed
from amqpwire.fields import Field, FieldTable
from broker.entities.queues.arguments import (
    INTEGER_TYPES,
    QUORUM_UNSUPPORTED_ARGS,
    Atom,
    Check,
    _bool,
    _choice,
    _dlrk,
    _dlx,
    _expires,
    _int,
    _non_neg,
    _raise_if,
    _refuse_unsupported,
    _ttl,
)

# rabbit_quorum_queue:capabilities() queue_arguments, in this order (it is the comparison order of
# a redeclare, rabbit_amqqueue:assert_args_equivalence).
QUORUM_QUEUE_ARGS: tuple[str, ...] = (
    "x-dead-letter-exchange",
    "x-dead-letter-routing-key",
    "x-dead-letter-strategy",
    "x-expires",
    "x-max-length",
    "x-max-length-bytes",
    "x-max-in-memory-length",
    "x-max-in-memory-bytes",
    "x-overflow",
    "x-single-active-consumer",
    "x-queue-type",
    "x-quorum-initial-group-size",
    "x-delivery-limit",
    "x-message-ttl",
    "x-queue-leader-locator",
)
LEADER_LOCATORS = (b"client-local", b"balanced", b"random", b"least-leaders")


def _positive(f: Field, a: FieldTable) -> object | None:
    err = _non_neg(f, a)
    if err is None and f.value == 0:
        return (Atom("value_zero"), 0)
    return err


def _atom_choice(allowed: Sequence[bytes], error: str) -> Check:
    def check(f: Field, _a: FieldTable) -> object | None:
        if f.type != "longstr":
            return (Atom("unacceptable_type"), Atom(f.type))
        return None if f.value in allowed else Atom(error)

    return check


# rabbit_amqqueue:declare_args() validators, in that (fixed) order, of the keys a quorum queue takes;
# x-delivery-limit has none in 3.10.8 (any value, even a string, is accepted).
QUORUM_DECLARE_CHECKS: tuple[tuple[str, Check], ...] = (
    ("x-expires", _expires),
    ("x-message-ttl", _ttl),
    ("x-dead-letter-exchange", _dlx),
    ("x-dead-letter-routing-key", _dlrk),
    ("x-dead-letter-strategy", _atom_choice((b"at-most-once", b"at-least-once"), "invalid_dlx_strategy")),
    ("x-max-length", _non_neg),
    ("x-max-length-bytes", _non_neg),
    ("x-max-in-memory-length", _non_neg),
    ("x-max-in-memory-bytes", _non_neg),
    ("x-overflow", _choice((b"drop-head", b"reject-publish", b"reject-publish-dlx"), None)),
    ("x-single-active-consumer", _bool),
    ("x-quorum-initial-group-size", _positive),
    ("x-queue-leader-locator", _atom_choice(LEADER_LOCATORS, "invalid_queue_locator_arg")),
)


def check_quorum_arguments(
    args: FieldTable, rs: str, *, durable: bool, exclusive: bool, auto_delete: bool
) -> None:
    """A quorum declaration as RabbitMQ 3.10.8 checks it (observed): the value of every argument the
    type takes, in declare_args order; then the first key, in table order, that it does not take;
    then the properties auto-delete, exclusive-owner, non-durable."""
    for key, check in QUORUM_DECLARE_CHECKS:
        f = args.get(key)
        if f is not None:
            _raise_if(f, check(f, args), key, rs)
    _refuse_unsupported(args, rs, QUORUM_UNSUPPORTED_ARGS, "rabbit_quorum_queue")
    flags = ((auto_delete, "auto-delete"), (exclusive, "exclusive-owner"), (not durable, "non-durable"))
    for bad, prop in flags:
        if bad:
            raise precondition_failed(f"invalid property '{prop}' for {rs}")


def check_quorum_consume_arguments(args: FieldTable, rs: str) -> None:
    """basic.consume arguments on a quorum queue: x-priority must be an integer; x-stream-offset and
    x-cancel-on-ha-failover belong to other types (observed on 3.10.8)."""
    prio = args.get("x-priority")
    if prio is not None:
        _raise_if(prio, _int(prio, args), "x-priority", rs)
    for key, _f in args:
        if key in ("x-stream-offset", "x-cancel-on-ha-failover"):
            raise precondition_failed(f"invalid arg '{key}' for {rs} of queue type rabbit_quorum_queue")


#: Keys a policy may not hold to apply to a quorum queue (rabbit_quorum_queue:unsupported_policies).
UNSUPPORTED_POLICY_KEYS = frozenset(
    {
        "max-priority",
        "queue-mode",
        "single-active-consumer",
        "ha-mode",
        "ha-params",
        "ha-sync-mode",
        "ha-promote-on-shutdown",
        "ha-promote-on-failure",
        "queue-master-locator",
        "max-age",
        "stream-max-segment-size-bytes",
        "initial-cluster-size",
    }
)


def delivery_limit(f: Field | None) -> float | None:
    """x-delivery-limit has no validator in 3.10.8: an integer is the limit; any other value is
    compared with Erlang's term order, where a number is below every binary (never exceeded)."""
    if f is None or f.type == "void":
        return None
    if f.type in INTEGER_TYPES:
        return float(f.value)
    return float("inf")
