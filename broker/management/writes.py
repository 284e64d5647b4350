"""Every change the management API makes to the broker.

The views call only this module for changes, in two kinds:

* Queues, exchanges, bindings and messages: each write runs on the broker's event loop as the
  request's user, through the code an AMQP channel of that user runs
  (`broker.management.local_channel`): the declarations' plain functions for queues, exchanges and
  bindings, a socketless channel's basic.publish and basic.get for messages. So the HTTP API makes
  RabbitMQ's checks in RabbitMQ's order with the AMQP error texts, which `AmqpOpError` carries to
  the views. A definitions import acts as the internal superuser, as rabbit_definitions does: it
  declares in any vhost, whatever the importer's permissions.
* Administration: vhosts (and their tracing), users, permissions, policies and the emulated
  cluster's nodes, through the broker's admin operations (`broker.management.ports`), which the
  HTTP layer has already authorised (broker.management.authz).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from amqpwire.errors import AmqpError
from amqpwire.fields import FieldTable
from broker.entities import events as ev
from broker.entities import hash_watch
from broker.entities.users import User, parse_tags
from broker.management import local_channel as direct
from broker.management.local_channel import DirectSession
from broker.management.write_errors import ACK_MODES, AmqpOpError, DefinitionError, PropertyTypeError
from broker.protocol import commands as C
from broker.session import declarations as D
from broker.session.declarations import REPLY_TO
from exchanges.base import Destination

if TYPE_CHECKING:
    from broker.entities.policy import Policy
    from broker.management.definitions import ImportPlan
    from broker.management.http import Request
    from broker.management.ports import ManagementBroker, PolicyAdmin

__all__ = ["ACK_MODES", "AmqpOpError", "DefinitionError", "ExchangeSpec", "PropertyTypeError", "Writes"]

T = TypeVar("T")


@dataclass(frozen=True)
class ExchangeSpec:
    """An exchange as the API declares it (a PUT's body or a definitions file's entry): the
    exchange.declare an AMQP client would send, without the passive and nowait flags."""

    name: str
    type: str
    durable: bool
    auto_delete: bool
    internal: bool
    arguments: dict[str, Any]


_ALL = ".*"


class Writes:
    """Changes to `broker`: entity and message writes as the request's user (permissions, user_id
    checks), administration as the authorised caller."""

    def __init__(self, broker: ManagementBroker) -> None:
        self._broker = broker

    @property
    def policies(self) -> PolicyAdmin:
        """The broker's own policy engine: the API stores policies there, it keeps no copy."""
        return self._broker.policies

    def acting(self, user: str) -> AbstractContextManager[None]:
        """The broker's events told inside this block were caused by `user` (the request's)."""
        return self._broker.events.acting(user)

    def _session(self, vhost: str, user: str, *, superuser: bool = False) -> DirectSession:
        """An in-process AMQP session of `user` on `vhost` (AmqpError if the vhost is gone)."""
        return DirectSession(self._broker, vhost, user, superuser=superuser)

    def _as_user(self, req: Request, vhost: str, op: Callable[[DirectSession], T]) -> T:
        """Run `op` as the request's user on `vhost`; a refusal becomes AmqpOpError."""
        try:
            return op(self._session(vhost, req.user))
        except AmqpError as exc:
            raise AmqpOpError(exc.reply_code, exc.reply_text) from None

    # -- queues, exchanges, bindings, messages (as the caller, through the AMQP code) --------------

    async def declare_queue(
        self, req: Request, vhost: str, name: str, durable: bool, auto_delete: bool, arguments: dict[str, Any]
    ) -> None:
        self._as_user(req, vhost, lambda s: self._declare_queue(s, name, durable, auto_delete, arguments))

    async def delete_queue(
        self, req: Request, vhost: str, name: str, if_unused: bool, if_empty: bool
    ) -> None:
        def op(s: DirectSession) -> None:
            method = C.QueueDelete(0, name, if_unused, if_empty, False)
            D.queue_delete(s.vhost_obj, s, _queue(s, "queue.delete", name), method)

        self._as_user(req, vhost, op)

    async def purge_queue(self, req: Request, vhost: str, name: str) -> None:
        self._as_user(
            req,
            vhost,
            lambda s: D.queue_purge(s.vhost_obj, s, _queue(s, "queue.purge", name)),
        )

    async def get_messages(
        self,
        req: Request,
        vhost: str,
        queue: str,
        count: int,
        ackmode: str,
        encoding: str,
        truncate: int | None,
    ) -> list[dict[str, Any]]:
        return self._as_user(
            req, vhost, lambda s: direct.get_messages(s, queue, count, ackmode, encoding, truncate)
        )

    async def declare_exchange(self, req: Request, vhost: str, spec: ExchangeSpec) -> None:
        self._as_user(req, vhost, lambda s: _declare_exchange(s, spec))

    async def delete_exchange(self, req: Request, vhost: str, name: str, if_unused: bool) -> None:
        self._as_user(
            req,
            vhost,
            lambda s: D.exchange_delete(s.vhost_obj, s, C.ExchangeDelete(0, name, if_unused, False)),
        )

    async def publish(
        self,
        req: Request,
        vhost: str,
        exchange: str,
        routing_key: str,
        properties: dict[str, Any],
        body: bytes,
    ) -> bool:
        try:
            return await direct.publish(
                self._session(vhost, req.user), exchange, routing_key, properties, body
            )
        except AmqpError as exc:
            raise AmqpOpError(exc.reply_code, exc.reply_text) from None

    async def bind(
        self,
        req: Request,
        vhost: str,
        source: str,
        destination: str,
        destination_type: str,
        key: str,
        args: dict[str, Any],
        *,
        remove: bool = False,
    ) -> None:
        """Add the binding, or with `remove` take it away (the API's POST and DELETE of one)."""
        self._as_user(
            req, vhost, lambda s: _bind(s, source, destination, destination_type, key, args, remove=remove)
        )

    # -- definitions ------------------------------------------------------------------------------

    async def import_definitions(self, req: Request, plan: ImportPlan) -> None:
        """Carry out a checked import (broker.management.definitions.plan_import) in
        rabbit_definitions' order: users, vhosts, permissions, then each vhost's queues, exchanges
        and bindings, then the policies, only once every declaration succeeded (DefinitionError
        names the item that failed; what was made before it stays)."""
        for u in plan.users:
            tags = parse_tags(u.get("tags", ""))
            self.put_user(User(str(u["name"]), str(u.get("password_hash", "")), tags), "password_hash")
        for v in plan.new_vhosts:
            if self._broker.add_vhost(v):
                self._grant_creator(v, req.user)
        for p in plan.permissions:
            self.set_permissions(str(p["vhost"]), str(p["user"]), p["configure"], p["write"], p["read"])
        for vh in plan.vhosts():
            self._declare_definitions(
                req, vh, plan.queues.get(vh, []), plan.exchanges.get(vh, []), plan.bindings.get(vh, [])
            )
        for policy in plan.policies:
            self.put_policy(policy)

    def _declare_definitions(
        self,
        req: Request,
        vhost: str,
        queues: list[dict[str, Any]],
        exchanges: list[dict[str, Any]],
        bindings: list[dict[str, Any]],
    ) -> None:
        """Queues, then exchanges, then bindings (rabbit_definitions' order), each in file order.

        File order matters for bindings: on x-consistent-hash the n-th binding made decides which
        buckets its queue gets. The first failure stops the import (DefinitionError names the item)
        and keeps what was declared before it, as RabbitMQ's import does.
        """
        current = ""
        try:
            s = self._session(vhost, req.user, superuser=True)
            for q in queues:
                current = f"queue '{q['name']}'"
                self._declare_queue(
                    s,
                    q["name"],
                    bool(q.get("durable", False)),
                    bool(q.get("auto_delete", False)),
                    q.get("arguments") or {},
                )
            for x in exchanges:
                current = f"exchange '{x['name']}'"
                spec = ExchangeSpec(
                    x["name"],
                    x.get("type") or "direct",
                    bool(x.get("durable", False)),
                    bool(x.get("auto_delete", False)),
                    bool(x.get("internal", False)),
                    x.get("arguments") or {},
                )
                _declare_exchange(s, spec)
            for b in bindings:
                kind = str(b.get("destination_type", "queue"))
                current = f"binding '{b['source']}' -> {kind} '{b['destination']}'"
                key, args = str(b.get("routing_key", "")), b.get("arguments") or {}
                _bind(s, b["source"], b["destination"], kind, key, args, remove=False)
        except AmqpError as exc:
            raise DefinitionError(exc.reply_code, exc.reply_text, current) from None

    # -- administration ---------------------------------------------------------------------------

    def close_stream_connection(self, name: str, reason: str) -> None:
        """Drop the stream-protocol connection `name`: RabbitMQ 3.10.8 sends it no close frame,
        whatever the reason given (which only its log shows)."""
        for conn in list(self._broker.stream_connections):
            if conn.name == name and conn.is_open:
                conn.force_close(reason)

    def put_vhost(
        self, creator: str, name: str, description: str, tags: tuple[str, ...], tracing: bool | None
    ) -> bool:
        """Create `name` (True) or leave it as it is (False); `tracing` switches the firehose tracer
        (rabbit_trace:start/stop), None leaves it as it was."""
        created = self._broker.add_vhost(name, description, tags)
        if created:
            self._grant_creator(name, creator)
        if tracing is not None:
            self._broker.vhosts[name].set_tracing(tracing)
        return created

    def _grant_creator(self, vhost: str, user: str) -> None:
        """rabbit_vhost:add grants the creating user full permissions on the new vhost."""
        auth = self._broker.auth
        if user in auth.users and (vhost, user) not in auth.permissions:
            auth.set_permissions(vhost, user, _ALL, _ALL, _ALL)
            ev.announce_permission(self._broker.events, vhost, user, auth.permissions[(vhost, user)])

    def delete_vhost(self, name: str) -> bool:
        """Delete `name` with its connections, queues, exchanges, policies and permissions (False:
        no such vhost)."""
        return self._broker.delete_vhost(name)

    def put_user(self, user: User, credential: str = "password") -> bool:
        """Create or replace `user` (a PUT replaces the whole user); True when new. `credential`:
        what the request gave, "password", "password_hash" or "none" (what RabbitMQ's events tell
        depends on it: a new hash alone tells nothing, no credential clears the password)."""
        auth = self._broker.auth
        created = user.name not in auth.users
        auth.put_user(user)
        events = self._broker.events
        if created:
            ev.announce_user(events, "user.created", user.name)
            if user.tags:
                ev.announce_user(events, "user.tags.set", user.name, user.tags)
        elif credential == "password":
            ev.announce_user(events, "user.password.changed", user.name)
            ev.announce_user(events, "user.tags.set", user.name, user.tags)
        elif credential == "none":
            ev.announce_user(events, "user.tags.set", user.name, user.tags)
            ev.announce_user(events, "user.password.cleared", user.name)
        return created

    def delete_user(self, name: str) -> bool:
        deleted = self._broker.auth.delete_user(name)
        if deleted:
            ev.announce_user(self._broker.events, "user.deleted", name)
        return deleted

    def set_permissions(self, vhost: str, user: str, configure: str, write: str, read: str) -> bool:
        """Set `user`'s permissions on `vhost` (RegexError for an invalid pattern); True when new."""
        auth = self._broker.auth
        created = (vhost, user) not in auth.permissions
        auth.set_permissions(vhost, user, configure, write, read)
        ev.announce_permission(self._broker.events, vhost, user, auth.permissions[(vhost, user)])
        return created

    def clear_permissions(self, vhost: str, user: str) -> bool:
        cleared = self._broker.auth.clear_permissions(vhost, user)
        if cleared:
            ev.announce_permission(self._broker.events, vhost, user, None)
        return cleared

    def put_policy(self, policy: Policy) -> bool:
        """Store and apply a validated policy; True when new."""
        unchanged = self._broker.policies.get(policy.vhost, policy.name) == policy  # told nothing
        before = self._queue_policies(policy.vhost)
        created = self._broker.policies.put(policy)
        if not unchanged:
            self._announce_queue_policies(policy.vhost, before)
            ev.announce_policy(self._broker.events, policy)
        return created

    def delete_policy(self, vhost: str, name: str) -> bool:
        before = self._queue_policies(vhost)
        deleted = self._broker.policies.delete(vhost, name)
        if deleted:
            self._announce_queue_policies(vhost, before)
            ev.announce_policy_cleared(self._broker.events, vhost, name)
        return deleted

    def _queue_policies(self, vhost: str) -> dict[str, Policy | None]:
        vh = self._broker.vhosts.get(vhost)
        return {q.name: q.policy for q in vh.queues.values()} if vh is not None else {}

    def _announce_queue_policies(self, vhost: str, before: dict[str, Policy | None]) -> None:
        vh = self._broker.vhosts.get(vhost)
        if vh is not None:
            ev.announce_queue_policies(self._broker.events, vh.queues.values(), before)

    def add_node(self, node: str) -> bool:
        """A node joins the emulated cluster (ClusterError for a bad name); False if a member."""
        return self._broker.policies.add_node(node)

    def remove_node(self, node: str) -> None:
        """A node leaves the emulated cluster (ClusterError if unknown or the local node)."""
        self._broker.policies.remove_node(node)

    def watch_hash_exchange(self, vhost: str, name: str, size: int) -> int:
        """Start or renew the live view of hash exchange `name` (broker.entities.hash_watch): its
        publishes are recorded while someone polls. Returns the watch's latest `seq`."""
        return hash_watch.watch(self._broker.vhosts[vhost], name, size).seq

    # -- helpers ----------------------------------------------------------------------------------

    def _declare_queue(
        self, s: DirectSession, name: str, durable: bool, auto_delete: bool, arguments: dict[str, Any]
    ) -> None:
        name = D.strip_cr_lf(name)
        if name.startswith(REPLY_TO):  # rabbit_channel's direct reply-to clause comes first
            D.check_reply_to_declare(s.vhost_obj, name, self._broker.reply_channel_exists)
            return
        method = C.QueueDeclare(
            0, name, False, durable, False, auto_delete, False, FieldTable.from_python(arguments)
        )
        D.queue_declare(s.vhost_obj, s, D.sharded_queue(s.vhost_obj, "queue.declare", name), method)


def _queue(s: DirectSession, method: str, name: str) -> str:
    """The queue `method` really acts on, as the channel resolves a name it is given."""
    return D.sharded_queue(s.vhost_obj, method, D.strip_cr_lf(name))


def _declare_exchange(s: DirectSession, x: ExchangeSpec) -> None:
    args = FieldTable.from_python(x.arguments)
    method = C.ExchangeDeclare(0, x.name, x.type, False, x.durable, x.auto_delete, x.internal, False, args)
    D.exchange_declare(s.vhost_obj, s, method)


def _bind(
    s: DirectSession, source: str, dest: str, dtype: str, key: str, args: dict[str, Any], *, remove: bool
) -> None:
    """exchange.bind/unbind or queue.bind/unbind, the names resolved as the channel resolves them."""
    dest_name = D.strip_cr_lf(dest)
    if dtype == "exchange":
        target = Destination.exchange(dest_name)
    else:
        method = "queue.unbind" if remove else "queue.bind"
        target = Destination.queue(D.sharded_queue(s.vhost_obj, method, dest_name))
    fn = D.unbind if remove else D.bind
    fn(s.vhost_obj, s, D.strip_cr_lf(source), target, key, FieldTable.from_python(args))
