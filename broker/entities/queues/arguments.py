"""Queue/consumer argument validation and equivalence checks with RabbitMQ 3.10.8's texts.

Mirrors rabbit_amqqueue:check_declare_arguments (classic queue type) and
rabbit_misc:assert_args_equivalence, including Erlang's term formatting in the messages.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from amqpwire.errors import internal_error, not_implemented, precondition_failed, resource_name
from amqpwire.fields import Field, FieldTable, name_bytes
from broker.entities.queues.base import find_queue_type, type_name_of
from exchanges.erlang.atom import Atom
from exchanges.erlang.format import erl_format

if TYPE_CHECKING:
    from broker.entities.queues.base import Queue

INTEGER_TYPES = frozenset(
    {"byte", "short", "signedint", "long", "unsignedbyte", "unsignedshort", "unsignedint"}
)
MAX_EXPIRY = 315_360_000_000
MAX_PRIORITY = 255

#: Classic queue mirroring's policy keys and the master locator: the replicated types (quorum queues,
#: streams) list them all in their unsupported_policies, so a policy holding one does not apply.
MIRRORING_POLICY_KEYS = frozenset(
    {
        "ha-mode",
        "ha-params",
        "ha-sync-mode",
        "ha-promote-on-shutdown",
        "ha-promote-on-failure",
        "queue-master-locator",
    }
)

# rabbit_classic_queue:capabilities() queue_arguments, in this order (it is the comparison order).
CLASSIC_QUEUE_ARGS: tuple[str, ...] = (
    "x-expires",
    "x-message-ttl",
    "x-dead-letter-exchange",
    "x-dead-letter-routing-key",
    "x-max-length",
    "x-max-length-bytes",
    "x-max-priority",
    "x-overflow",
    "x-queue-mode",
    "x-queue-version",
    "x-single-active-consumer",
    "x-queue-type",
    "x-queue-master-locator",
)
# Arguments of the other queue types (quorum, stream): rejected for a classic queue.
OTHER_TYPE_ARGS: frozenset[str] = frozenset(
    {
        "x-dead-letter-strategy",
        "x-delivery-limit",
        "x-initial-cluster-size",
        "x-max-age",
        "x-max-in-memory-bytes",
        "x-max-in-memory-length",
        "x-max-segment-size",
        "x-max-segment-size-bytes",
        "x-queue-leader-locator",
        "x-quorum-initial-group-size",
        "x-stream-max-segment-size-bytes",
        "x-stream-filter-size-bytes",
    }
)
# Arguments RabbitMQ 3.10.8 knows but refuses for a quorum / stream queue ("invalid arg 'k' for queue
# 'q' in vhost '/' of queue type rabbit_quorum_queue"), observed key by key on the live broker.
QUORUM_UNSUPPORTED_ARGS: frozenset[str] = frozenset(
    {
        "x-max-priority",
        "x-queue-mode",
        "x-queue-version",
        "x-queue-master-locator",
        "x-initial-cluster-size",
        "x-max-age",
        "x-stream-max-segment-size-bytes",
    }
)
STREAM_UNSUPPORTED_ARGS: frozenset[str] = frozenset(
    {
        "x-expires",
        "x-message-ttl",
        "x-dead-letter-exchange",
        "x-dead-letter-routing-key",
        "x-max-length",
        "x-max-priority",
        "x-overflow",
        "x-queue-mode",
        "x-queue-version",
        "x-single-active-consumer",
        "x-queue-master-locator",
        "x-dead-letter-strategy",
        "x-delivery-limit",
        "x-max-in-memory-bytes",
        "x-max-in-memory-length",
        "x-quorum-initial-group-size",
    }
)
_TYPE_UNSUPPORTED: dict[bytes, tuple[str, frozenset[str]]] = {
    b"quorum": ("rabbit_quorum_queue", QUORUM_UNSUPPORTED_ARGS),
    b"stream": ("rabbit_stream_queue", STREAM_UNSUPPORTED_ARGS),
}
MASTER_LOCATORS = (b"min-masters", b"client-local", b"random")
OTHER_CONSUMER_ARGS: frozenset[str] = frozenset({"x-stream-offset"})


Check = Callable[[Field, FieldTable], object | None]


def integer(f: Field, _a: FieldTable) -> object | None:
    if f.type not in INTEGER_TYPES:
        return f"expected integer, got {f.type}"
    return None


def non_negative(f: Field, a: FieldTable) -> object | None:
    err = integer(f, a)
    if err is None and f.value < 0:
        return (Atom("value_negative"), f.value)
    return err


def _expiry(value: int) -> object | None:
    if value < 0:
        return (Atom("value_negative"), value)
    if value > MAX_EXPIRY:
        return (Atom("value_too_large"), value)
    return None


def expires_arg(f: Field, a: FieldTable) -> object | None:
    err = integer(f, a)
    if err is not None:
        return err
    if f.value == 0:
        return (Atom("value_zero"), 0)
    return _expiry(f.value)


def ttl_arg(f: Field, a: FieldTable) -> object | None:
    err = integer(f, a)
    return err if err is not None else _expiry(f.value)


def dlx_arg(f: Field, _a: FieldTable) -> object | None:
    return None if f.type == "longstr" else (Atom("unacceptable_type"), Atom(f.type))


def dlrk_arg(f: Field, a: FieldTable) -> object | None:
    if f.type != "longstr":
        return (Atom("unacceptable_type"), Atom(f.type))
    return None if a.get("x-dead-letter-exchange") is not None else Atom("routing_key_but_no_dlx_defined")


def max_priority_arg(f: Field, a: FieldTable) -> object | None:
    err = non_negative(f, a)
    if err is None and f.value > MAX_PRIORITY:
        return (Atom("max_value_exceeded"), f.value)
    return err


def choice(allowed: Sequence[bytes], bad: str | None) -> Check:
    def check(f: Field, _a: FieldTable) -> object | None:
        if f.type != "longstr":
            return (Atom("unacceptable_type"), Atom(f.type))
        if f.value in allowed:
            return None
        if bad is None:
            return Atom("invalid_overflow")
        return _chars(bad, f.value)

    return check


def boolean(f: Field, _a: FieldTable) -> object | None:
    return None if f.type == "bool" else (Atom("unacceptable_type"), Atom(f.type))


def positive(f: Field, a: FieldTable) -> object | None:
    err = non_negative(f, a)
    if err is None and f.value == 0:
        return (Atom("value_zero"), 0)
    return err


def atom_choice(allowed: Sequence[bytes], error: str) -> Check:
    """A longstr out of `allowed`; any other text is the atom `error`."""

    def check(f: Field, _a: FieldTable) -> object | None:
        if f.type != "longstr":
            return (Atom("unacceptable_type"), Atom(f.type))
        return None if f.value in allowed else Atom(error)

    return check


def queue_version_arg(f: Field, a: FieldTable) -> object | None:
    err = non_negative(f, a)
    if err is None and f.value not in (1, 2):
        return _chars("unsupported queue version '~s'", str(f.value).encode())
    return err


def _chars(fmt: str, value: bytes) -> list[int]:
    """`rabbit_misc:format(Fmt, [Value])` with one `~s` of a binary: a character list of the very
    bytes the client sent (a non-UTF-8 value is not altered on its way into the reply)."""
    before, _s, after = fmt.partition("~s")
    return list(before.encode() + value + after.encode())


_QUEUE_TYPE = choice((b"classic", b"quorum", b"stream"), "unsupported queue type '~s'")

DECLARE_CHECKS: tuple[tuple[str, Check], ...] = (
    ("x-expires", expires_arg),
    ("x-message-ttl", ttl_arg),
    ("x-dead-letter-exchange", dlx_arg),
    ("x-dead-letter-routing-key", dlrk_arg),
    ("x-max-length", non_negative),
    ("x-max-length-bytes", non_negative),
    ("x-max-priority", max_priority_arg),
    ("x-overflow", choice((b"drop-head", b"reject-publish", b"reject-publish-dlx"), None)),
    ("x-queue-mode", choice((b"default", b"lazy"), "unsupported queue mode '~s'")),
    ("x-queue-version", queue_version_arg),
    ("x-single-active-consumer", boolean),
)


def check_queue_arguments(
    args: FieldTable,
    qname: str,
    vhost: str,
    *,
    durable: bool = True,
    exclusive: bool = False,
    auto_delete: bool = False,
) -> None:
    """Validate declare arguments (raises 406 with RabbitMQ's text) with the rules of the queue type
    `x-queue-type` names (broker.entities.queues.base registry).

    For a type RabbitMQ 3.10.8 has and hashbroker does not, RabbitMQ's refusals of an invalid
    declaration are reproduced first (the same 406 a client would get there); only a valid one
    ends in hashbroker's 540.
    """
    rs = resource_name("queue", qname, vhost)
    qtype = args.get("x-queue-type")
    if qtype is not None:
        raise_if(qtype, _QUEUE_TYPE(qtype, args), "x-queue-type", rs)
    cls = find_queue_type(type_name_of(args))
    if cls is None:
        if qtype is None:  # the types register when broker.entities.queues.catalog is imported
            raise RuntimeError(
                "no classic queue type registered: import broker.entities.queues.catalog first"
            )
        _check_other_type(qtype.value, args, rs, durable, exclusive, auto_delete)
        raise not_implemented(f"queue type '{qtype.value.decode()}' is not supported by hashbroker")
    cls.validate_arguments(args, qname, vhost, durable=durable, exclusive=exclusive, auto_delete=auto_delete)


def check_classic_arguments(args: FieldTable, rs: str, *, exclusive: bool) -> None:
    """The classic queue type's declare checks."""
    _check_values(args, rs)
    refuse_unsupported(args, rs, OTHER_TYPE_ARGS, "rabbit_classic_queue")
    locator = args.get("x-queue-master-locator")
    if (
        locator is not None
        and not exclusive
        and not (locator.type == "longstr" and locator.value in MASTER_LOCATORS)
    ):
        # RabbitMQ 3.10.8 crashes placing a classic queue with an unknown locator: the client sees a
        # bare "541 INTERNAL_ERROR" connection close and no queue is created (exclusive queues are
        # placed locally and never consult the locator, so they are declared fine).
        raise internal_error()


def _check_values(args: FieldTable, rs: str) -> None:
    """The argument value checks every queue type runs, in RabbitMQ's order (DECLARE_CHECKS)."""
    for key, check in DECLARE_CHECKS:
        f = args.get(key)
        if f is not None:
            raise_if(f, check(f, args), key, rs)


def refuse_unsupported(args: FieldTable, rs: str, unsupported: frozenset[str], module: str) -> None:
    """406 for the first argument, in table order, that the queue type (`module`) does not take."""
    for key, _f in args:
        if key in unsupported:
            raise precondition_failed(f"invalid arg '{key}' for {rs} of queue type {module}")


def _check_other_type(
    qtype: bytes, args: FieldTable, rs: str, durable: bool, exclusive: bool, auto_delete: bool
) -> None:
    """RabbitMQ 3.10.8's order for quorum/stream declarations: an argument the type does not support
    (first in table order), then the classic value checks, then the properties auto-delete,
    exclusive-owner, non-durable (406 "invalid property '...' for queue 'q' in vhost '/'")."""
    module, unsupported = _TYPE_UNSUPPORTED[qtype]
    refuse_unsupported(args, rs, unsupported, module)
    _check_values(args, rs)
    for bad, prop in (
        (auto_delete, "auto-delete"),
        (exclusive, "exclusive-owner"),
        (not durable, "non-durable"),
    ):
        if bad:
            raise precondition_failed(f"invalid property '{prop}' for {rs}")


def str_value(f: Field | None) -> str | None:
    """A longstr argument's text (None when absent or of another type)."""
    if f is None or f.type != "longstr":
        return None
    return str(f.value.decode("utf-8", errors="surrogateescape"))


def int_value(f: Field | None) -> int | None:
    """An integer argument's value (None when absent)."""
    return int(f.value) if f is not None else None


def plain_arguments(args: FieldTable) -> dict[str, Any]:
    """The x-arguments as plain values (longstr as text), as policies combine them."""
    return {
        k: f.value.decode("utf-8", "surrogateescape") if f.type == "longstr" else f.value
        for k, f in args
        if k.startswith("x-")
    }


def check_server_named(args: FieldTable) -> None:
    """rabbit_channel: queue.declare with an empty name is refused for the types that cannot have a
    server-generated name (before any other check of the declaration)."""
    qtype = args.get("x-queue-type")
    if qtype is not None and qtype.type == "longstr" and qtype.value in _TYPE_UNSUPPORTED:
        module = _TYPE_UNSUPPORTED[qtype.value][0]
        raise precondition_failed(f"Cannot declare a server-named queue for type {module}")


# -- consumers ---------------------------------------------------------------------------------------


def check_consume_arguments(args: FieldTable, rs: str) -> None:
    """A classic queue's basic.consume arguments (`rs`: the queue, as `resource` names it)."""
    prio = args.get("x-priority")
    if prio is not None:
        raise_if(prio, integer(prio, args), "x-priority", rs)
    cancel = args.get("x-cancel-on-ha-failover")
    if cancel is not None:
        raise_if(cancel, boolean(cancel, args), "x-cancel-on-ha-failover", rs)
    for key, _f in args:
        if key in OTHER_CONSUMER_ARGS:
            raise precondition_failed(f"invalid arg '{key}' for {rs} of queue type rabbit_classic_queue")


def raise_if(_f: Field, err: object | None, key: str, rs: str) -> None:
    if err is not None:
        raise precondition_failed(erl_format("invalid arg '~s' for ~s: ~255p", [key, rs, err]))


def _val(f: Field | None) -> str:
    """rabbit_misc's val/1 of a `{Type, Value}` pair: a binary by `~s` (its bytes), any other value
    by `~p`."""
    if f is None:
        return "none"
    shown = "~s" if isinstance(f.value, bytes) else "~p"
    return erl_format(f"the value '{shown}' of type '~s'", [field_term(f), f.type])


def _bare(f: Field) -> str:
    """rabbit_misc's val/1 of a bare value."""
    return erl_format("'~s'" if isinstance(f.value, bytes) else "'~p'", [field_term(f)])


def field_term(f: Field) -> object:
    """The Erlang term rabbit_binary_parser makes of a field's value (a table is a list of
    `{Name, Type, Value}`, an array a list of `{Type, Value}`, void the atom undefined)."""
    if f.type == "table":
        return [(name_bytes(k), Atom(v.type), field_term(v)) for k, v in f.value]
    if f.type == "array":
        return [(Atom(i.type), field_term(i)) for i in f.value]
    if f.type == "void":
        return Atom("undefined")
    return f.value


_CLASSIC_TYPE = Field("longstr", b"classic")


def assert_args_equivalence(orig: FieldTable, new: FieldTable, rs: str, keys: Sequence[str]) -> None:
    """rabbit_misc:assert_args_equivalence over `keys`, first difference wins. An absent
    x-queue-type and `classic` are the same type (RabbitMQ 3.10.8 accepts either on a redeclare of a
    classic queue, whichever it was declared with)."""
    for key in keys:
        a, b = orig.get(key), new.get(key)
        if a == b:
            continue
        if key == "x-queue-type" and (a or b) == _CLASSIC_TYPE and (a is None or b is None):
            continue
        if a is not None and b is not None:
            # both present: RabbitMQ compares (and prints) the bare values
            if a.value == b.value:
                continue
            raise precondition_failed(
                f"inequivalent arg '{key}' for {rs}: received {_bare(b)} but current is {_bare(a)}"
            )
        raise precondition_failed(
            f"inequivalent arg '{key}' for {rs}: received {_val(b)} but current is {_val(a)}"
        )


def check_redeclare(
    q: Queue, durable: bool, auto_delete: bool, arguments: FieldTable, keys: Sequence[str]
) -> None:
    """A redeclaration of `q` must match it: durable, auto_delete, then the type's arguments `keys`."""
    rs = q.rs
    assert_field_equivalence(q.durable, durable, rs, "durable")
    assert_field_equivalence(q.auto_delete, auto_delete, rs, "auto_delete")
    assert_args_equivalence(q.arguments, arguments, rs, keys)


def assert_field_equivalence(orig: object, new: object, rs: str, key: str) -> None:
    """rabbit_misc:assert_field_equivalence: 406 naming the field and both values (``val/1``).

    An exchange ``type`` is an atom there (``rabbit_exchange:check_type``), printed with ``'~tp'``:
    types that ~p must quote come out twice quoted, e.g. ``received ''x-consistent-hash'' but current is
    'direct'`` (observed on RabbitMQ 3.10.8 with the Java client and pika).
    """
    if orig != new:
        shown_new, shown_orig = (
            (_atom(new), _atom(orig))
            if key == "type" and isinstance(new, str) and isinstance(orig, str)
            else (_plain(new), _plain(orig))
        )
        raise precondition_failed(
            f"inequivalent arg '{key}' for {rs}: received {shown_new} but current is {shown_orig}"
        )


#: An atom ~p prints bare; any other is quoted. (Reserved words are bare-looking but quoted too;
#: no exchange type is one.)
_BARE_ATOM = re.compile(r"[a-z][A-Za-z0-9_@]*")


def _atom(name: str) -> str:
    """``'~tp'`` of the atom ``name``: quoted once by the format, once more by ~p unless it is bare."""
    if _BARE_ATOM.fullmatch(name):
        return f"'{name}'"
    return "''" + name.replace("\\", "\\\\").replace("'", "\\'") + "''"


def _plain(v: object) -> str:
    if isinstance(v, bool):
        return "'true'" if v else "'false'"
    if isinstance(v, str):
        return f"'{v}'"
    return f"'{v}'"
