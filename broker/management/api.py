"""RabbitMQ-shaped management HTTP API (the subset monitoring tools and test suites use).

Field names, status codes and error bodies were taken from a live RabbitMQ 3.10.8 management
plugin, so clients written against RabbitMQ (rabbitmqadmin, Prometheus exporters, test helpers
that poll /api/queues) work unchanged. Queue message_stats and depths carry sampled rates (every
5 s, as RabbitMQ); other `*_details` are `{"rate": 0.0}`.
Erlang-internal fields (garbage_collection, reductions, backing_queue_status, ...) are omitted.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import ipaddress
import json
import platform
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote

from broker import __version__
from broker.auth import SHA256, RegexError, User, hash_password, parse_tags
from broker.management import amqp_ops, dashboard, definitions
from broker.management.amqp_ops import AmqpOpError, DefinitionError, Target
from broker.management.http import Request, Response
from broker.management.policies import PolicyError, PolicyStore, parse_policy
from broker.management.state import (
    BindingInfo,
    BrokerState,
    ConnectionInfo,
    ConsumerInfo,
    ExchangeInfo,
    QueueInfo,
)

NOT_FOUND = {"error": "Object Not Found", "reason": "Not Found"}
EXCHANGE_TYPE_DESCRIPTIONS = {
    "direct": "AMQP direct exchange, as per the AMQP specification",
    "fanout": "AMQP fanout exchange, as per the AMQP specification",
    "headers": "AMQP headers exchange, as per the AMQP specification",
    "topic": "AMQP topic exchange, as per the AMQP specification",
    "x-consistent-hash": "Consistent Hashing Exchange",
    "x-modulus-hash": "Modulus Hashing Exchange",
    "x-delayed-message": "Delayed Message Exchange",
}

Route = Callable[["Api", Request, list[str]], Awaitable[Response]]


def not_found() -> Response:
    return Response.json(NOT_FOUND, 404)


def bad_request(reason: Any) -> Response:
    return Response.json({"error": "bad_request", "reason": reason}, 400)


def access_refused() -> Response:
    # sic: RabbitMQ spells it "not_authorised" here and "not_authorized" for failed logins
    return Response.json({"error": "not_authorised", "reason": "Access refused."}, 401)


def exchange_name(segment: str) -> str:
    """The default exchange is addressed as "amq.default" in URLs."""
    return "" if segment == "amq.default" else segment


def with_rates(d: dict[str, Any], *keys: str, rates: dict[str, float] | None = None) -> dict[str, Any]:
    """Add RabbitMQ's `<key>_details: {"rate": r}` next to each counter (0.0 when not sampled)."""
    for k in keys:
        d[f"{k}_details"] = {"rate": (rates or {}).get(k, 0.0)}
    return d


