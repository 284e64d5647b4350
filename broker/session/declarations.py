"""Exchange and queue declarations as plain functions (RabbitMQ's rabbit_channel:handle_method/6).

Each takes the vhost, the acting `Principal` (the user's permission check and, for exclusive
queues, the owning connection) and the typed method tuple, applies RabbitMQ's checks in its order
and returns what the reply needs. The channel's handlers wrap them (queue-name shortcuts, sharding
interception, the reply frame); the management API can call them directly.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from amqpwire.errors import (
    AmqpError,
    access_refused,
    precondition_failed,
    resource_locked,
    resource_name,
    resource_not_found,
)
from amqpwire.fields import FieldTable
from broker.entities.queues.arguments import (
    assert_args_equivalence,
    assert_field_equivalence,
    check_queue_arguments,
    check_server_named,
)
from broker.entities.queues.catalog import Queue
from broker.protocol import commands as C
from exchanges.base import Binding, Destination

if TYPE_CHECKING:
    from broker.entities.exchange import Exchange
    from broker.entities.vhost import VHost

REPLY_TO = "amq.rabbitmq.reply-to"
"""Direct reply-to's pseudo-queue: consumed with no-ack, named as a publish's reply_to."""
REPLY_TO_PREFIX = "amq.rabbitmq.reply-to."
"""What the reply_to of a publish becomes: this prefix and the reply consumer's suffix."""


class Principal(Protocol):
    """Who declares: the user's permission check, and the connection that owns exclusive queues."""

    exclusive_queues: list[Queue]

    def check_access(self, kind: str, resource: str, name: str) -> None: ...


def gen_name(prefix: str) -> str:
    """rabbit_guid:binary(gen_secure(), Prefix): prefix + '-' + base64url of 16 random bytes."""
    return prefix + "-" + base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")


def strip_cr_lf(name: str) -> str:
    return name.replace("\n", "").replace("\r", "") if ("\n" in name or "\r" in name) else name


def check_name(kind: str, name: str) -> None:
    if name.startswith("amq."):
        raise access_refused(f"{kind} name '{name}' contains reserved prefix 'amq.*'")


def not_default_exchange(name: str) -> None:
    if name == "":
        raise access_refused("operation not permitted on the default exchange")


def locked_error(q: Queue) -> AmqpError:
    return resource_locked(
        f"cannot obtain exclusive access to locked {resource_name('queue', q.name, q.vhost.name)}. "
        "It could be originally declared on another connection or the exclusive property value "
        "does not match that of the original declaration."
    )


def sharded_queue(vhost: VHost, method: str, name: str) -> str:
    """The sharding plugin's channel interceptor: the real queue for `method` on a queue name equal
    to a sharded exchange's (any other name is returned unchanged)."""
    if vhost.hooks is None or name not in vhost.exchanges:
        return name
    return str(vhost.hooks.rewrite_queue(vhost, method, name))


def check_reply_to_declare(vhost: VHost, name: str, reply_channel_exists: Callable[[str], bool]) -> None:
    """rabbit_channel's first queue.declare clause, for a name starting with amq.rabbitmq.reply-to:
    any declare (passive or not, whatever the flags and arguments) of amq.rabbitmq.reply-to itself
    succeeds, as does amq.rabbitmq.reply-to.<suffix> of a live reply consumer; any other such name
    is 404."""
    if name != REPLY_TO and not (
        name.startswith(REPLY_TO_PREFIX) and reply_channel_exists(name[len(REPLY_TO_PREFIX) :])
    ):
        raise resource_not_found("queue", name, vhost.name)


def check_exclusive(principal: Principal, q: Queue) -> None:
    if q.exclusive_owner is not None and q.exclusive_owner is not principal:
        raise locked_error(q)


def exchange_declare(vhost: VHost, principal: Principal, a: C.ExchangeDeclare) -> None:
    name = strip_cr_lf(a.exchange)
    if a.passive:
        not_default_exchange(name)
        vhost.exchange_or_404(name)
        return
    from broker.entities.exchange_types import get_type

    get_type(a.type, vhost.compat, vhost.plugins)  # unknown type: 503 before anything else
    not_default_exchange(name)
    principal.check_access("configure", "exchange", name)
    x = vhost.exchanges.get(name)
    args = a.arguments
    if x is None:
        check_name("exchange", name)
        ae = args.get("alternate-exchange")
        if ae is not None and ae.type != "longstr":
            raise precondition_failed(
                f"invalid type '{ae.type}' for arg 'alternate-exchange' in {vhost.rs('exchange', name)}"
            )
        vhost.declare_exchange(
            name, a.type, durable=a.durable, auto_delete=a.auto_delete, internal=a.internal, arguments=args
        )
        return
    rs = vhost.rs("exchange", name)
    assert_field_equivalence(x.type_name, a.type, rs, "type")
    assert_field_equivalence(x.durable, a.durable, rs, "durable")
    assert_field_equivalence(x.auto_delete, a.auto_delete, rs, "auto_delete")
    assert_field_equivalence(x.internal, a.internal, rs, "internal")
    assert_args_equivalence(x.arguments, args, rs, ("alternate-exchange",))


