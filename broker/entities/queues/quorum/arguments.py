"""Declaration and consume argument rules of quorum queues, with RabbitMQ 3.10.8's texts.

rabbit_quorum_queue's capabilities and rabbit_amqqueue's validators as the quorum type applies them;
the shared validators and message formatting are broker.entities.queues.arguments'.
"""

from __future__ import annotations

from amqpwire.errors import precondition_failed, resource_name
from amqpwire.fields import Field, FieldTable
from broker.entities.queues.arguments import (
    INTEGER_TYPES,
    MIRRORING_POLICY_KEYS,
    QUORUM_UNSUPPORTED_ARGS,
    Check,
    atom_choice,
    boolean,
    choice,
    dlrk_arg,
    dlx_arg,
    expires_arg,
    integer,
    non_negative,
    positive,
    raise_if,
    refuse_unsupported,
    ttl_arg,
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


# rabbit_amqqueue:declare_args() validators, in that (fixed) order, of the keys a quorum queue takes;
# x-delivery-limit has none in 3.10.8 (any value, even a string, is accepted).
QUORUM_DECLARE_CHECKS: tuple[tuple[str, Check], ...] = (
    ("x-expires", expires_arg),
    ("x-message-ttl", ttl_arg),
    ("x-dead-letter-exchange", dlx_arg),
    ("x-dead-letter-routing-key", dlrk_arg),
    ("x-dead-letter-strategy", atom_choice((b"at-most-once", b"at-least-once"), "invalid_dlx_strategy")),
    ("x-max-length", non_negative),
    ("x-max-length-bytes", non_negative),
    ("x-max-in-memory-length", non_negative),
    ("x-max-in-memory-bytes", non_negative),
    ("x-overflow", choice((b"drop-head", b"reject-publish", b"reject-publish-dlx"), None)),
    ("x-single-active-consumer", boolean),
    ("x-quorum-initial-group-size", positive),
    ("x-queue-leader-locator", atom_choice(LEADER_LOCATORS, "invalid_queue_locator_arg")),
)


def check_declaration(
    args: FieldTable, qname: str, vhost: str, *, durable: bool, exclusive: bool, auto_delete: bool
) -> None:
    """A quorum declaration as RabbitMQ 3.10.8 checks it (observed): the value of every argument the
    type takes, in declare_args order; then the first key, in table order, that it does not take;
    then the properties auto-delete, exclusive-owner, non-durable. The queue type's
    `validate_arguments`, as it is."""
    rs = resource_name("queue", qname, vhost)
    for key, check in QUORUM_DECLARE_CHECKS:
        f = args.get(key)
        if f is not None:
            raise_if(f, check(f, args), key, rs)
    refuse_unsupported(args, rs, QUORUM_UNSUPPORTED_ARGS, "rabbit_quorum_queue")
    flags = ((auto_delete, "auto-delete"), (exclusive, "exclusive-owner"), (not durable, "non-durable"))
    for bad, prop in flags:
        if bad:
            raise precondition_failed(f"invalid property '{prop}' for {rs}")


def check_quorum_consume_arguments(args: FieldTable, rs: str) -> None:
    """basic.consume arguments on a quorum queue: x-priority must be an integer; x-stream-offset and
    x-cancel-on-ha-failover belong to other types (observed on 3.10.8)."""
    prio = args.get("x-priority")
    if prio is not None:
        raise_if(prio, integer(prio, args), "x-priority", rs)
    for key, _f in args:
        if key in ("x-stream-offset", "x-cancel-on-ha-failover"):
            raise precondition_failed(f"invalid arg '{key}' for {rs} of queue type rabbit_quorum_queue")


#: Keys a policy may not hold to apply to a quorum queue (rabbit_quorum_queue:unsupported_policies).
UNSUPPORTED_POLICY_KEYS = MIRRORING_POLICY_KEYS | frozenset(
    {
        "max-priority",
        "queue-mode",
        "single-active-consumer",
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