class Api:
    """Routes requests to handlers; everything runs on the broker's event loop."""

    def __init__(self, state: BrokerState) -> None:
        self.state = state
        self.http_port = 0
        self.http_host = ""
        self.policies: Any = _policy_backend(state)

    @property
    def policies_applied(self) -> bool:
        """Whether stored policies take effect on entities (False for the management-only store)."""
        return bool(getattr(self.policies, "applied", True))

    # -- dispatch ---------------------------------------------------------------------------------

    async def handle(self, req: Request) -> Response:
        segments = [unquote(s) for s in req.raw_path.split("/")[1:]]
        if segments and segments[-1] == "" and len(segments) > 1:
            segments.pop()
        if not segments or segments[0] != "api":
            # the dashboard page and its assets are public; the page's JS authenticates to /api
            page = dashboard.serve(req.method, segments)
            return page if page is not None else not_found()
        auth = self.authenticate(req)
        if isinstance(auth, Response):
            return auth
        user, password = auth
        route, allowed = self._match(req.method, segments[1:])
        if route is None:
            if allowed:
                return Response(405, b"", {"allow": ", ".join(sorted(allowed))})
            return not_found()
        req.user, req.password = user, password
        resp = await route(self, req, segments[1:])
        return self._columns(req, resp)

    def _match(self, method: str, segs: list[str]) -> tuple[Route | None, set[str]]:
        allowed: set[str] = set()
        for pattern, methods in ROUTES:
            if len(pattern) != len(segs):
                continue
            if not all(p == "*" or p == s for p, s in zip(pattern, segs, strict=True)):
                continue
            names = set(methods)
            if "GET" in names:
                names |= {"HEAD", "OPTIONS"}
            allowed |= names
            handler = methods.get("GET" if method == "HEAD" else method)
            if handler is not None:
                return handler, allowed
        return None, allowed

    def authenticate(self, req: Request) -> tuple[str, str] | Response:
        """HTTP basic auth against the broker's users, with RabbitMQ's loopback-user rule."""
        header = req.headers.get("authorization", "")
        challenge = {"www-authenticate": 'Basic realm="RabbitMQ Management"'}
        if not header.lower().startswith("basic "):
            return Response(401, b"", challenge)
        try:
            user, _, password = base64.b64decode(header[6:].strip()).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return Response.json({"error": "not_authorized", "reason": "Login failed"}, 401, challenge)
        if not self.state.check_credentials(user, password):
            return Response.json({"error": "not_authorized", "reason": "Login failed"}, 401, challenge)
        if self.state.is_loopback_user(user) and not _is_loopback(req.peer_host):
            return Response.json(
                {"error": "not_authorized", "reason": "User can only log in via localhost"}, 401, challenge
            )
        return user, password

    @staticmethod
    def _columns(req: Request, resp: Response) -> Response:
        """`?columns=name,message_stats.publish` as RabbitMQ supports it (tools use it to cut payloads)."""
        cols = req.query.get("columns")
        if not cols or resp.status != 200 or not resp.body:
            return resp
        wanted = [c.split(".") for c in ",".join(cols).split(",") if c]
        data = json.loads(resp.body)

        def pick(obj: Any) -> Any:
            if not isinstance(obj, dict):
                return obj
            out: dict[str, Any] = {}
            for path in wanted:
                src: Any = obj
                for part in path:
                    src = src.get(part) if isinstance(src, dict) else None
                    if src is None:
                        break
                if src is None:
                    continue
                dst = out
                for part in path[:-1]:
                    dst = dst.setdefault(part, {})
                dst[path[-1]] = src
            return out

        picked = [pick(o) for o in data] if isinstance(data, list) else pick(data)
        return Response.json(picked, resp.status)

    def target(self, req: Request, vhost: str) -> Target:
        return Target(self.state.amqp_host, self.state.amqp_port, req.user, req.password, vhost)

    @staticmethod
    async def run(fn: Callable[..., Any], *args: Any) -> Any:
        """Run a blocking AMQP operation off the loop, which must stay free to serve it."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, functools.partial(fn, *args))

    # -- formatting ---------------------------------------------------------------------------------

    def fmt_exchange(self, e: ExchangeInfo, detail: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "arguments": e.arguments,
            "auto_delete": e.auto_delete,
            "durable": e.durable,
            "internal": e.internal,
            "name": e.name,
            "type": e.type,
            "user_who_performed_action": e.declared_by,
            "vhost": e.vhost,
        }
        if detail:
            d["incoming"] = []
            d["outgoing"] = []
        return d

    def fmt_queue(self, q: QueueInfo, detail: bool = False) -> dict[str, Any]:
        messages = q.messages_ready + q.messages_unacknowledged
        nbytes = q.message_bytes_ready + q.message_bytes_unacknowledged
        d: dict[str, Any] = {
            "arguments": q.arguments,
            "auto_delete": q.auto_delete,
            "consumer_capacity": 1.0 if q.consumers else 0,
            "consumer_utilisation": 1.0 if q.consumers else 0,
            "consumers": len(q.consumers),
            "durable": q.durable,
            "effective_policy_definition": {},
            "exclusive": q.exclusive,
            "exclusive_consumer_tag": q.exclusive_consumer_tag,
            "head_message_timestamp": None,
            "memory": nbytes,
            "message_bytes": nbytes,
            "message_bytes_paged_out": 0,
            "message_bytes_persistent": 0,  # not tracked: durable messages are in broker.store
            "message_bytes_ram": nbytes,
            "message_bytes_ready": q.message_bytes_ready,
            "message_bytes_unacknowledged": q.message_bytes_unacknowledged,
            "messages": messages,
            "messages_paged_out": 0,
            "messages_persistent": 0,
            "messages_ram": messages,
            "messages_ready": q.messages_ready,
            "messages_ready_ram": q.messages_ready,
            "messages_unacknowledged": q.messages_unacknowledged,
            "messages_unacknowledged_ram": q.messages_unacknowledged,
            "name": q.name,
            "node": self.state.queue_node(q.name),
            "operator_policy": None,
            "policy": self.state.queue_policy(q.vhost, q.name),
            "recoverable_slaves": None,
            "single_active_consumer_tag": q.single_active_consumer_tag,
            "state": "running",
            "type": "classic",
            "vhost": q.vhost,
        }
        with_rates(d, "messages", "messages_ready", "messages_unacknowledged", rates=q.rates)
        if q.stats:
            d["message_stats"] = with_rates(dict(q.stats), *q.stats, rates=q.rates)
        if q.owner is not None:
            d["owner_pid_details"] = {
                "name": q.owner.name,
                "peer_port": q.owner.peer_port,
                "peer_host": q.owner.peer_host,
            }
        if detail:
            d["consumer_details"] = [self.fmt_consumer(c) for c in q.consumers]
            d["deliveries"] = []
            d["incoming"] = []
        return d

    def fmt_consumer(self, c: ConsumerInfo) -> dict[str, Any]:
        return {
            "arguments": c.arguments,
            "ack_required": c.ack_required,
            "active": c.active,
            "activity_status": "up" if c.active else "waiting",
            "channel_details": {
                "connection_name": c.connection_name,
                "name": f"{c.connection_name} ({c.channel_number})",
                "node": self.state.node_name,
                "number": c.channel_number,
                "peer_host": c.peer_host,
                "peer_port": c.peer_port,
                "user": c.user,
            },
            "consumer_tag": c.tag,
            "exclusive": c.exclusive,
            "prefetch_count": c.prefetch_count,
            "queue": {"name": c.queue, "vhost": c.vhost},
        }

    @staticmethod
    def fmt_binding(b: BindingInfo) -> dict[str, Any]:
        return {
            "source": b.source,
            "vhost": b.vhost,
            "destination": b.destination,
            "destination_type": b.destination_type,
            "routing_key": b.routing_key,
            "arguments": b.arguments,
            "properties_key": b.properties_key,
        }

    def fmt_connection(self, c: ConnectionInfo) -> dict[str, Any]:
        return {
            "auth_mechanism": c.auth_mechanism,
            "channel_max": c.channel_max,
            "channels": c.channels,
            "frame_max": c.frame_max,
            "host": c.host,
            "name": c.name,
            "node": self.state.node_name,
            "peer_host": c.peer_host,
            "peer_port": c.peer_port,
            "port": c.port,
            "protocol": "AMQP 0-9-1",
            "ssl": False,
            "state": c.state,
            "timeout": c.timeout,
            "type": "network",
            "user": c.user,
            "vhost": c.vhost,
        }

    def fmt_vhost(self, name: str) -> dict[str, Any]:
        qs = self.state.queues(name)
        ready = sum(q.messages_ready for q in qs)
        unacked = sum(q.messages_unacknowledged for q in qs)
        description = "Default virtual host" if name == "/" else ""
        d: dict[str, Any] = {
            "cluster_state": {self.state.node_name: "running"},
            "default_queue_type": "undefined",
            "description": description,
            "message_stats": {},
            "messages": ready + unacked,
            "messages_ready": ready,
            "messages_unacknowledged": unacked,
            "metadata": {"description": description, "tags": []},
            "name": name,
            "tags": [],
            "tracing": False,
        }
        return with_rates(d, "messages", "messages_ready", "messages_unacknowledged")

    def exchange_types(self) -> list[dict[str, Any]]:
        return [
            {"name": t, "description": EXCHANGE_TYPE_DESCRIPTIONS.get(t, ""), "enabled": True}
            for t in self.state.exchange_types()
        ]

    def fmt_user(self, name: str) -> dict[str, Any]:
        u = self.state.broker.auth.users[name]
        return {
            "name": name,
            "password_hash": u.password_hash,
            "hashing_algorithm": u.hashing_algorithm,
            "tags": list(u.tags),
            "limits": {},
        }

    # -- read handlers --------------------------------------------------------------------------------

    async def get_overview(self, req: Request, segs: list[str]) -> Response:
        s = self.state
        qs = s.queues()
        ready = sum(q.messages_ready for q in qs)
        unacked = sum(q.messages_unacknowledged for q in qs)
        node = s.node_name
        return Response.json(
            {
                "management_version": s.compat_version,
                "rates_mode": "basic",
                "sample_retention_policies": {
                    "global": [600, 3600, 28800, 86400],
                    "basic": [600, 3600],
                    "detailed": [600],
                },
                "exchange_types": self.exchange_types(),
                "product_version": __version__,
                "product_name": "hashbroker",
                "rabbitmq_version": s.compat_version,
                "cluster_name": node,
                "erlang_version": f"none (Python {platform.python_version()})",
                "erlang_full_version": (
                    f"none ({platform.python_implementation()} {platform.python_version()})"
                ),
                "disable_stats": False,
                "enable_queue_totals": False,
                "message_stats": {},
                "churn_rates": {},
                "queue_totals": with_rates(
                    {
                        "messages": ready + unacked,
                        "messages_ready": ready,
                        "messages_unacknowledged": unacked,
                    },
                    "messages",
                    "messages_ready",
                    "messages_unacknowledged",
                    rates=s.totals_rates(),
                ),
                "object_totals": {
                    "channels": s.channel_count(),
                    "connections": len(s.connections()),
                    "consumers": sum(len(q.consumers) for q in qs),
                    "exchanges": len(s.exchanges()),
                    "queues": len(qs),
                },
                "statistics_db_event_queue": 0,
                "node": node,
                "listeners": [
                    {
                        "node": node,
                        "protocol": "amqp",
                        "ip_address": s.amqp_host,
                        "port": s.amqp_port,
                        "socket_opts": {},
                    },
                    {
                        "node": node,
                        "protocol": "http",
                        "ip_address": self.http_host,
                        "port": self.http_port,
                        "socket_opts": {},
                    },
                ],
                "contexts": [
                    {
                        "node": node,
                        "description": "RabbitMQ Management",
                        "path": "/",
                        "port": str(self.http_port),
                    }
                ],
            }
        )

    async def get_nodes(self, req: Request, segs: list[str]) -> Response:
        n = self.state.node()
        node = {
            "name": n.name,
            "type": "disc",
            "running": True,
            "os_pid": n.os_pid,
            "uptime": n.uptime_ms,
            "processors": n.processors,
            "rates_mode": "basic",
            "partitions": [],
            "mem_used": n.mem_used,
            "mem_alarm": False,
            "disk_free_alarm": False,
            "being_drained": False,
            "exchange_types": self.exchange_types(),
            "auth_mechanisms": [
                {"name": "PLAIN", "description": "SASL PLAIN authentication mechanism", "enabled": True},
                {"name": "AMQPLAIN", "description": "QPid AMQPLAIN mechanism", "enabled": True},
            ],
            "applications": [{"name": "hashbroker", "description": "hashbroker", "version": __version__}],
            "enabled_plugins": ["rabbitmq_management"],
        }
        cluster = getattr(self.state.broker, "cluster", None)  # issue 4: emulated cluster nodes
        nodes = [{**node, "name": name} for name in cluster.nodes] if cluster is not None else [node]
        if len(segs) == 2:
            found = [x for x in nodes if x["name"] == segs[1]]
            return Response.json(found[0]) if found else not_found()
        return Response.json(nodes)

    async def get_vhosts(self, req: Request, segs: list[str]) -> Response:
        if len(segs) == 2:
            return Response.json(self.fmt_vhost(segs[1])) if self.state.has_vhost(segs[1]) else not_found()
        return Response.json([self.fmt_vhost(v) for v in self.state.vhost_names()])

    async def get_users(self, req: Request, segs: list[str]) -> Response:
        if len(segs) == 2:
            return Response.json(self.fmt_user(segs[1])) if segs[1] in self.state.users() else not_found()
        return Response.json([self.fmt_user(u) for u in self.state.users()])

    async def get_whoami(self, req: Request, segs: list[str]) -> Response:
        user = req.user
        return Response.json({"name": user, "tags": self.state.user_tags(user)})

    def _perms(self, vhost: str | None = None, user: str | None = None) -> list[dict[str, Any]]:
        auth = self.state.broker.auth
        return [
            {"user": u, "vhost": v, "configure": p.configure, "write": p.write, "read": p.read}
            for (v, u), p in auth.permissions.items()
            if (vhost is None or v == vhost) and (user is None or u == user)
        ]

    async def get_permissions(self, req: Request, segs: list[str]) -> Response:
        return Response.json(self._perms())

    async def get_user_permissions(self, req: Request, segs: list[str]) -> Response:
        if segs[1] not in self.state.broker.auth.users:
            return not_found()
        return Response.json(self._perms(user=segs[1]))

    async def get_vhost_permissions(self, req: Request, segs: list[str]) -> Response:
        if not self.state.has_vhost(segs[1]):
            return not_found()
        return Response.json(
            [{"vhost": p["vhost"], "user": p["user"], **p} for p in self._perms(vhost=segs[1])]
        )

    async def get_connections(self, req: Request, segs: list[str]) -> Response:
        return Response.json([self.fmt_connection(c) for c in self.state.connections()])

    async def get_consumers(self, req: Request, segs: list[str]) -> Response:
        vhost = segs[1] if len(segs) == 2 else None
        if vhost is not None and not self.state.has_vhost(vhost):
            return not_found()
        return Response.json([self.fmt_consumer(c) for q in self.state.queues(vhost) for c in q.consumers])

    async def get_exchanges(self, req: Request, segs: list[str]) -> Response:
        if len(segs) >= 2 and not self.state.has_vhost(segs[1]):
            return not_found()
        if len(segs) == 3:
            e = self.state.exchange(segs[1], exchange_name(segs[2]))
            return Response.json(self.fmt_exchange(e, detail=True)) if e is not None else not_found()
        vhost = segs[1] if len(segs) == 2 else None
        return Response.json([self.fmt_exchange(e) for e in self.state.exchanges(vhost)])

    async def get_queues(self, req: Request, segs: list[str]) -> Response:
        if len(segs) >= 2 and not self.state.has_vhost(segs[1]):
            return not_found()
        if len(segs) == 3:
            q = self.state.queue(segs[1], segs[2])
            return Response.json(self.fmt_queue(q, detail=True)) if q is not None else not_found()
        vhost = segs[1] if len(segs) == 2 else None
        return Response.json([self.fmt_queue(q) for q in self.state.queues(vhost)])

    async def get_bindings(self, req: Request, segs: list[str]) -> Response:
        if len(segs) == 2 and not self.state.has_vhost(segs[1]):
            return not_found()
        vhost = segs[1] if len(segs) == 2 else None
        return Response.json([self.fmt_binding(b) for b in self.state.bindings(vhost)])

    async def get_queue_bindings(self, req: Request, segs: list[str]) -> Response:
        vhost, name = segs[1], segs[2]
        if self.state.queue(vhost, name) is None:
            return not_found()
        return Response.json(
            [
                self.fmt_binding(b)
                for b in self.state.bindings(vhost)
                if b.destination_type == "queue" and b.destination == name
            ]
        )

    async def get_exchange_bindings(self, req: Request, segs: list[str]) -> Response:
        vhost, name, side = segs[1], exchange_name(segs[2]), segs[4]
        if self.state.exchange(vhost, name) is None or name == "":
            return not_found()
        bs = self.state.bindings(vhost)
        if side == "source":
            picked = [b for b in bs if b.source == name]
        else:
            picked = [b for b in bs if b.destination_type == "exchange" and b.destination == name]
        return Response.json([self.fmt_binding(b) for b in picked])

    # -- write handlers -------------------------------------------------------------------------------

    async def put_queue(self, req: Request, segs: list[str]) -> Response:
        vhost, name = segs[1], segs[2]
        if not self.state.has_vhost(vhost):
            return not_found()
        body = _json_body(req)
        if isinstance(body, Response):
            return body
        existed = self.state.queue(vhost, name) is not None
        try:
            await self.run(
                amqp_ops.declare_queue,
                self.target(req, vhost),
                name,
                _bool(body, "durable"),
                _bool(body, "auto_delete"),
                body.get("arguments") or {},
            )
        except AmqpOpError as exc:
            return bad_request(exc.explanation)
        return Response(204 if existed else 201)

    async def delete_queue(self, req: Request, segs: list[str]) -> Response:
        vhost, name = segs[1], segs[2]
        if self.state.queue(vhost, name) is None:
            return not_found()
        try:
            await self.run(
                amqp_ops.delete_queue,
                self.target(req, vhost),
                name,
                _flag(req, "if-unused"),
                _flag(req, "if-empty"),
            )
        except AmqpOpError as exc:
            return bad_request(exc.explanation)
        return Response(204)

    async def purge_queue(self, req: Request, segs: list[str]) -> Response:
        vhost, name = segs[1], segs[2]
        if self.state.queue(vhost, name) is None:
            return not_found()
        try:
            await self.run(amqp_ops.purge_queue, self.target(req, vhost), name)
        except AmqpOpError as exc:
            return bad_request(exc.explanation)
        return Response(204)

    async def get_messages(self, req: Request, segs: list[str]) -> Response:
        vhost, name = segs[1], segs[2]
        if not self.state.has_vhost(vhost):
            return not_found()
        body = _json_body(req)
        if isinstance(body, Response):
            return body
        missing = [k for k in ("count", "ackmode", "encoding") if k not in body]
        if missing:
            return bad_request("[" + ",".join(f"{{key_missing,{k}}}" for k in missing) + "]")
        ackmode, encoding = body["ackmode"], body["encoding"]
        if encoding not in ("auto", "base64"):
            return bad_request("Unsupported encoding. Please use auto or base64.")
        if ackmode not in amqp_ops.ACK_MODES:
            return bad_request(f"unknown ackmode {ackmode!r}")
        try:
            count = int(body["count"])
            truncate = int(body["truncate"]) if body.get("truncate") not in (None, "") else None
        except (TypeError, ValueError):
            return bad_request("count and truncate must be integers")
        try:
            msgs = await self.run(
                amqp_ops.get_messages, self.target(req, vhost), name, count, ackmode, encoding, truncate
            )
        except AmqpOpError as exc:
            if exc.code == 404:
                return Response.json({"error": "not_found", "reason": exc.text}, 404)
            return bad_request(exc.explanation)
        return Response.json(msgs)

    async def put_exchange(self, req: Request, segs: list[str]) -> Response:
        vhost, name = segs[1], exchange_name(segs[2])
        if not self.state.has_vhost(vhost):
            return not_found()
        if name == "" or name.startswith("amq."):
            return access_refused()
        body = _json_body(req)
        if isinstance(body, Response):
            return body
        existed = self.state.exchange(vhost, name) is not None
        try:
            await self.run(
                amqp_ops.declare_exchange,
                self.target(req, vhost),
                name,
                body.get("type") or "direct",
                _bool(body, "durable"),
                _bool(body, "auto_delete"),
                _bool(body, "internal"),
                body.get("arguments") or {},
            )
        except AmqpOpError as exc:
            return bad_request(exc.explanation)
        return Response(204 if existed else 201)

    async def delete_exchange(self, req: Request, segs: list[str]) -> Response:
        vhost, name = segs[1], exchange_name(segs[2])
        if name == "" or name.startswith("amq."):
            return access_refused()
        if self.state.exchange(vhost, name) is None:
            return not_found()
        try:
            await self.run(amqp_ops.delete_exchange, self.target(req, vhost), name, _flag(req, "if-unused"))
        except AmqpOpError as exc:
            return bad_request(exc.explanation)
        return Response(204)

    async def publish(self, req: Request, segs: list[str]) -> Response:
        vhost, name = segs[1], exchange_name(segs[2])
        if not self.state.has_vhost(vhost):
            return not_found()
        body = _json_body(req)
        if isinstance(body, Response):
            return body
        missing = [k for k in ("routing_key", "properties", "payload", "payload_encoding") if k not in body]
        if missing:
            return bad_request("[" + ",".join(f"{{key_missing,{k}}}" for k in missing) + "]")
        enc = body["payload_encoding"]
        if enc == "string":
            payload = str(body["payload"]).encode("utf-8")
        elif enc == "base64":
            try:
                payload = base64.b64decode(str(body["payload"]), validate=True)
            except binascii.Error:
                return bad_request("not_base64")
        else:
            return bad_request(["unsupported_encoding", enc])
        props = body["properties"] if isinstance(body["properties"], dict) else {}
        if _has_null(props):
            return bad_request("null_not_allowed")
        try:
            routed = await self.run(
                amqp_ops.publish, self.target(req, vhost), name, str(body["routing_key"]), props, payload
            )
        except AmqpOpError as exc:
            return bad_request(f"{exc.code} {exc.text}")
        return Response.json({"routed": bool(routed)})

    # -- definitions ----------------------------------------------------------------------------------

    async def get_definitions(self, req: Request, segs: list[str]) -> Response:
        vhost = segs[1] if len(segs) == 2 else None
        if vhost is not None and not self.state.has_vhost(vhost):
            return not_found()
        users = [self.fmt_user(u) for u in self.state.users()]
        doc = definitions.export(self.state, self.policies.list(), users, vhost)
        if vhost is None:
            doc["permissions"] = self._perms()
        headers = {}
        if _flag(req, "download") or "download" in req.query:
            name = req.query.get("download", ["definitions.json"])[-1] or "definitions.json"
            headers["content-disposition"] = f'attachment; filename="{name}"'
        return Response.json(doc, 200, headers)

    async def post_definitions(self, req: Request, segs: list[str]) -> Response:
        """Import; 204 like RabbitMQ. Refused as a whole (400, nothing changed) if unsupported."""
        vhost = segs[1] if len(segs) == 2 else None
        if vhost is not None and not self.state.has_vhost(vhost):
            return not_found()
        try:
            doc = req.json()
        except (ValueError, UnicodeDecodeError):
            return bad_request("not_json")
        if isinstance(doc, dict) and isinstance(doc.get("file"), str):  # the web UI's form upload
            try:
                doc = json.loads(doc["file"])
            except ValueError:
                return bad_request("not_json")
        plan = definitions.plan_import(self.state, doc, vhost)
        if plan.problems:
            return bad_request("hashbroker cannot import these definitions:\n" + "\n".join(plan.problems))
        broker, auth = self.state.broker, self.state.broker.auth
        for u in plan.users:  # rabbit_definitions: users, vhosts, permissions, then the rest
            tags = parse_tags(u.get("tags", ""))
            auth.put_user(User(str(u["name"]), str(u.get("password_hash", "")), tags))
        for v in plan.new_vhosts:
            if broker.add_vhost(v) and req.user in auth.users and (v, req.user) not in auth.permissions:
                auth.set_permissions(v, req.user, ".*", ".*", ".*")
        for p in plan.permissions:
            auth.set_permissions(str(p["vhost"]), str(p["user"]), p["configure"], p["write"], p["read"])
        for vh in plan.vhosts():
            try:
                await self.run(
                    amqp_ops.apply_definitions,
                    self.target(req, vh),
                    plan.queues.get(vh, []),
                    plan.exchanges.get(vh, []),
                    plan.bindings.get(vh, []),
                )
            except DefinitionError as exc:
                return bad_request(f"{exc.item}: {exc.explanation}")
        for policy in plan.policies:  # after the entities, so a refused import adds no policy
            self.policies.put(policy)
        return Response(204)

    # -- policies -------------------------------------------------------------------------------------

    async def get_policies(self, req: Request, segs: list[str]) -> Response:
        if len(segs) >= 2 and not self.state.has_vhost(segs[1]):
            return not_found()
        if len(segs) == 3:
            p = self.policies.get(segs[1], segs[2])
            return Response.json(p.to_json()) if p is not None else not_found()
        vhost = segs[1] if len(segs) == 2 else None
        return Response.json([p.to_json() for p in self.policies.list(vhost)])

    async def put_policy(self, req: Request, segs: list[str]) -> Response:
        vhost, name = segs[1], segs[2]
        if not self.state.has_vhost(vhost):
            return not_found()
        body = _json_body(req)
        if isinstance(body, Response):
            return body
        try:
            policy = parse_policy(vhost, name, body)
            created = self.policies.put(policy)  # the broker's engine validates again (issue 4)
        except PolicyError as exc:
            return bad_request(str(exc))
        return Response(201 if created else 204)

    async def delete_policy(self, req: Request, segs: list[str]) -> Response:
        # RabbitMQ answers 204 for a policy that does not exist too
        if not self.state.has_vhost(segs[1]):
            return not_found()
        self.policies.delete(segs[1], segs[2])
        return Response(204)

    # -- bindings (write) -------------------------------------------------------------------------------

    async def get_binding_pair(self, req: Request, segs: list[str]) -> Response:
        """GET /api/bindings/{vhost}/e/{source}/{q|e}/{destination}[/{props}]."""
        vhost, source, kind, dest = segs[1], exchange_name(segs[3]), segs[4], segs[5]
        dtype = "queue" if kind == "q" else "exchange"
        if self.state.exchange(vhost, source) is None:
            return not_found()
        found = [
            self.fmt_binding(b)
            for b in self.state.bindings(vhost)
            if b.source == source and b.destination == dest and b.destination_type == dtype
        ]
        if len(segs) == 7:
            one = [b for b in found if b["properties_key"] == segs[6]]
            return Response.json(one[0]) if one else not_found()
        return Response.json(found)

    async def post_binding(self, req: Request, segs: list[str]) -> Response:
        vhost, source, kind, dest = segs[1], exchange_name(segs[3]), segs[4], segs[5]
        if kind not in ("q", "e"):
            return not_found()
        body = _json_body(req)
        if isinstance(body, Response):
            return body
        key = str(body.get("routing_key", ""))
        args = body.get("arguments") or {}
        try:
            await self.run(
                amqp_ops.bind,
                self.target(req, vhost),
                source,
                dest,
                "queue" if kind == "q" else "exchange",
                key,
                args,
            )
        except AmqpOpError as exc:
            if exc.code == 404:
                return not_found()
            return bad_request(exc.explanation)
        made = [
            b
            for b in self.state.bindings(vhost)
            if b.source == source and b.destination == dest and b.routing_key == key and b.arguments == args
        ]
        props = made[0].properties_key if made else ""
        parts = [
            "/api/bindings",
            quote_segment(vhost),
            "e",
            quote_segment(segs[3]),
            kind,
            quote_segment(dest),
        ]
        location = "/".join([*parts, props]) if props else "/".join(parts)
        return Response(201, b"", {"location": location})

    async def delete_binding(self, req: Request, segs: list[str]) -> Response:
        vhost, source, kind, dest, props = segs[1], exchange_name(segs[3]), segs[4], segs[5], segs[6]
        dtype = "queue" if kind == "q" else "exchange"
        match = [
            b
            for b in self.state.bindings(vhost)
            if b.source == source
            and b.destination == dest
            and b.destination_type == dtype
            and b.properties_key == props
        ]
        if not match:
            return not_found()
        b = match[0]
        try:
            await self.run(
                amqp_ops.unbind, self.target(req, vhost), source, dest, dtype, b.routing_key, b.arguments
            )
        except AmqpOpError as exc:
            return bad_request(exc.explanation)
        return Response(204)

    # -- vhosts / users / permissions ---------------------------------------------------------------

    async def put_vhost(self, req: Request, segs: list[str]) -> Response:
        body = _json_body(req) if req.body else {}
        if isinstance(body, Response):
            return body
        tags = body.get("tags", ())
        created = self.state.broker.add_vhost(
            segs[1], str(body.get("description", "")), parse_tags(tags) if tags else ()
        )
        if created:  # rabbit_vhost:add grants the creating user full permissions
            auth = self.state.broker.auth
            if req.user in auth.users and (segs[1], req.user) not in auth.permissions:
                auth.set_permissions(segs[1], req.user, ".*", ".*", ".*")
        return Response(201 if created else 204)

    async def delete_vhost(self, req: Request, segs: list[str]) -> Response:
        return Response(204) if self.state.broker.delete_vhost(segs[1]) else not_found()

    async def put_user(self, req: Request, segs: list[str]) -> Response:
        body = _json_body(req)
        if isinstance(body, Response):
            return body
        auth = self.state.broker.auth
        name = segs[1]
        old = auth.users.get(name)
        tags = parse_tags(body.get("tags", ""))
        if "password" in body:
            password_hash = hash_password(str(body["password"]))
        elif "password_hash" in body:
            password_hash = str(body["password_hash"])
            algo = body.get("hashing_algorithm", SHA256)
            if algo != SHA256:
                return bad_request(f"hashbroker supports only {SHA256} password hashes")
        elif old is not None:
            password_hash = old.password_hash
        else:
            return bad_request("[{key_missing,password}]")
        auth.put_user(User(name, password_hash, tags))
        return Response(204 if old is not None else 201)

    async def delete_user(self, req: Request, segs: list[str]) -> Response:
        return Response(204) if self.state.broker.auth.delete_user(segs[1]) else not_found()

    async def get_permission(self, req: Request, segs: list[str]) -> Response:
        found = self._perms(vhost=segs[1], user=segs[2])
        return Response.json(found[0]) if found else not_found()

    async def put_permission(self, req: Request, segs: list[str]) -> Response:
        vhost, user = segs[1], segs[2]
        auth = self.state.broker.auth
        if not self.state.has_vhost(vhost) or user not in auth.users:
            return bad_request("vhost_or_user_not_found")
        body = _json_body(req)
        if isinstance(body, Response):
            return body
        missing = [k for k in ("configure", "write", "read") if k not in body]
        if missing:
            return bad_request("[" + ",".join(f"{{key_missing,{k}}}" for k in missing) + "]")
        existed = (vhost, user) in auth.permissions
        try:
            auth.set_permissions(vhost, user, str(body["configure"]), str(body["write"]), str(body["read"]))
        except RegexError as exc:
            return bad_request(str(exc))
        return Response(204 if existed else 201)

    async def delete_permission(self, req: Request, segs: list[str]) -> Response:
        return Response(204) if self.state.broker.auth.clear_permissions(segs[1], segs[2]) else not_found()

    # -- hashbroker-specific --------------------------------------------------------------------------

    async def get_cluster_nodes(self, req: Request, segs: list[str]) -> Response:
        """GET /api/hashbroker/nodes: the emulated cluster (issue 4)."""
        cluster = self.state.broker.cluster
        return Response.json({"local": cluster.local, "nodes": cluster.nodes})

    async def post_cluster_node(self, req: Request, segs: list[str]) -> Response:
        """POST /api/hashbroker/nodes/{name}: a node joins; sharded exchanges get its shards."""
        from broker.cluster import ClusterError

        try:
            added = self.state.broker.policies.add_node(segs[2])
        except ClusterError as exc:
            return bad_request(str(exc))
        return Response(201 if added else 204)

    async def delete_cluster_node(self, req: Request, segs: list[str]) -> Response:
        """DELETE /api/hashbroker/nodes/{name}: a node leaves (its shard queues stay)."""
        from broker.cluster import ClusterError

        try:
            self.state.broker.policies.remove_node(segs[2])
        except ClusterError as exc:
            return not_found() if "not a cluster node" in str(exc) else bad_request(str(exc))
        return Response(204)

    async def get_ring(self, req: Request, segs: list[str]) -> Response:
        """GET /api/hashbroker/exchanges/{vhost}/{name}/ring: the routing state for the dashboard.

        For x-consistent-hash: the ring's runs (`segments`: [first, count, kind, name]), plus
        per-destination bucket counts, the share of messages the weights predict, and each
        queue's current message count.
        """
        vhost, name = segs[2], exchange_name(segs[3])
        e = self.state.exchange(vhost, name)
        summary = self.state.routing_state(vhost, name)
        if e is None or summary is None:
            return not_found()
        raw = summary.get("segments")
        segments: list[Any] = raw if isinstance(raw, list) else []
        total = sum(count for _first, count, _kind, _dest in segments)
        queues = {q.name: q for q in self.state.queues(vhost)}
        destinations = []
        for first, count, kind, dest in segments:
            q = queues.get(dest) if kind == "queue" else None
            destinations.append(
                {
                    "kind": kind,
                    "name": dest,
                    "buckets": count,
                    "first_bucket": first,
                    "share": count / total if total else 0.0,
                    "messages": (q.messages_ready + q.messages_unacknowledged) if q is not None else None,
                }
            )
        destinations.sort(key=lambda d: d["first_bucket"])
        return Response.json(
            {
                "vhost": vhost,
                "name": name,
                "type": e.type,
                "arguments": e.arguments,
                "state": summary,
                "ring_size": total,
                "destinations": destinations,
            }
        )


def _json_body(req: Request) -> dict[str, Any] | Response:
    try:
        body = req.json()
    except (ValueError, UnicodeDecodeError):
        return bad_request("not_json")
    return body if isinstance(body, dict) else bad_request("not_json")


def _bool(body: dict[str, Any], key: str) -> bool:
    v = body.get(key, False)
    return v in (True, "true")


def _flag(req: Request, key: str) -> bool:
    return req.query.get(key, ["false"])[-1].lower() == "true"


def _has_null(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, dict):
        return any(_has_null(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_null(v) for v in value)
    return False


def quote_segment(segment: str) -> str:
    """Percent-encode one URL path segment the way RabbitMQ writes them ("/" as %2F)."""
    from urllib.parse import quote

    return quote(segment, safe="")


def _policy_backend(state: BrokerState) -> Any:
    """The broker's own policy store if it offers list/get/put/delete; else the management one."""
    native = state.native_policies()
    if native is not None and all(hasattr(native, m) for m in ("list", "get", "put", "delete")):
        return native
    return PolicyStore()


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return host in ("localhost", "")