def exchange_delete(vhost: VHost, principal: Principal, a: C.ExchangeDelete) -> None:
    name = strip_cr_lf(a.exchange)
    not_default_exchange(name)
    if name.startswith("amq."):
        raise access_refused(f"deletion of system {vhost.rs('exchange', name)} not allowed")
    principal.check_access("configure", "exchange", name)
    x = vhost.exchanges.get(name)
    if x is not None:
        if a.if_unused and vhost.exchange_in_use(x):
            raise precondition_failed(f"{vhost.rs('exchange', name)} in use")
        vhost.delete_exchange(x)


def bind(
    vhost: VHost, principal: Principal, source: str, dest: Destination, key: str, args: FieldTable
) -> None:
    """exchange.bind and queue.bind (names already resolved)."""
    _check_binding(principal, source, dest)
    src = vhost.exchanges.get(source)
    if src is None:
        raise resource_not_found("exchange", source, vhost.name)
    if dest.kind == "queue":
        q = vhost.queues.get(dest.name)
        if q is None:
            raise resource_not_found("queue", dest.name, vhost.name)
        check_exclusive(principal, q)
    elif dest.name not in vhost.exchanges:
        raise resource_not_found("exchange", dest.name, vhost.name)
    vhost.add_binding(src, Binding(dest, key, args))


def unbind(
    vhost: VHost, principal: Principal, source: str, dest: Destination, key: str, args: FieldTable
) -> None:
    """rabbit_binding:remove: a binding that does not exist is removed "successfully".

    It looks the route up first and returns ok when there is none, so a missing source, a missing
    destination or a missing binding all get unbind-ok; only an existing binding to another
    connection's exclusive queue runs the inner check (405).
    """
    _check_binding(principal, source, dest)
    src: Exchange | None = vhost.exchanges.get(source)
    binding = Binding(dest, key, args)
    if src is None or binding not in src.binding_set:
        return
    if dest.kind == "queue":
        q = vhost.queues.get(dest.name)
        if q is not None:
            check_exclusive(principal, q)
    vhost.remove_binding(src, binding)


def _check_binding(principal: Principal, source: str, dest: Destination) -> None:
    principal.check_access("write", dest.kind, dest.name)
    if dest.kind == "exchange":
        not_default_exchange(dest.name)
    not_default_exchange(source)
    principal.check_access("read", "exchange", source)


def queue_declare(vhost: VHost, principal: Principal, name: str, a: C.QueueDeclare) -> Queue:
    """queue.declare for `name` (resolved: "" is a server-named queue); returns the queue."""
    if a.passive:
        found = vhost.queue_or_404(name)
        check_exclusive(principal, found)
        found.reset_expiry()  # a passive declare is a use: RabbitMQ 3.10.8 restarts x-expires
        return found
    exclusive = a.exclusive
    durable = a.durable and not exclusive
    args = a.arguments
    if name == "":
        check_server_named(args)
        name = gen_name("amq.gen")
    else:
        check_name("queue", name)
    principal.check_access("configure", "queue", name)
    vhost.events.count("queue.declared")
    q = vhost.queues.get(name)
    if q is not None:
        if q.exclusive_owner is not (principal if exclusive else None):
            raise locked_error(q)
        q.check_equivalent(durable, a.auto_delete, args)
        q.reset_expiry()
        return q
    dlx = args.get("x-dead-letter-exchange")
    if dlx is not None and dlx.type != "longstr":
        raise precondition_failed(
            f"invalid type '{dlx.type}' for arg 'x-dead-letter-exchange' in {vhost.rs('queue', name)}"
        )
    check_queue_arguments(
        args, name, vhost.name, durable=a.durable, exclusive=exclusive, auto_delete=a.auto_delete
    )
    q = Queue(
        vhost,
        name,
        durable=durable,
        exclusive_owner=principal if exclusive else None,
        auto_delete=a.auto_delete,
        arguments=args,
    )
    vhost.add_queue(q)
    if exclusive:
        principal.exclusive_queues.append(q)
    return q


def queue_purge(vhost: VHost, principal: Principal, name: str) -> int:
    """Purge queue `name`; the number of messages dropped."""
    principal.check_access("read", "queue", name)
    q = vhost.queue_or_404(name)
    check_exclusive(principal, q)
    return q.purge()


def queue_delete(vhost: VHost, principal: Principal, name: str, a: C.QueueDelete) -> int:
    """Delete queue `name` (absent: nothing to do); the number of messages it held."""
    principal.check_access("configure", "queue", name)
    q = vhost.queues.get(name)
    if q is None:
        return 0
    check_exclusive(principal, q)
    q.check_delete(if_unused=a.if_unused, if_empty=a.if_empty)
    return vhost.delete_queue(q)