ROUTES: list[tuple[tuple[str, ...], dict[str, Route]]] = [
    (("overview",), {"GET": Api.get_overview}),
    (("nodes",), {"GET": Api.get_nodes}),
    (("nodes", "*"), {"GET": Api.get_nodes}),
    (("vhosts",), {"GET": Api.get_vhosts}),
    (("vhosts", "*"), {"GET": Api.get_vhosts, "PUT": Api.put_vhost, "DELETE": Api.delete_vhost}),
    (("vhosts", "*", "permissions"), {"GET": Api.get_vhost_permissions}),
    (("users",), {"GET": Api.get_users}),
    (("users", "*"), {"GET": Api.get_users, "PUT": Api.put_user, "DELETE": Api.delete_user}),
    (("users", "*", "permissions"), {"GET": Api.get_user_permissions}),
    (("whoami",), {"GET": Api.get_whoami}),
    (("permissions",), {"GET": Api.get_permissions}),
    (("connections",), {"GET": Api.get_connections}),
    (("consumers",), {"GET": Api.get_consumers}),
    (("consumers", "*"), {"GET": Api.get_consumers}),
    (("exchanges",), {"GET": Api.get_exchanges}),
    (("exchanges", "*"), {"GET": Api.get_exchanges}),
    (
        ("exchanges", "*", "*"),
        {"GET": Api.get_exchanges, "PUT": Api.put_exchange, "DELETE": Api.delete_exchange},
    ),
    (("exchanges", "*", "*", "publish"), {"POST": Api.publish}),
    (("exchanges", "*", "*", "bindings", "source"), {"GET": Api.get_exchange_bindings}),
    (("exchanges", "*", "*", "bindings", "destination"), {"GET": Api.get_exchange_bindings}),
    (("queues",), {"GET": Api.get_queues}),
    (("queues", "*"), {"GET": Api.get_queues}),
    (("queues", "*", "*"), {"GET": Api.get_queues, "PUT": Api.put_queue, "DELETE": Api.delete_queue}),
    (("queues", "*", "*", "contents"), {"DELETE": Api.purge_queue}),
    (("queues", "*", "*", "get"), {"POST": Api.get_messages}),
    (("queues", "*", "*", "bindings"), {"GET": Api.get_queue_bindings}),
    (("bindings",), {"GET": Api.get_bindings}),
    (("bindings", "*"), {"GET": Api.get_bindings}),
    (("bindings", "*", "e", "*", "*", "*"), {"GET": Api.get_binding_pair, "POST": Api.post_binding}),
    (("bindings", "*", "e", "*", "*", "*", "*"), {"GET": Api.get_binding_pair, "DELETE": Api.delete_binding}),
    (
        ("permissions", "*", "*"),
        {"GET": Api.get_permission, "PUT": Api.put_permission, "DELETE": Api.delete_permission},
    ),
    (("definitions",), {"GET": Api.get_definitions, "POST": Api.post_definitions}),
    (("definitions", "*"), {"GET": Api.get_definitions, "POST": Api.post_definitions}),
    (("policies",), {"GET": Api.get_policies}),
    (("policies", "*"), {"GET": Api.get_policies}),
    (("policies", "*", "*"), {"GET": Api.get_policies, "PUT": Api.put_policy, "DELETE": Api.delete_policy}),
    (("hashbroker", "exchanges", "*", "*", "ring"), {"GET": Api.get_ring}),
    (("hashbroker", "nodes"), {"GET": Api.get_cluster_nodes}),
    (("hashbroker", "nodes", "*"), {"POST": Api.post_cluster_node, "DELETE": Api.delete_cluster_node}),
]
