"""Observable behaviour of RabbitMQ 3.10.8 quorum queues and streams, as differential scenarios.

Each scenario is ``def scenario_x(ctx: QsCtx) -> Observation``: ``ctx.connect()`` is the pika
BlockingConnection factory, ``ctx.queue(label)`` / ``ctx.exchange(label)`` give unique names under the
run's ``qsobs-<run>-`` prefix (deleted at the end, scrubbed to ``<label>`` in the observation),
``ctx.mgmt_get(path)`` reads the management API and ``ctx.raw()`` opens a raw-socket client for the
cases where the exact bytes matter (field-table type tags). The observation is plain JSON.

Why a separate registry: quorum queues and streams need a queue-type interface that hashbroker does
not have yet. The scenarios are recorded against RabbitMQ by ``tools/probe_quorum_streams.py`` into
``tests/data/quorum_stream_observations.json``, so the implementation can be checked against the
recording (or run differentially with ``run_differential``) as soon as it exists. Volatile values
(node-local pids, timestamps, generated names) are reduced to their type or to placeholders.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import struct
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any

import pika
import pika.exceptions
import pika.spec
from pamqp import commands
from pamqp import frame as pframe

from tests import conftest
from tests.differential_support import (
    Ctx,
    Observation,
    Registry,
    jsonable,
    props_obs,
    run_bounded,
    scrub,
    x_death_obs,
)

PREFIX = "qsobs-"
MGMT_URL = conftest.RABBITMQ_API
#: Scenarios here wait for expiries and stream reads; give them more than the core default.
QS_TIMEOUT = 90.0
#: How long to pump the connection for deliveries that must arrive.
WAIT = 3.0

# --------------------------------------------------------------------------------------------------
# close-frame capture: pika hides class-id/method-id of channel.close / connection.close
# --------------------------------------------------------------------------------------------------

_LAST_CLOSE: dict[str, Any] = {}


def _capture(cls: Any, slot: str) -> None:
    """Wrap ``cls.decode`` (once) so the last decoded close frame is remembered under ``slot``."""
    if getattr(cls.decode, "_qsobs", False):
        return
    original: Callable[..., Any] = cls.decode

    def decode(self: Any, encoded: bytes, offset: int = 0) -> Any:
        result = original(self, encoded, offset)
        _LAST_CLOSE[slot] = self
        return result

    decode._qsobs = True  # type: ignore[attr-defined]
    cls.decode = decode


_capture(pika.spec.Channel.Close, "channel")
_capture(pika.spec.Connection.Close, "connection")


def attempt(fn: Callable[[], Any]) -> dict[str, Any]:
    """Run one client call: its result, or the close it provoked as [code, text, class_id, method_id]."""
    _LAST_CLOSE.clear()
    try:
        result = fn()
    except (pika.exceptions.ChannelClosedByBroker, pika.exceptions.ConnectionClosedByBroker) as exc:
        kind = "channel" if isinstance(exc, pika.exceptions.ChannelClosedByBroker) else "connection"
        close = _LAST_CLOSE.get(kind)
        fields = [
            exc.reply_code,
            exc.reply_text,
            getattr(close, "class_id", None),
            getattr(close, "method_id", None),
        ]
        return {f"{kind}_close": fields}
    method = getattr(result, "method", None)
    if method is not None and hasattr(method, "NAME"):
        return {"ok": method_fields(method)}
    return {"ok": jsonable(result)}


def method_fields(method: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"method": method.NAME}
    out.update({k: jsonable(v) for k, v in sorted(vars(method).items())})
    return out


# --------------------------------------------------------------------------------------------------
# context
# --------------------------------------------------------------------------------------------------


def shape(value: Any) -> Any:
    """The JSON type of a volatile value (kept instead of the value so that the shape is compared)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(v) for v in value[:1]]
    return type(value).__name__


@dataclass
class QsCtx(Ctx):
    """A :class:`Ctx` with the ``qsobs-`` prefix, the management API and policy cleanup."""

    mgmt_url: str = MGMT_URL
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    policies: list[str] = field(default_factory=list)
    node_names: dict[str, str] = field(default_factory=dict)

    def name_for(self, label: str) -> str:
        # the label comes right after the shared run id: names sort by label (modulus-hash depends
        # on the order of the bound queues' names)
        real = f"{PREFIX}{self.run}-{label}"
        assert real not in self.names, real
        self.names[real] = f"<{label}>"
        return real

    # management -------------------------------------------------------------------------------------
    def api_request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        user, password = "guest", "guest"
        parsed = urllib.parse.urlparse(self.url)
        if parsed.username:
            user, password = (
                urllib.parse.unquote(parsed.username),
                urllib.parse.unquote(parsed.password or ""),
            )
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.mgmt_url + path, data=data, method=method)
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                return exc.code, json.loads(raw)
            except ValueError:
                return exc.code, raw.decode(errors="replace")

    def mgmt_get(self, path: str) -> Any:
        status, body = self.api_request("GET", path)
        assert status == 200, (path, status, body)
        return body

    def mgmt_queue(self, name: str) -> dict[str, Any]:
        """The management view of a queue; waits while the management database has not seen it yet."""
        path = f"/api/queues/%2F/{urllib.parse.quote(name, safe='')}"
        deadline = time.monotonic() + 15
        status, body = self.api_request("GET", path)
        while status == 404 and time.monotonic() < deadline:
            time.sleep(0.3)
            status, body = self.api_request("GET", path)
        assert status == 200, (path, status, body)
        return dict(body)

    def node(self, name: str) -> str:
        """Scrub an Erlang node name to ``<nodeN>`` (emulated clusters name their nodes differently)."""
        if name not in self.node_names:
            self.node_names[name] = f"<node{len(self.node_names)}>"
            self.names[name] = self.node_names[name]
        return name

    def set_policy(self, label: str, pattern: str, definition: dict[str, Any], apply_to: str) -> Any:
        name = self.name_for(label)
        self.policies.append(name)
        body = {"pattern": pattern, "definition": definition, "apply-to": apply_to, "priority": 0}
        return self.api_request("PUT", f"/api/policies/%2F/{urllib.parse.quote(name, safe='')}", body)

    def cleanup(self) -> None:
        super().cleanup()
        for name in self.policies:
            with contextlib.suppress(Exception):
                self.api_request("DELETE", f"/api/policies/%2F/{urllib.parse.quote(name, safe='')}")


_PIKA_CTAG = re.compile(r"ctag\d+\.[0-9a-f]{32}")


def scrub_ctags(value: Any) -> Any:
    """Replace pika's generated consumer tags (``ctag1.<uuid hex>``) by a placeholder."""
    if isinstance(value, dict):
        return {scrub_ctags(k): scrub_ctags(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_ctags(v) for v in value]
    if isinstance(value, str):
        return _PIKA_CTAG.sub("<client-ctag>", value)
    return value


class QsRegistry(Registry):
    """A :class:`Registry` whose scenarios run with a :class:`QsCtx`."""

    def __init__(self, mgmt_url: str = MGMT_URL) -> None:
        super().__init__()
        self.mgmt_url = mgmt_url
        #: AMQP URL -> management base URL, for subjects whose management API is not ``mgmt_url``
        #: (a differential run talks to two brokers through the same registry).
        self.mgmt_urls: dict[str, str] = {}

    def run(self, name: str, url: str, timeout: float = QS_TIMEOUT) -> Observation:
        ctx = QsCtx(url, mgmt_url=self.mgmt_urls.get(url, self.mgmt_url))
        try:
            obs = run_bounded(lambda: self.scenarios[name](ctx), timeout, f"scenario {name!r}")
            return scrub_ctags(scrub(jsonable(obs), ctx.names))
        finally:
            with contextlib.suppress(Exception):
                run_bounded(ctx.cleanup, 20, "cleanup")


registry = QsRegistry()
scenario = registry.scenario

#: tools/probe_quorum_streams.py's recording of these scenarios on RabbitMQ 3.10.8.
RECORDING = Path(__file__).resolve().parent / "data" / "quorum_stream_observations.json"


@cache
def recorded() -> dict[str, Any]:
    """The recorded observations, by scenario name."""
    data: dict[str, Any] = json.loads(RECORDING.read_text())
    return data


@contextlib.contextmanager
def embedded_broker() -> Iterator[str]:
    """An embedded hashbroker whose management API the registry knows; its AMQP URL."""
    from broker.embedded import BrokerThread

    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        registry.mgmt_urls[b.url] = str(b.broker.management.url)
        yield b.url


QQ = {"x-queue-type": "quorum"}
ST = {"x-queue-type": "stream"}

# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------


def declare_cases(
    ctx: QsCtx, cases: dict[str, dict[str, Any]], *, base: dict[str, Any], mgmt: bool = False
) -> dict[str, Any]:
    """queue.declare one fresh queue per case (kwargs for queue_declare merged over ``base``)."""
    out: dict[str, Any] = {}
    conn = ctx.connect()
    for label, kwargs in cases.items():
        name = ctx.queue(label)
        args = {**base.get("arguments", {}), **kwargs.get("arguments", {})}
        call = {"durable": True, **{k: v for k, v in kwargs.items() if k != "arguments"}}
        ch = conn.channel()
        res = attempt(
            lambda ch=ch, name=name, args=args, call=call: ch.queue_declare(name, arguments=args, **call)
        )
        if mgmt and "ok" in res:
            q = ctx.mgmt_queue(name)
            res["mgmt"] = {k: q.get(k) for k in ("type", "arguments", "durable", "auto_delete", "exclusive")}
        out[label] = res
        if conn.is_closed:
            conn = ctx.connect()
        elif ch.is_open:
            ch.close()
    return out


def confirm_channel(conn: pika.BlockingConnection) -> Any:
    ch = conn.channel()
    ch.confirm_delivery()
    return ch


def publish_confirmed(ch: Any, queue: str, bodies: list[str], **props: Any) -> list[str]:
    """Publish each body to ``queue`` on a confirm channel; 'ack' or 'nack' per message."""
    out = []
    for body in bodies:
        try:
            ch.basic_publish("", queue, body.encode(), pika.BasicProperties(**props))
            out.append("ack")
        except pika.exceptions.NackError:
            out.append("nack")
    return out


def connect_confirming(ctx: Any) -> tuple[pika.BlockingConnection, Any]:
    """A new connection and a confirming channel on it."""
    conn = ctx.connect()
    return conn, confirm_channel(conn)


def declare_argument_cases(ctx: QsCtx, cases: dict[str, dict[str, Any]], arguments: dict[str, Any]) -> Any:
    """`declare_cases` (management view included) of one queue per case, declared with the case's
    x-arguments over the queue type's `arguments`."""
    return declare_cases(
        ctx, {k: {"arguments": v} for k, v in cases.items()}, base={"arguments": arguments}, mgmt=True
    )


def durable_queue_with(
    ctx: Any, label: str, arguments: dict[str, Any], bodies: list[str] | None = None, **props: Any
) -> tuple[pika.BlockingConnection, Any, str]:
    """A new connection, a confirming channel on it and a durable queue `label` declared with
    `arguments` (its type), holding `bodies` published with `props` (each confirmed)."""
    conn, ch = connect_confirming(ctx)
    q = ctx.queue(label)
    ch.queue_declare(q, durable=True, arguments=arguments)
    if bodies is not None:
        publish_confirmed(ch, q, bodies, **props)
    return conn, ch, q


def delivery_obs(method: Any, props: Any, body: bytes, *, headers_only: bool = False) -> dict[str, Any]:
    """One delivery (basic.deliver or basic.get-ok) with its properties."""
    out: dict[str, Any] = {"body": body.decode(errors="replace"), "redelivered": method.redelivered}
    if hasattr(method, "message_count"):
        out["message_count"] = method.message_count
    out["headers"] = headers_obs(props.headers)
    if not headers_only:
        out["props"] = props_obs(props, drop_headers=("x-death",))
    return out


def headers_obs(headers: dict[str, Any] | None) -> Any:
    """Headers as JSON, x-death with its wall-clock ``time`` reduced to its presence."""
    if headers is None:
        return None
    out = jsonable(headers)
    if "x-death" in headers:
        out["x-death"] = x_death_obs(headers)
    return out


def get(ch: Any, queue: str, **kw: Any) -> tuple[Any, dict[str, Any] | None]:
    method, props, body = ch.basic_get(queue, auto_ack=False)
    if method is None:
        return None, None
    return method, delivery_obs(method, props, body, **kw)


def drain(ch: Any, queue: str, **kw: Any) -> list[dict[str, Any]]:
    """basic.get + ack until empty."""
    out = []
    for _ in range(10_000):
        method, obs = get(ch, queue, **kw)
        if method is None:
            break
        out.append(obs)
        ch.basic_ack(method.delivery_tag)
    return out


def count(ch: Any, queue: str) -> int:
    return int(ch.queue_declare(queue, passive=True).method.message_count)


def wait_count(ch: Any, queue: str, want: int, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    seen = count(ch, queue)
    while seen != want and time.monotonic() < deadline:
        time.sleep(0.1)
        seen = count(ch, queue)
    return seen


class Collector:
    """basic.consume callback that keeps every delivery (and the consumer tag it came on)."""

    def __init__(self) -> None:
        self.items: list[tuple[Any, Any, bytes]] = []

    def __call__(self, ch: Any, method: Any, props: Any, body: bytes) -> None:
        self.items.append((method, props, body))

    def wait(self, conn: pika.BlockingConnection, n: int, timeout: float = WAIT) -> None:
        deadline = time.monotonic() + timeout
        while len(self.items) < n and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.05)

    def settle(self, conn: pika.BlockingConnection, quiet: float = 0.5) -> None:
        """Pump until no new delivery arrived for ``quiet`` seconds."""
        seen = -1
        while seen != len(self.items):
            seen = len(self.items)
            conn.process_data_events(time_limit=quiet)

    def bodies(self) -> list[str]:
        return [b.decode() for _, _, b in self.items]


def stream_count(result: dict[str, Any]) -> dict[str, Any]:
    """A stream's Declare-Ok ``message_count`` is the leader's committed-message counter, which lags
    behind confirmed publishes by a timing-dependent amount: keep only its type."""
    ok = result.get("ok")
    if isinstance(ok, dict) and "message_count" in ok:
        ok["message_count"] = type(ok["message_count"]).__name__
    return result


def stream_offsets(items: list[tuple[Any, Any, bytes]]) -> list[Any]:
    return [(p.headers or {}).get("x-stream-offset") for _, p, _ in items]


# --------------------------------------------------------------------------------------------------
# quorum queues: declaration
# --------------------------------------------------------------------------------------------------


#: queue.declare flag combinations every queue type is declared with.
DECLARE_FLAGS: dict[str, dict[str, Any]] = {
    "durable": {},
    "transient": {"durable": False},
    "exclusive": {"exclusive": True},
    "autodelete": {"auto_delete": True},
}


@scenario
def scenario_qq_declare_flags(ctx: QsCtx) -> Observation:
    """durable / exclusive / auto-delete combinations for x-queue-type quorum."""
    return declare_cases(
        ctx,
        {**DECLARE_FLAGS, "transient_exclusive": {"durable": False, "exclusive": True}},
        base={"arguments": QQ},
        mgmt=True,
    )


@scenario
def scenario_qq_declare_arguments(ctx: QsCtx) -> Observation:
    """Every x-argument a quorum queue accepts or refuses, with good and bad values."""
    cases: dict[str, dict[str, Any]] = {
        "max_priority": {"x-max-priority": 10},
        "queue_mode_lazy": {"x-queue-mode": "lazy"},
        "queue_version": {"x-queue-version": 2},
        "master_locator": {"x-queue-master-locator": "min-masters"},
        "leader_locator_client_local": {"x-queue-leader-locator": "client-local"},
        "leader_locator_balanced": {"x-queue-leader-locator": "balanced"},
        "leader_locator_bad": {"x-queue-leader-locator": "nowhere"},
        "initial_group_size_1": {"x-quorum-initial-group-size": 1},
        "initial_group_size_3": {"x-quorum-initial-group-size": 3},
        "initial_group_size_0": {"x-quorum-initial-group-size": 0},
        "initial_group_size_str": {"x-quorum-initial-group-size": "3"},
        "delivery_limit_5": {"x-delivery-limit": 5},
        "delivery_limit_0": {"x-delivery-limit": 0},
        "delivery_limit_neg": {"x-delivery-limit": -1},
        "delivery_limit_str": {"x-delivery-limit": "5"},
        "overflow_drop_head": {"x-overflow": "drop-head"},
        "overflow_reject_publish": {"x-overflow": "reject-publish"},
        "overflow_reject_publish_dlx": {"x-overflow": "reject-publish-dlx"},
        "overflow_bad": {"x-overflow": "nope"},
        "max_length": {"x-max-length": 10},
        "max_length_neg": {"x-max-length": -1},
        "max_length_bytes": {"x-max-length-bytes": 1000},
        "message_ttl": {"x-message-ttl": 1000},
        "message_ttl_neg": {"x-message-ttl": -1},
        "expires": {"x-expires": 1000},
        "expires_0": {"x-expires": 0},
        "dlx": {"x-dead-letter-exchange": "amq.fanout", "x-dead-letter-routing-key": "k"},
        "dl_strategy_at_most_once": {"x-dead-letter-strategy": "at-most-once"},
        "dl_strategy_at_least_once": {
            "x-dead-letter-strategy": "at-least-once",
            "x-overflow": "reject-publish",
            "x-dead-letter-exchange": "amq.fanout",
        },
        "dl_strategy_at_least_once_drop_head": {
            "x-dead-letter-strategy": "at-least-once",
            "x-dead-letter-exchange": "amq.fanout",
        },
        "dl_strategy_bad": {"x-dead-letter-strategy": "sometimes"},
        "single_active_consumer": {"x-single-active-consumer": True},
        "single_active_consumer_str": {"x-single-active-consumer": "true"},
        "max_in_memory_length": {"x-max-in-memory-length": 5},
        "max_in_memory_bytes": {"x-max-in-memory-bytes": 5000},
        "stream_max_age": {"x-max-age": "1h"},
        "stream_segment": {"x-stream-max-segment-size-bytes": 1000},
        "initial_cluster_size": {"x-initial-cluster-size": 1},
        "ha_unknown_x_arg": {"x-whatever": 1},
        "queue_type_bad": {"x-queue-type": "Quorum"},
        "queue_type_bytes": {"x-queue-type": b"quorum"},
        # x-max-age is not a quorum argument: its value is not validated, the key is refused
        "stream_max_age_bad_value": {"x-max-age": "1x"},
        # validators run before the unsupported-key check, in RabbitMQ's fixed order
        "unsupported_then_bad_value": {"x-max-priority": 5, "x-max-length": -1},
        "two_unsupported_priority_first": {"x-max-priority": 5, "x-queue-mode": "lazy"},
        "two_unsupported_mode_first": {"x-queue-mode": "lazy", "x-max-priority": 5},
        "two_bad_values": {"x-overflow": "nope", "x-max-length": -1},
    }
    return declare_argument_cases(ctx, cases, QQ)


@scenario
def scenario_qq_declare_ok_and_passive(ctx: QsCtx) -> Observation:
    """Declare-Ok fields of a new, a redeclared and a passively declared quorum queue, 2 messages in."""
    conn, ch = connect_confirming(ctx)
    q = ctx.queue("q")
    first = attempt(lambda: ch.queue_declare(q, durable=True, arguments=QQ))
    publish_confirmed(ch, q, ["a", "b"])
    again = attempt(lambda: ch.queue_declare(q, durable=True, arguments=QQ))
    passive = attempt(lambda: ch.queue_declare(q, passive=True))
    ch.basic_qos(prefetch_count=10)
    col = Collector()
    ch.basic_consume(q, col)
    col.wait(conn, 2)
    with_consumer = attempt(lambda: ch.queue_declare(q, passive=True))
    empty_name = attempt(lambda: conn.channel().queue_declare("", durable=True, arguments=QQ))
    return {
        "first": first,
        "redeclare": again,
        "passive": passive,
        "passive_with_consumer_2_unacked": with_consumer,
        "server_named": empty_name,
    }


@scenario
def scenario_qq_redeclare_equivalence(ctx: QsCtx) -> Observation:
    """Redeclaring quorum and classic queues with other types/arguments."""
    conn = ctx.connect()
    out: dict[str, Any] = {}
    q = ctx.queue("qq")
    conn.channel().queue_declare(q, durable=True, arguments={**QQ, "x-delivery-limit": 3})
    cases: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
        "qq_same": (q, {**QQ, "x-delivery-limit": 3}, {}),
        "qq_without_type": (q, {"x-delivery-limit": 3}, {}),
        "qq_as_classic": (q, {"x-queue-type": "classic", "x-delivery-limit": 3}, {}),
        "qq_as_stream": (q, {"x-queue-type": "stream"}, {}),
        "qq_other_limit": (q, {**QQ, "x-delivery-limit": 4}, {}),
        "qq_without_limit": (q, QQ, {}),
        "qq_extra_arg": (q, {**QQ, "x-delivery-limit": 3, "x-max-length": 5}, {}),
        "qq_transient": (q, {**QQ, "x-delivery-limit": 3}, {"durable": False}),
        "qq_group_size": (q, {**QQ, "x-delivery-limit": 3, "x-quorum-initial-group-size": 3}, {}),
    }
    c1 = ctx.queue("classic_typed")
    conn.channel().queue_declare(c1, durable=True, arguments={"x-queue-type": "classic"})
    c2 = ctx.queue("classic_untyped")
    conn.channel().queue_declare(c2, durable=True)
    cases.update(
        {
            "classic_typed_without_type": (c1, {}, {}),
            "classic_typed_as_quorum": (c1, QQ, {}),
            "classic_untyped_with_classic_type": (c2, {"x-queue-type": "classic"}, {}),
            "classic_untyped_as_quorum": (c2, QQ, {}),
            "classic_untyped_as_stream": (c2, ST, {}),
        }
    )
    for label, (name, args, kw) in cases.items():
        ch = conn.channel()
        call = {"durable": True, **kw}
        out[label] = attempt(
            lambda ch=ch, name=name, args=args, call=call: ch.queue_declare(name, arguments=args, **call)
        )
        if conn.is_closed:
            conn = ctx.connect()
    out["mgmt_classic_typed"] = {k: ctx.mgmt_queue(c1).get(k) for k in ("type", "arguments")}
    out["mgmt_classic_untyped"] = {k: ctx.mgmt_queue(c2).get(k) for k in ("type", "arguments")}
    return out


def _mgmt_queue_obs(ctx: QsCtx, name: str, want_messages: int, keep: tuple[str, ...]) -> dict[str, Any]:
    """Management fields of a queue once its message stats have caught up (they lag by ~5 s)."""
    # the object is assembled from several stats tables that arrive independently
    required = ("consumers", "state", "memory", "policy", "node", "members", "messages")

    def complete(q: dict[str, Any]) -> bool:
        return q.get("messages") == want_messages and all(k in q for k in required)

    deadline = time.monotonic() + 30
    q = ctx.mgmt_queue(name)
    while not complete(q) and time.monotonic() < deadline:
        time.sleep(0.5)
        q = ctx.mgmt_queue(name)
    for key in ("leader", "node"):
        if isinstance(q.get(key), str):
            ctx.node(q[key])
    for key in ("members", "online"):
        for n in q.get(key) or []:
            ctx.node(n)
    out = {k: q.get(k, "<absent>") for k in keep}
    out["keys"] = sorted(q)
    out["shape"] = shape({k: v for k, v in q.items() if k not in keep})
    return out


def _mgmt_wait_key(ctx: QsCtx, name: str, key: str) -> dict[str, Any]:
    """The management view of a queue once ``key`` is in it (stats-based fields appear late)."""
    deadline = time.monotonic() + 20
    q = ctx.mgmt_queue(name)
    while not (key in q and "effective_policy_definition" in q) and time.monotonic() < deadline:
        time.sleep(0.5)
        q = ctx.mgmt_queue(name)
    return q


#: What describes a queue of any type, its replicas included, in the management API and in ctl.
QUEUE_DESCRIPTION = (
    "type",
    "durable",
    "auto_delete",
    "exclusive",
    "arguments",
    "leader",
    "members",
    "online",
)
QQ_MGMT_KEYS = (
    "name",
    "vhost",
    *QUEUE_DESCRIPTION,
    "node",
    "messages",
    "messages_ready",
    "messages_unacknowledged",
    "consumers",
    "policy",
    "effective_policy_definition",
    "state",
    "single_active_consumer_ctag",
    "open_files",
    "exclusive_consumer_tag",
)


@scenario
def scenario_qq_management_fields(ctx: QsCtx) -> Observation:
    """Management API view of a quorum queue with 3 messages (1 unacked by a consumer)."""
    conn, _ch, q = durable_queue_with(
        ctx, "q", {**QQ, "x-delivery-limit": 2, "x-max-length": 100}, ["a", "b", "c"]
    )
    ch2 = conn.channel()
    ch2.basic_qos(prefetch_count=1)
    col = Collector()
    ch2.basic_consume(q, col, consumer_tag="qsobs-ctag")
    col.wait(conn, 1)
    out = _mgmt_queue_obs(ctx, q, 3, QQ_MGMT_KEYS)
    out["list_in_vhost"] = sorted(
        k for k in next(x for x in ctx.mgmt_get("/api/queues/%2F") if x["name"] == q)
    )
    return out


# --------------------------------------------------------------------------------------------------
# quorum queues: delivery count, requeue order, delivery limit
# --------------------------------------------------------------------------------------------------


@scenario
def scenario_qq_delivery_count_basic_get(ctx: QsCtx) -> Observation:
    """basic.get adds x-delivery-count from the first get; requeued gets count up."""
    _conn, ch, q = durable_queue_with(ctx, "q", QQ, ["m1", "m2"], headers={"app": "x"})
    steps = []
    for _ in range(3):
        method, obs = get(ch, q)
        steps.append(obs)
        ch.basic_nack(method.delivery_tag, requeue=True)
    method, obs = get(ch, q)
    steps.append(obs)
    ch.basic_reject(method.delivery_tag, requeue=True)
    steps.append(drain(ch, q))
    return steps


@scenario
def scenario_qq_delivery_count_consumer(ctx: QsCtx) -> Observation:
    """Consumer deliveries carry x-delivery-count only from the first redelivery."""
    conn, ch, q = durable_queue_with(ctx, "q", QQ, ["m1"])
    publish_confirmed(ch, q, ["m2"], headers={"x-delivery-count": 7, "app": "y"})
    ch.basic_qos(prefetch_count=1)
    col = Collector()
    ch.basic_consume(q, col)
    seen = []
    for i in range(5):
        col.wait(conn, i + 1)
        method, props, body = col.items[i]
        seen.append(delivery_obs(method, props, body))
        if i < 2:
            ch.basic_nack(method.delivery_tag, requeue=True)
        elif i == 2:
            ch.basic_reject(method.delivery_tag, requeue=True)
        else:
            ch.basic_ack(method.delivery_tag)
    return seen


def _requeue_order(ctx: QsCtx, args: dict[str, Any]) -> dict[str, Any]:
    conn, ch, q = durable_queue_with(ctx, "q", {**QQ, **args}, ["a", "b", "c", "d"])
    out: dict[str, Any] = {}
    # get a, b; nack b then a (requeue)
    ma, _ = get(ch, q, headers_only=True)
    mb, _ = get(ch, q, headers_only=True)
    ch.basic_nack(mb.delivery_tag, requeue=True)
    ch.basic_nack(ma.delivery_tag, requeue=True)
    out["after_nack_b_then_a"] = drain(ch, q, headers_only=True)
    # consumer: prefetch 2, reject the first delivery, observe the order of the next ones
    publish_confirmed(ch, q, ["e", "f", "g"])
    ch2 = conn.channel()
    ch2.basic_qos(prefetch_count=1)
    col = Collector()
    ch2.basic_consume(q, col)
    order = []
    for i in range(5):
        col.wait(conn, i + 1)
        if len(col.items) <= i:
            break
        method, props, body = col.items[i]
        order.append([body.decode(), method.redelivered, (props.headers or {}).get("x-delivery-count")])
        if i == 0:
            ch2.basic_reject(method.delivery_tag, requeue=True)
        else:
            ch2.basic_ack(method.delivery_tag)
    out["consumer_prefetch1_reject_first"] = order
    ch2.close()
    # closed channel: unacked messages come back
    publish_confirmed(ch, q, ["h", "i", "j", "k"])
    ch3 = conn.channel()
    got = [get(ch3, q, headers_only=True)[0] for _ in range(2)]
    assert all(m is not None for m in got)
    ch3.close()
    out["after_channel_close_with_h_i_unacked"] = drain(ch, q, headers_only=True)
    # a consumer channel closed with 3 unacked (one already requeued once)
    publish_confirmed(ch, q, ["l", "m", "n", "o"])
    ml, _ = get(ch, q, headers_only=True)
    ch.basic_nack(ml.delivery_tag, requeue=True)
    ch4 = conn.channel()
    ch4.basic_qos(prefetch_count=3)
    col4 = Collector()
    ch4.basic_consume(q, col4)
    col4.wait(conn, 3)
    out["consumer_got"] = [b for b in col4.bodies()]
    ch4.close()
    out["after_consumer_channel_close"] = drain(ch, q, headers_only=True)
    return out


@scenario
def scenario_qq_requeue_order_no_limit(ctx: QsCtx) -> Observation:
    return _requeue_order(ctx, {})


@scenario
def scenario_qq_requeue_order_with_limit(ctx: QsCtx) -> Observation:
    return _requeue_order(ctx, {"x-delivery-limit": 10})


@scenario
def scenario_qq_delivery_limit_drop(ctx: QsCtx) -> Observation:
    """x-delivery-limit 2 without a DLX: how many returns (nack, reject, channel close) until dropped."""
    conn, ch, q = durable_queue_with(ctx, "q", {**QQ, "x-delivery-limit": 2})
    out: dict[str, Any] = {}
    for how in ("nack", "reject", "close"):
        publish_confirmed(ch, q, [how])
        trace = []
        for _ in range(5):
            c = ch if how != "close" else conn.channel()
            method, obs = get(c, q, headers_only=True)
            if method is None:
                trace.append(None)
                break
            trace.append(obs)
            if how == "nack":
                c.basic_nack(method.delivery_tag, requeue=True)
            elif how == "reject":
                c.basic_reject(method.delivery_tag, requeue=True)
            else:
                c.close()
        trace.append({"count_after": count(ch, q)})
        out[how] = trace
    # delivery limit 0
    q0 = ctx.queue("q0")
    ch.queue_declare(q0, durable=True, arguments={**QQ, "x-delivery-limit": 0})
    publish_confirmed(ch, q0, ["z"])
    m, obs = get(ch, q0, headers_only=True)
    ch.basic_nack(m.delivery_tag, requeue=True)
    out["limit_0"] = [obs, {"count_after_one_nack": count(ch, q0)}]
    return out


def _dlx_target(ctx: QsCtx, ch: Any) -> tuple[str, str]:
    dlx = ctx.exchange("dlx")
    ch.exchange_declare(dlx, "fanout")
    dlq = ctx.queue("dlq")
    ch.queue_declare(dlq)
    ch.queue_bind(dlq, dlx)
    return dlx, dlq


@scenario
def scenario_qq_dead_letter_reasons(ctx: QsCtx) -> Observation:
    """x-death written for delivery_limit, rejected, expired and maxlen on a quorum queue."""
    _conn, ch = connect_confirming(ctx)
    dlx, dlq = _dlx_target(ctx, ch)
    q = ctx.queue("q")
    ch.queue_declare(
        q,
        durable=True,
        arguments={
            **QQ,
            "x-delivery-limit": 1,
            "x-dead-letter-exchange": dlx,
            "x-max-length": 3,
            "x-overflow": "drop-head",
        },
    )
    out: dict[str, Any] = {}
    publish_confirmed(ch, q, ["limit"], headers={"h": 1}, message_id="mid", expiration="60000")
    for _ in range(2):
        m, _ = get(ch, q)
        ch.basic_nack(m.delivery_tag, requeue=True)
    out["count_after_two_nacks"] = count(ch, q)
    wait_count(ch, dlq, 1)
    out["delivery_limit"] = drain(ch, dlq)
    publish_confirmed(ch, q, ["rejected"])
    m, _ = get(ch, q)
    ch.basic_reject(m.delivery_tag, requeue=False)
    wait_count(ch, dlq, 1)
    out["rejected"] = drain(ch, dlq)
    publish_confirmed(ch, q, ["nacked"])
    m, _ = get(ch, q)
    ch.basic_nack(m.delivery_tag, requeue=False)
    wait_count(ch, dlq, 1)
    out["nacked"] = drain(ch, dlq)
    publish_confirmed(ch, q, ["expired"], expiration="100")
    time.sleep(0.5)
    out["count_after_expiry"] = count(ch, q)
    wait_count(ch, dlq, 1)
    out["expired"] = drain(ch, dlq)
    publish_confirmed(ch, q, ["m1", "m2", "m3", "m4", "m5"])
    wait_count(ch, dlq, 2)
    out["maxlen"] = drain(ch, dlq)
    out["left"] = drain(ch, q, headers_only=True)
    # a message dead-lettered twice through the same quorum queue (count increments)
    q2 = ctx.queue("loop")
    ch.queue_declare(
        q2, durable=True, arguments={**QQ, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": q2}
    )
    publish_confirmed(ch, q2, ["loop"])
    for _ in range(2):
        m, _ = get(ch, q2)
        ch.basic_reject(m.delivery_tag, requeue=False)
        wait_count(ch, q2, 1)
    out["twice_rejected"] = drain(ch, q2)
    return out


@scenario
def scenario_qq_message_ttl(ctx: QsCtx) -> Observation:
    """x-message-ttl and per-message expiration on a quorum queue (3.10 supports both)."""
    _conn, ch = connect_confirming(ctx)
    q = ctx.queue("q")
    out: dict[str, Any] = {}
    out["declare"] = attempt(
        lambda: ch.queue_declare(q, durable=True, arguments={**QQ, "x-message-ttl": 300})
    )
    publish_confirmed(ch, q, ["a", "b"])
    publish_confirmed(ch, q, ["c"], expiration="50000")
    out["count_at_once"] = count(ch, q)
    time.sleep(1.0)
    out["count_after_1s"] = count(ch, q)
    out["left"] = drain(ch, q, headers_only=True)
    q2 = ctx.queue("per_message")
    ch.queue_declare(q2, durable=True, arguments=QQ)
    publish_confirmed(ch, q2, ["short"], expiration="100")
    publish_confirmed(ch, q2, ["long"], expiration="60000")
    publish_confirmed(ch, q2, ["zero"], expiration="0")
    time.sleep(0.6)
    out["per_message_left"] = drain(ch, q2)
    # a message unacked by basic.get does not expire while held; requeued after ttl -> ?
    q3 = ctx.queue("held")
    ch.queue_declare(q3, durable=True, arguments={**QQ, "x-message-ttl": 300})
    publish_confirmed(ch, q3, ["held"])
    m, _ = get(ch, q3)
    time.sleep(0.8)
    ch.basic_nack(m.delivery_tag, requeue=True)
    time.sleep(0.3)
    out["held_then_requeued_after_ttl"] = {"count": count(ch, q3), "left": drain(ch, q3, headers_only=True)}
    return out


@scenario
def scenario_qq_expires(ctx: QsCtx) -> Observation:
    """x-expires 1000 on a quorum queue: the queue is deleted when unused."""
    conn = ctx.connect()
    ch = conn.channel()
    q = ctx.queue("q")
    ch.queue_declare(q, durable=True, arguments={**QQ, "x-expires": 1000})
    out: dict[str, Any] = {"passive_at_once": attempt(lambda: ch.queue_declare(q, passive=True))}
    deadline = time.monotonic() + 15
    gone_after = None
    while time.monotonic() < deadline:
        time.sleep(0.5)
        c = conn.channel()
        res = attempt(lambda c=c: c.queue_declare(q, passive=True))
        if "channel_close" in res:
            out["passive_after_expiry"] = res
            gone_after = True
            break
    out["gone_within_15s"] = bool(gone_after)
    return out


@scenario
def scenario_qq_drop_head(ctx: QsCtx) -> Observation:
    """x-max-length 3 (default overflow drop-head) and x-max-length-bytes on a quorum queue."""
    _conn, ch, q = durable_queue_with(ctx, "q", {**QQ, "x-max-length": 3})
    acks = publish_confirmed(ch, q, [f"m{i}" for i in range(6)])
    out: dict[str, Any] = {"acks": acks, "left": [m["body"] for m in drain(ch, q, headers_only=True)]}
    qb = ctx.queue("bytes")
    ch.queue_declare(qb, durable=True, arguments={**QQ, "x-max-length-bytes": 10})
    acks = publish_confirmed(ch, qb, ["aaaa", "bbbb", "cccc", "dddddddddddd", "e"])
    out["bytes"] = {"acks": acks, "left": [m["body"] for m in drain(ch, qb, headers_only=True)]}
    qd = ctx.queue("reject_publish_dlx")
    ch.queue_declare(
        qd, durable=True, arguments={**QQ, "x-max-length": 3, "x-overflow": "reject-publish-dlx"}
    )
    acks = publish_confirmed(ch, qd, [f"m{i}" for i in range(5)])
    out["reject_publish_dlx"] = {"acks": acks, "left": [m["body"] for m in drain(ch, qd, headers_only=True)]}
    return out


@scenario
def scenario_qq_reject_publish(ctx: QsCtx) -> Observation:
    """x-overflow reject-publish with x-max-length 10: one over the limit, then nacks until <= 80%."""
    conn, ch, q = durable_queue_with(ctx, "q", {**QQ, "x-max-length": 10, "x-overflow": "reject-publish"})
    out: dict[str, Any] = {}
    out["first_13"] = publish_confirmed(ch, q, [f"m{i}" for i in range(13)])
    out["count"] = count(ch, q)
    trace = []
    for i in range(5):
        m, _ = get(ch, q)
        ch.basic_ack(m.delivery_tag)
        res = publish_confirmed(ch, q, [f"after{i}"])
        trace.append({"count_before_publish": count(ch, q) - (res[0] == "ack"), "publish": res[0]})
    out["consume_one_then_publish_one"] = trace
    out["remaining"] = [m["body"] for m in drain(ch, q, headers_only=True)]
    # unacked messages count towards the limit
    q2 = ctx.queue("unacked")
    ch.queue_declare(q2, durable=True, arguments={**QQ, "x-max-length": 2, "x-overflow": "reject-publish"})
    publish_confirmed(ch, q2, ["a", "b"])
    held = get(ch, q2)[0]
    out["with_one_unacked_publish_2"] = publish_confirmed(ch, q2, ["c", "d"])
    ch.basic_ack(held.delivery_tag)
    out["with_one_unacked_left"] = [m["body"] for m in drain(ch, q2, headers_only=True)]
    # without confirms: silently dropped, channel stays open
    q3 = ctx.queue("noconfirm")
    ch.queue_declare(q3, durable=True, arguments={**QQ, "x-max-length": 1, "x-overflow": "reject-publish"})
    plain = conn.channel()
    # the over-limit status reaches the channel asynchronously: pause before the publishes it drops
    for b in ("x", "y"):
        plain.basic_publish("", q3, b.encode())
    time.sleep(0.5)
    for b in ("z", "w"):
        plain.basic_publish("", q3, b.encode())
    time.sleep(0.5)
    out["noconfirm_left"] = [m["body"] for m in drain(ch, q3, headers_only=True)]
    # bytes limit
    qb = ctx.queue("bytes")
    ch.queue_declare(
        qb, durable=True, arguments={**QQ, "x-max-length-bytes": 10, "x-overflow": "reject-publish"}
    )
    out["bytes"] = publish_confirmed(ch, qb, ["aaaa", "bbbb", "cccc", "dddd", "e"])
    return out


@scenario
def scenario_qq_dead_letter_at_least_once(ctx: QsCtx) -> Observation:
    """at-least-once keeps unroutable dead letters (management ``messages_dlx``) only with reject-publish;
    otherwise the strategy falls back to at-most-once and they are dropped."""
    _conn, ch = connect_confirming(ctx)
    out: dict[str, Any] = {}
    variants = {
        "at_least_once_reject_publish": {
            "x-dead-letter-strategy": "at-least-once",
            "x-overflow": "reject-publish",
        },
        "at_least_once_drop_head": {"x-dead-letter-strategy": "at-least-once"},
        "at_most_once": {"x-dead-letter-strategy": "at-most-once"},
        "default_strategy": {},
    }
    queues = {}
    for label, args in variants.items():
        dlx = ctx.exchange(f"{label}_dlx")
        ch.exchange_declare(dlx, "direct")
        q = ctx.queue(label)
        ch.queue_declare(q, durable=True, arguments={**QQ, "x-dead-letter-exchange": dlx, **args})
        publish_confirmed(ch, q, ["one", "two"])
        m, _ = get(ch, q)
        ch.basic_reject(m.delivery_tag, requeue=False)
        queues[label] = (q, dlx)
    time.sleep(0.3)
    for label, (q, dlx) in queues.items():
        res: dict[str, Any] = {"passive_count_after_unroutable_reject": count(ch, q)}
        held = 1 if label == "at_least_once_reject_publish" else 0  # `messages` includes the DLX store
        keys = ("messages", "messages_ready", "messages_dlx", "message_bytes_dlx")
        mq = _mgmt_queue_obs(ctx, q, 1 + held, keys)
        res["mgmt"] = {k: mq[k] for k in ("messages", "messages_ready", "messages_dlx", "message_bytes_dlx")}
        dlq = ctx.queue(f"{label}_dlq")
        ch.queue_declare(dlq)
        ch.queue_bind(dlq, dlx, routing_key=q)
        m, _ = get(ch, q)
        ch.basic_reject(m.delivery_tag, requeue=False)
        wait_count(ch, dlq, 1, timeout=3)
        time.sleep(0.5)
        res["dlq_after_binding_and_second_reject"] = [x["body"] for x in drain(ch, dlq, headers_only=True)]
        out[label] = res
    return out


# --------------------------------------------------------------------------------------------------
# quorum queues: consumers, qos, get, purge, delete
# --------------------------------------------------------------------------------------------------


@scenario
def scenario_qq_unsupported_operations(ctx: QsCtx) -> Observation:
    """queue.delete if-unused / if-empty, global qos and prefetch 0 on a quorum queue."""
    out: dict[str, Any] = {}
    conn, ch, q = durable_queue_with(ctx, "q", QQ, ["a"])
    out["delete_if_unused"] = attempt(lambda: conn.channel().queue_delete(q, if_unused=True))
    conn = ctx.connect()
    out["delete_if_empty"] = attempt(lambda: conn.channel().queue_delete(q, if_empty=True))
    conn = ctx.connect()
    out["delete_if_unused_if_empty"] = attempt(
        lambda: conn.channel().queue_delete(q, if_unused=True, if_empty=True)
    )
    conn = ctx.connect()
    ch = conn.channel()
    out["qos_global"] = attempt(lambda: ch.basic_qos(prefetch_count=5, global_qos=True))
    out["consume_after_global_qos"] = attempt(lambda: ch.basic_consume(q, lambda *a: None, consumer_tag="t1"))
    conn = ctx.connect()
    ch = conn.channel()
    ch.basic_qos(prefetch_count=0, global_qos=True)
    out["consume_after_global_qos_0"] = attempt(
        lambda: ch.basic_consume(q, lambda *a: None, consumer_tag="t2")
    )
    conn.close()
    conn = ctx.connect()
    ch = conn.channel()
    ch.basic_qos(prefetch_count=5, global_qos=True)
    ch.basic_qos(prefetch_count=3, global_qos=False)
    out["consume_after_global_then_consumer_qos"] = attempt(
        lambda: ch.basic_consume(q, lambda *a: None, consumer_tag="t3")
    )
    conn.close()
    conn = ctx.connect()
    ch = conn.channel()
    out["get_after_global_qos"] = attempt(
        lambda: (ch.basic_qos(prefetch_count=5, global_qos=True), ch.basic_get(q))[1][2]
    )
    conn.close()
    # prefetch 0 (unlimited): all messages are delivered
    conn, ch = connect_confirming(ctx)
    publish_confirmed(ch, q, [f"p{i}" for i in range(30)])
    c2 = conn.channel()
    col = Collector()
    c2.basic_consume(q, col)
    col.wait(conn, 31)
    col.settle(conn)
    out["prefetch_0_deliveries"] = len(col.items)
    out["delete_plain"] = attempt(lambda: conn.channel().queue_delete(q))
    return out


@scenario
def scenario_qq_single_active_consumer(ctx: QsCtx) -> Observation:
    """basic.get on a single-active-consumer quorum queue; which consumer is active; failover."""
    out: dict[str, Any] = {}
    conn, _ch, q = durable_queue_with(
        ctx, "q", {**QQ, "x-single-active-consumer": True}, ["a", "b", "c", "d"]
    )
    out["basic_get"] = attempt(lambda: conn.channel().basic_get(q))
    conn = ctx.connect()
    ch1 = conn.channel()
    ch1.basic_qos(prefetch_count=1)
    ch2 = conn.channel()
    ch2.basic_qos(prefetch_count=1)
    c1, c2 = Collector(), Collector()
    ch1.basic_consume(q, c1, consumer_tag="first")
    ch2.basic_consume(q, c2, consumer_tag="second")
    c1.wait(conn, 1)
    c1.settle(conn)
    mq = _mgmt_queue_obs(ctx, q, 4, ("single_active_consumer_ctag", "consumers"))
    out["mgmt_sac"] = {k: mq[k] for k in ("single_active_consumer_ctag", "consumers")}
    out["mgmt_consumer_details_active"] = sorted(
        [d["consumer_tag"], d["active"], d["activity_status"]]
        for d in ctx.mgmt_queue(q).get("consumer_details", [])
    )
    out["first_got"] = c1.bodies()
    out["second_got"] = c2.bodies()
    ch1.basic_ack(c1.items[0][0].delivery_tag)
    c1.wait(conn, 2)
    ch1.basic_cancel("first")
    c2.wait(conn, 1)
    c2.settle(conn)
    out["after_cancel_first_with_b_unacked"] = {"first": c1.bodies(), "second": c2.bodies()}
    out["second_redelivered_flags"] = [m.redelivered for m, _, _ in c2.items]
    out["second_headers"] = [jsonable(p.headers) for _, p, _ in c2.items]
    return out


@scenario
def scenario_qq_consumer_priority(ctx: QsCtx) -> Observation:
    """x-priority consumer argument on a quorum queue."""
    conn, ch, q = durable_queue_with(ctx, "q", QQ)
    chans = []
    cols = {}
    for tag, prio in (("low", 1), ("high", 10), ("mid", 5)):
        c = conn.channel()
        c.basic_qos(prefetch_count=2)
        cols[tag] = Collector()
        c.basic_consume(q, cols[tag], consumer_tag=tag, arguments={"x-priority": prio})
        chans.append(c)
    publish_confirmed(ch, q, [f"m{i}" for i in range(5)])
    deadline = time.monotonic() + WAIT
    while sum(len(c.items) for c in cols.values()) < 5 and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)
    return {tag: c.bodies() for tag, c in cols.items()}


@scenario
def scenario_qq_cancel_and_purge(ctx: QsCtx) -> Observation:
    """Cancel with unacked messages, ack after cancel, purge with unacked, basic.get message_count."""
    out: dict[str, Any] = {}
    conn, ch, q = durable_queue_with(ctx, "q", QQ, ["a", "b", "c", "d", "e"])
    c = conn.channel()
    c.basic_qos(prefetch_count=2)
    col = Collector()
    c.basic_consume(q, col, consumer_tag="tag")
    col.wait(conn, 2)
    out["cancel"] = attempt(lambda: c.basic_cancel("tag"))
    c.basic_ack(col.items[0][0].delivery_tag)
    out["count_after_cancel_and_one_ack"] = count(ch, q)
    out["purge_with_one_unacked"] = attempt(lambda: ch.queue_purge(q))
    out["count_after_purge"] = count(ch, q)
    c.close()
    out["count_after_close"] = wait_count(ch, q, 1)
    out["left_after_close"] = drain(ch, q, headers_only=True)
    publish_confirmed(ch, q, ["x", "y", "z"])
    m, obs = get(ch, q, headers_only=True)
    out["get_message_count"] = obs
    ch.basic_ack(m.delivery_tag)
    out["rest"] = drain(ch, q, headers_only=True)
    out["get_empty"] = attempt(lambda: ch.basic_get(q)[0])
    out["delete"] = attempt(lambda: ch.queue_delete(q))
    return out


@scenario
def scenario_qq_policy(ctx: QsCtx) -> Observation:
    """A policy applies to a quorum queue only if every key is supported by the quorum type."""
    _conn, ch = connect_confirming(ctx)
    out: dict[str, Any] = {}
    definitions = {
        "supported": {"max-length": 2},
        "with_unsupported": {"max-length": 2, "max-priority": 5},
        "with_queue_mode": {"max-length": 2, "queue-mode": "lazy"},
        "with_message_ttl": {"max-length": 2, "message-ttl": 60000},
        "with_delivery_limit": {"max-length": 2, "delivery-limit": 3},
        "with_ha_mode": {"max-length": 2, "ha-mode": "all"},
        "with_max_age": {"max-length": 2, "max-age": "1h"},
    }
    # every queue is set up before the first wait: RabbitMQ shows a queue's policy with its stats
    # (every 5 s), so the queues wait for that together, not one after another
    queues = {label: ctx.queue(label) for label in definitions}
    put: dict[str, Any] = {}
    for label, definition in definitions.items():
        status, body = ctx.set_policy(f"{label}_policy", f"^{queues[label]}$", definition, "queues")
        put[label] = [status, body]
        ch.queue_declare(queues[label], durable=True, arguments=QQ)
    time.sleep(0.3)
    for q in queues.values():
        publish_confirmed(ch, q, ["a", "b", "c", "d"])
    for label, q in queues.items():
        mq = _mgmt_wait_key(ctx, q, "policy")
        out[label] = {
            "policy_put": put[label],
            "count": count(ch, q),
            "policy": mq.get("policy", "<absent>"),
            "effective_policy_definition": mq.get("effective_policy_definition", "<absent>"),
        }
    return out


@scenario
def scenario_qs_consumer_arguments(ctx: QsCtx) -> Observation:
    """Consumer arguments each type accepts or refuses, and exclusive consumers on a quorum queue."""
    conn, ch = connect_confirming(ctx)
    q = ctx.queue("qq")
    s = ctx.queue("st")
    ch.queue_declare(q, durable=True, arguments=QQ)
    ch.queue_declare(s, durable=True, arguments=ST)
    cases = {
        "qq_x_priority": (q, {"x-priority": 5}),
        "qq_x_priority_str": (q, {"x-priority": "5"}),
        "qq_x_stream_offset": (q, {"x-stream-offset": "first"}),
        "qq_x_cancel_on_ha_failover": (q, {"x-cancel-on-ha-failover": True}),
        "qq_unknown": (q, {"x-whatever": 1}),
        "st_x_priority": (s, {"x-priority": 5}),
        "st_x_cancel_on_ha_failover": (s, {"x-cancel-on-ha-failover": True}),
        "st_offset_and_priority": (s, {"x-stream-offset": "first", "x-priority": 5}),
        "st_unknown": (s, {"x-whatever": 1}),
    }
    out: dict[str, Any] = {}
    for label, (name, args) in cases.items():
        if conn.is_closed:
            conn = ctx.connect()
        c = conn.channel()
        c.basic_qos(prefetch_count=5)
        out[label] = attempt(
            lambda c=c, name=name, args=args: c.basic_consume(name, lambda *a: None, arguments=args)
        )
        if c.is_open:
            c.close()
    if conn.is_closed:
        conn = ctx.connect()
    c1 = conn.channel()
    c1.basic_qos(prefetch_count=5)
    out["qq_exclusive_first"] = attempt(lambda: c1.basic_consume(q, lambda *a: None, exclusive=True))
    c2 = conn.channel()
    c2.basic_qos(prefetch_count=5)
    out["qq_second_after_exclusive"] = attempt(lambda: c2.basic_consume(q, lambda *a: None))
    c3 = conn.channel()
    c3.basic_qos(prefetch_count=5)
    c3.basic_consume(s, lambda *a: None, arguments={"x-stream-offset": "first"})
    c4 = conn.channel()
    c4.basic_qos(prefetch_count=5)
    out["st_exclusive_with_other_consumer"] = attempt(
        lambda: c4.basic_consume(s, lambda *a: None, exclusive=True)
    )
    return out


CTL_COLUMNS = [
    "name",
    *QUEUE_DESCRIPTION,
    "messages",
    "messages_ready",
    "messages_unacknowledged",
    "consumers",
    "policy",
    "state",
]


@scenario
def scenario_qs_ctl_list_queues(ctx: QsCtx) -> Observation:
    """``ctl list_queues`` columns for a classic queue, a quorum queue (2 ready, 1 unacked) and a stream.

    The command is ``$QSOBS_CTL`` (default ``rabbitmqctl``) with ``--formatter json``; a subject with
    another CLI sets that variable to a compatible command.
    """
    ctl = os.environ.get("QSOBS_CTL", "rabbitmqctl").split()
    if shutil.which(ctl[0]) is None:
        return {"skipped": f"{ctl[0]} not found"}
    conn, ch = connect_confirming(ctx)
    names = {"classic": ctx.queue("classic"), "quorum": ctx.queue("quorum"), "stream": ctx.queue("stream")}
    ch.queue_declare(names["classic"], durable=True)
    ch.queue_declare(names["quorum"], durable=True, arguments={**QQ, "x-delivery-limit": 3})
    ch.queue_declare(names["stream"], durable=True, arguments={**ST, "x-max-age": "1D"})
    for name in names.values():
        publish_confirmed(ch, name, ["a", "b", "c"])
    c = conn.channel()
    c.basic_qos(prefetch_count=1)
    col = Collector()
    c.basic_consume(names["quorum"], col)
    col.wait(conn, 1)
    # the message and consumer columns come from stats emitted periodically: wait until they are in
    deadline = time.monotonic() + 40
    while True:
        proc = subprocess.run(
            [*ctl, "list_queues", *CTL_COLUMNS, "--formatter", "json", "--quiet"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        rows = {row["name"]: row for row in json.loads(proc.stdout or "[]")}
        quorum = rows.get(names["quorum"], {})
        if (quorum.get("messages"), quorum.get("consumers")) == (3, 1) or time.monotonic() > deadline:
            break
        time.sleep(1)
    out: dict[str, Any] = {"columns": CTL_COLUMNS, "rc": proc.returncode}
    for kind, name in names.items():
        row = dict(rows.get(name, {}))
        for key in ("leader",):
            if row.get(key):
                ctx.node(row[key])
        for key in ("members", "online"):
            for n in row.get(key) or []:
                ctx.node(n)
        if kind == "stream":
            for key in ("messages", "messages_ready"):  # the lagging committed counter
                if key in row:
                    row[key] = type(row[key]).__name__
        out[kind] = row
    return out


# --------------------------------------------------------------------------------------------------
# streams
# --------------------------------------------------------------------------------------------------


@scenario
def scenario_st_declare_flags(ctx: QsCtx) -> Observation:
    return declare_cases(ctx, DECLARE_FLAGS, base={"arguments": ST}, mgmt=True)


@scenario
def scenario_st_declare_arguments(ctx: QsCtx) -> Observation:
    """Every x-argument a stream accepts or refuses, and the x-max-age formats."""
    cases: dict[str, dict[str, Any]] = {
        "max_length_bytes": {"x-max-length-bytes": 1_000_000},
        "max_length_bytes_str": {"x-max-length-bytes": "1000"},
        "max_age_1Y": {"x-max-age": "1Y"},
        "max_age_1M": {"x-max-age": "1M"},
        "max_age_1D": {"x-max-age": "1D"},
        "max_age_1h": {"x-max-age": "1h"},
        "max_age_1m": {"x-max-age": "1m"},
        "max_age_10s": {"x-max-age": "10s"},
        "max_age_0s": {"x-max-age": "0s"},
        "max_age_1d_lower": {"x-max-age": "1d"},
        "max_age_1H_upper": {"x-max-age": "1H"},
        "max_age_no_unit": {"x-max-age": "10"},
        "max_age_int": {"x-max-age": 10},
        "max_age_bad": {"x-max-age": "1x"},
        "max_age_neg": {"x-max-age": "-1h"},
        "segment_size": {"x-stream-max-segment-size-bytes": 1_000_000},
        "segment_size_str": {"x-stream-max-segment-size-bytes": "1000"},
        "initial_cluster_size": {"x-initial-cluster-size": 1},
        "initial_cluster_size_0": {"x-initial-cluster-size": 0},
        "leader_locator": {"x-queue-leader-locator": "least-leaders"},
        "max_length": {"x-max-length": 10},
        "message_ttl": {"x-message-ttl": 1000},
        "expires": {"x-expires": 1000},
        "max_priority": {"x-max-priority": 5},
        "dlx": {"x-dead-letter-exchange": "amq.fanout"},
        "dlrk": {"x-dead-letter-routing-key": "k"},
        "overflow": {"x-overflow": "reject-publish"},
        "single_active_consumer": {"x-single-active-consumer": True},
        "delivery_limit": {"x-delivery-limit": 3},
        "queue_mode": {"x-queue-mode": "lazy"},
        "quorum_group_size": {"x-quorum-initial-group-size": 1},
        "max_in_memory_length": {"x-max-in-memory-length": 1},
        "unknown_x_arg": {"x-whatever": 1},
        "queue_type_bad": {"x-queue-type": "Stream"},
    }
    return declare_argument_cases(ctx, cases, ST)


@scenario
def scenario_st_redeclare_and_passive(ctx: QsCtx) -> Observation:
    conn, ch = connect_confirming(ctx)
    s = ctx.queue("s")
    out: dict[str, Any] = {
        "declare": attempt(lambda: ch.queue_declare(s, durable=True, arguments={**ST, "x-max-age": "1D"}))
    }
    publish_confirmed(ch, s, ["a", "b", "c"])
    out["passive"] = stream_count(attempt(lambda: ch.queue_declare(s, passive=True)))
    for label, args in {
        "same": {**ST, "x-max-age": "1D"},
        "other_max_age": {**ST, "x-max-age": "2D"},
        "without_max_age": ST,
        "as_quorum": {**QQ, "x-max-age": "1D"},
        "without_type": {"x-max-age": "1D"},
        "extra_max_bytes": {**ST, "x-max-age": "1D", "x-max-length-bytes": 100000},
    }.items():
        c = conn.channel()
        out[label] = stream_count(
            attempt(lambda c=c, args=args: c.queue_declare(s, durable=True, arguments=args))
        )
        if conn.is_closed:
            conn = ctx.connect()
            ch = conn.channel()
    return out


@scenario
def scenario_st_management_fields(ctx: QsCtx) -> Observation:
    conn, _ch, s = durable_queue_with(
        ctx, "s", {**ST, "x-max-length-bytes": 10_000_000, "x-max-age": "1D"}, ["a", "b", "c"]
    )
    c = conn.channel()
    c.basic_qos(prefetch_count=10)
    col = Collector()
    c.basic_consume(s, col, consumer_tag="qsobs-ctag", arguments={"x-stream-offset": "first"})
    col.wait(conn, 3)
    return _mgmt_queue_obs(ctx, s, 3, QQ_MGMT_KEYS)


@scenario
def scenario_st_consume_rules(ctx: QsCtx) -> Observation:
    """What a stream demands of consumers, and the operations it refuses."""
    out: dict[str, Any] = {}
    conn, _ch, s = durable_queue_with(ctx, "s", ST, ["a", "b"])

    def fresh(prefetch: int | None = None, global_qos: bool = False) -> Any:
        nonlocal conn
        if conn.is_closed:
            conn = ctx.connect()
        c = conn.channel()
        if prefetch is not None:
            c.basic_qos(prefetch_count=prefetch, global_qos=global_qos)
        return c

    c = fresh()
    out["consume_without_qos"] = attempt(lambda: c.basic_consume(s, lambda *a: None))
    c = fresh(0)
    out["consume_prefetch_0"] = attempt(lambda: c.basic_consume(s, lambda *a: None))
    c = fresh(10, True)
    out["consume_global_qos"] = attempt(lambda: c.basic_consume(s, lambda *a: None))
    c = fresh(10)
    out["consume_no_ack"] = attempt(lambda: c.basic_consume(s, lambda *a: None, auto_ack=True))
    c = fresh(10)
    out["consume_exclusive"] = attempt(lambda: c.basic_consume(s, lambda *a: None, exclusive=True))
    c = fresh(10)
    out["basic_get"] = attempt(lambda: c.basic_get(s))
    c = fresh(10)
    out["basic_get_no_ack"] = attempt(lambda: c.basic_get(s, auto_ack=True))
    c = fresh(10)
    out["purge"] = attempt(lambda: c.queue_purge(s))
    for op in ("nack", "nack_requeue_false", "reject", "reject_requeue_false", "ack", "ack_multiple"):
        c = fresh(10)
        col = Collector()
        c.basic_consume(s, col, arguments={"x-stream-offset": "first"})
        col.wait(conn, 2)
        tag = col.items[0][0].delivery_tag

        def act(c: Any = c, op: str = op, tag: int = tag, col: Collector = col) -> Any:
            if op == "nack":
                c.basic_nack(tag, requeue=True)
            elif op == "nack_requeue_false":
                c.basic_nack(tag, requeue=False)
            elif op == "reject":
                c.basic_reject(tag, requeue=True)
            elif op == "reject_requeue_false":
                c.basic_reject(tag, requeue=False)
            elif op == "ack":
                c.basic_ack(tag)
            else:
                c.basic_ack(col.items[1][0].delivery_tag, multiple=True)
            # a synchronous round trip to see whether the channel survived
            c.queue_declare(s, passive=True)
            return "channel still open"

        out[op] = attempt(act)
        out[op + "_deliveries"] = [[m.delivery_tag, m.redelivered] for m, _, _ in col.items]
    c = fresh(10)
    out["recover"] = attempt(lambda: c.basic_recover(requeue=True))
    for label, kw in (
        ("delete_if_unused", {"if_unused": True}),
        ("delete_if_empty", {"if_empty": True}),
        ("delete_if_unused_with_consumer", {"if_unused": True}),
    ):
        c = fresh(10)
        victim = ctx.queue(label)
        c.queue_declare(victim, durable=True, arguments=ST)
        publish_confirmed(confirm_channel(conn), victim, ["a"])
        if label.endswith("with_consumer"):
            c.basic_consume(victim, lambda *a: None)
        out[label] = attempt(lambda c=c, victim=victim, kw=kw: conn.channel().queue_delete(victim, **kw))
    return out


def deliveries_from_first(ctx: Any, conn: Any, s: str, n: int) -> tuple[Any, list[Any], Any]:
    """A consumer (prefetch 100) of stream `s` from its first offset on a new channel of `conn`,
    once it got `n` deliveries (or the wait ended) and settled them: its channel, the deliveries
    as the client shows them, and the same deliveries as the wire carries them."""
    c = conn.channel()
    c.basic_qos(prefetch_count=100)
    col = Collector()
    c.basic_consume(s, col, arguments={"x-stream-offset": "first"})
    col.wait(conn, n)
    col.settle(conn)
    shown = [delivery_obs(m, p, b) for m, p, b in col.items]
    return c, shown, _raw_stream_deliveries(ctx, s, len(col.items))


def read_stream(
    conn: pika.BlockingConnection,
    name: str,
    offset: Any,
    *,
    prefetch: int = 100,
    quiet: float = 0.5,
    timeout: float = 3.0,
) -> list[tuple[Any, str]]:
    """Stream `name` read from `offset` on a channel of its own, each delivery acked, until nothing
    arrived for `quiet` seconds (at most `timeout`): (x-stream-offset, body) per delivery."""
    ch = conn.channel()
    ch.basic_qos(prefetch_count=prefetch)
    got: list[tuple[Any, str]] = []

    def on_message(c: Any, method: Any, props: Any, body: bytes) -> None:
        got.append((props.headers["x-stream-offset"], body.decode()))
        c.basic_ack(method.delivery_tag)

    ch.basic_consume(name, on_message, arguments={"x-stream-offset": offset})
    deadline = time.monotonic() + timeout
    seen, last = -1, time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - last < quiet:
        conn.process_data_events(time_limit=0.05)
        if seen != len(got):
            seen, last = len(got), time.monotonic()
    ch.close()  # nothing is pending: pika would reject pending messages, which a stream refuses
    return got


def _consume_stream(
    ctx: QsCtx,
    conn: pika.BlockingConnection,
    s: str,
    offset: Any,
    *,
    prefetch: int = 100,
    want: int = 1000,
    quiet: float = 0.7,
    ack: bool = True,
) -> dict[str, Any]:
    c = conn.channel()
    c.basic_qos(prefetch_count=prefetch)
    col = Collector()
    args = {} if offset is None else {"x-stream-offset": offset}

    def cb(ch: Any, method: Any, props: Any, body: bytes) -> None:
        col(ch, method, props, body)
        if ack:
            ch.basic_ack(method.delivery_tag)

    res = attempt(lambda: c.basic_consume(s, cb, arguments=args))
    if "ok" in res:
        col.wait(conn, want, timeout=1.0)
        col.settle(conn, quiet)
        res = {"bodies": col.bodies(), "offsets": stream_offsets(col.items)}
        with contextlib.suppress(Exception):
            c.close()
    return res


@scenario
def scenario_st_offsets(ctx: QsCtx) -> Observation:
    """x-stream-offset spec values: what each consumer reads from a 10-message stream."""
    conn, _ch, s = durable_queue_with(ctx, "s", ST, [f"m{i}" for i in range(10)])
    now = datetime.now(UTC).replace(microsecond=0)
    specs: dict[str, Any] = {
        "absent": None,
        "first": "first",
        "last": "last",
        "next": "next",
        "int_0": 0,
        "int_5": 5,
        "int_9": 9,
        "int_10": 10,
        "int_100": 100,
        "int_neg": -1,
        "timestamp_past": now - timedelta(hours=1),
        "timestamp_future": now + timedelta(hours=1),
        "interval_1h": "1h",
        "interval_30s": "30s",
        "interval_1D": "1D",
        "string_5": "5",
        "string_bad": "bogus",
        "decimal": Decimal("1.5"),
        "bool": True,
        "bytes_first": b"first",
    }
    out: dict[str, Any] = {}
    for label, spec in specs.items():
        if conn.is_closed:
            conn = ctx.connect()
        out[label] = _consume_stream(ctx, conn, s, spec, want=10)  # no offset delivers more than 10
    return out


@scenario
def scenario_st_next_and_last_then_publish(ctx: QsCtx) -> Observation:
    """Consumers at next / last / numeric offsets while more messages are published."""
    conn, ch, s = durable_queue_with(ctx, "s", ST, [f"m{i}" for i in range(5)])
    cols: dict[str, Collector] = {}
    for label, spec in (("first", "first"), ("next", "next"), ("last", "last"), ("at_3", 3), ("at_7", 7)):
        c = conn.channel()
        c.basic_qos(prefetch_count=100)
        col = Collector()

        def cb(ch: Any, method: Any, props: Any, body: bytes, col: Collector = col) -> None:
            col(ch, method, props, body)
            ch.basic_ack(method.delivery_tag)

        c.basic_consume(s, cb, consumer_tag=label, arguments={"x-stream-offset": spec})
        cols[label] = col
    deadline = time.monotonic() + 1
    while time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.1)
    publish_confirmed(ch, s, [f"m{i}" for i in range(5, 10)])
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline and len(cols["first"].items) < 10:
        conn.process_data_events(time_limit=0.1)
    for col in cols.values():
        col.settle(conn)
    return {
        label: {"bodies": col.bodies(), "offsets": stream_offsets(col.items)} for label, col in cols.items()
    }


@scenario
def scenario_st_prefetch_and_acks(ctx: QsCtx) -> Observation:
    """Credit: a stream consumer with prefetch 2 that does not ack; then acks; redelivery on re-read."""
    conn, ch, s = durable_queue_with(ctx, "s", ST, [f"m{i}" for i in range(6)])
    c = conn.channel()
    c.basic_qos(prefetch_count=2)
    col = Collector()
    c.basic_consume(s, col, arguments={"x-stream-offset": "first"})
    col.wait(conn, 6, timeout=1.5)
    out: dict[str, Any] = {"without_acks": col.bodies()}
    c.basic_ack(col.items[0][0].delivery_tag)
    col.wait(conn, 6, timeout=1.0)
    out["after_one_ack"] = col.bodies()
    c.basic_ack(col.items[-1][0].delivery_tag, multiple=True)
    col.wait(conn, 6, timeout=1.0)
    out["after_ack_multiple"] = col.bodies()
    out["delivery_tags"] = [m.delivery_tag for m, _, _ in col.items]
    out["redelivered"] = [m.redelivered for m, _, _ in col.items]
    out["consumer_count_passive"] = stream_count(attempt(lambda: ch.queue_declare(s, passive=True)))
    c.close()
    out["reread_from_first_after_acks"] = _consume_stream(ctx, conn, s, "first")
    out["reread_from_3"] = _consume_stream(ctx, conn, s, 3)
    # unacked messages of a closed consumer are not redelivered anywhere: a new consumer at 'next' sees none
    out["next_after_all"] = _consume_stream(ctx, conn, s, "next")
    return out


def _table_types(payload: bytes) -> dict[str, Any]:
    """The field-type tags of a top-level AMQP field table (nested tables/arrays recursively)."""
    (size,) = struct.unpack_from(">I", payload, 0)
    return _parse_table(payload[4 : 4 + size])


def _parse_value(data: bytes, pos: int) -> tuple[Any, int]:
    tag = chr(data[pos])
    pos += 1
    fixed = {
        "t": 1,
        "b": 1,
        "B": 1,
        "s": 2,
        "u": 2,
        "I": 4,
        "i": 4,
        "l": 8,
        "f": 4,
        "d": 8,
        "T": 8,
        "D": 5,
        "V": 0,
    }
    if tag in fixed:
        return tag, pos + fixed[tag]
    if tag in "Sx":
        (n,) = struct.unpack_from(">I", data, pos)
        return tag, pos + 4 + n
    if tag == "F":
        (n,) = struct.unpack_from(">I", data, pos)
        return {"F": _parse_table(data[pos + 4 : pos + 4 + n])}, pos + 4 + n
    if tag == "A":
        (n,) = struct.unpack_from(">I", data, pos)
        end = pos + 4 + n
        pos += 4
        items = []
        while pos < end:
            item, pos = _parse_value(data, pos)
            items.append(item)
        return {"A": items}, end
    raise ValueError(f"unknown field type {tag!r}")


def _parse_table(data: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {}
    pos = 0
    while pos < len(data):
        n = data[pos]
        key = data[pos + 1 : pos + 1 + n].decode()
        pos += 1 + n
        out[key], pos = _parse_value(data, pos)
    return out


def _raw_stream_deliveries(ctx: QsCtx, s: str, n: int, offset: Any = "first") -> list[dict[str, Any]]:
    """Consume ``n`` messages with the raw client and report each content header's property flags and
    the wire type tags of its headers table (pika and pamqp decode 'l' and 'I' alike)."""
    raw = ctx.raw()
    raw.open_channel(1)
    raw.call(1, commands.Basic.Qos(prefetch_count=100), commands.Basic.QosOk)
    raw.call(
        1,
        commands.Basic.Consume(queue=s, consumer_tag="raw", arguments={"x-stream-offset": offset}),
        commands.Basic.ConsumeOk,
    )
    out: list[dict[str, Any]] = []
    # read raw frames straight from the socket
    buf = raw.buf
    raw.sock.settimeout(3)
    deadline = time.monotonic() + 5
    while len(out) < n and time.monotonic() < deadline:
        while len(buf) >= 7:
            ftype, _chan, size = struct.unpack_from(">BHI", buf, 0)
            if len(buf) < 8 + size:
                break
            payload = buf[7 : 7 + size]
            buf = buf[8 + size :]
            if ftype == 2:
                flags = struct.unpack_from(">H", payload, 12)[0]
                entry: dict[str, Any] = {"property_flags": f"{flags:016b}"}
                pos = 14
                if flags & 0x8000:
                    pos += 1 + payload[pos]
                if flags & 0x4000:
                    pos += 1 + payload[pos]
                if flags & 0x2000:
                    entry["header_types"] = _table_types(payload[pos:])
                out.append(entry)
        if len(out) >= n:
            break
        try:
            chunk = raw.sock.recv(65536)
        except TimeoutError:
            break
        if not chunk:
            break
        buf += chunk
    raw.close()
    _ = pframe  # the raw frames above are parsed by hand on purpose
    return out


#: A header of each scalar field type a client sends, for the header-type scenarios.
SCALAR_HEADERS: dict[str, Any] = {"str": "v", "int": 5, "big": 2**40, "neg": -3, "bool": True}


@scenario
def scenario_st_headers_and_properties(ctx: QsCtx) -> Observation:
    """Which properties and header values survive the way through a stream (and their wire types).

    Each header value travels in its own message (a decimal header closes the connection with 541),
    then one message carries every property; the quorum queue gets the same messages for contrast.
    """
    conn, ch = connect_confirming(ctx)
    s = ctx.queue("s")
    q = ctx.queue("qq")
    ch.queue_declare(s, durable=True, arguments=ST)
    ch.queue_declare(q, durable=True, arguments=QQ)
    headers: dict[str, Any] = {
        **SCALAR_HEADERS,
        "decimal": Decimal("1.5"),
        "array": [1, "a", True],
        "table": {"k": "v", "n": 1},
        "nested": {"t": {"a": [1, {"b": 2}]}},
        "bytes": b"\x00\x01",
        "empty_array": [],
        "empty_table": {},
        "none": None,
        "ts": datetime(2020, 1, 1, tzinfo=UTC),
        "x-stream-offset": "mine",
    }
    props = {
        "content_type": "text/plain",
        "content_encoding": "gzip",
        "headers": {"str": "v", "array": [1], "table": {"k": 1}},
        "delivery_mode": 2,
        "priority": 3,
        "correlation_id": "cid",
        "reply_to": "rt",
        "expiration": "600000",
        "message_id": "mid",
        "timestamp": 1_600_000_000,
        "type": "t",
        "user_id": "guest",
        "app_id": "app",
        "cluster_id": "cluster",
    }
    out: dict[str, Any] = {}
    for label, name in (("stream", s), ("quorum", q)):
        outcomes: dict[str, Any] = {}
        for key, value in headers.items():
            if conn.is_closed:
                conn = ctx.connect()
            c = confirm_channel(conn)
            outcomes[key] = attempt(
                lambda c=c, key=key, value=value, name=name: publish_confirmed(
                    c, name, [key], headers={key: value}
                )
            )
        if conn.is_closed:
            conn = ctx.connect()
        c = confirm_channel(conn)
        outcomes["all_properties"] = attempt(
            lambda c=c, name=name: publish_confirmed(c, name, ["all_properties"], **props)
        )
        outcomes["bare"] = attempt(lambda c=c, name=name: publish_confirmed(c, name, ["bare"]))
        out[f"{label}_publish"] = outcomes
    c, out["stream_deliveries"], out["stream_wire"] = deliveries_from_first(ctx, conn, s, len(headers) + 1)
    c.close()
    out["quorum_get"] = drain(conn.channel(), q)
    return out


def cancel_watch(ch: Any) -> list[Any]:
    """The basic.cancel methods the broker sends to `ch`'s consumers, as they arrive."""
    cancelled: list[Any] = []
    ch.add_on_cancel_callback(lambda frame: cancelled.append(method_fields(frame.method)))
    return cancelled


def pump_until_some(conn: Any, arrived: list[Any], timeout: float) -> list[Any]:
    """Dispatch `conn`'s events until `arrived` is not empty (or `timeout` s pass); `arrived`."""
    deadline = time.monotonic() + timeout
    while not arrived and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.1)
    return arrived


def stream_read_by_victim(ctx: Any) -> tuple[Any, Any, str, Any, Collector, list[Any]]:
    """A stream holding a, b, c (published on the confirming channel `ch` of `conn`) and consumer
    "victim" on another channel of `conn` (prefetch 10, from the first offset) that got all three:
    (conn, ch, stream, consumer channel, its collector, the basic.cancels it receives)."""
    conn, ch, s = durable_queue_with(ctx, "s", ST, ["a", "b", "c"])
    c = conn.channel()
    c.basic_qos(prefetch_count=10)
    col = Collector()
    cancelled = cancel_watch(c)
    c.basic_consume(s, col, consumer_tag="victim", arguments={"x-stream-offset": "first"})
    col.wait(conn, 3)
    return conn, ch, s, c, col, cancelled


def ack_all_then_qos(c: Any, col: Collector) -> Any:
    """Ack all `col` received (multiple), then basic.qos: its qos-ok shows the channel still works."""
    c.basic_ack(col.items[-1][0].delivery_tag, multiple=True)
    return c.basic_qos(prefetch_count=1)


@scenario
def scenario_st_delete_with_consumers(ctx: QsCtx) -> Observation:
    """queue.delete of a stream with a consumer: the consumer gets basic.cancel, delete-ok counts 0."""
    conn, ch, s, c, col, cancelled = stream_read_by_victim(ctx)
    conn2 = ctx.connect()
    out: dict[str, Any] = {"delete": attempt(lambda: conn2.channel().queue_delete(s))}
    out["cancel_received"] = pump_until_some(conn, cancelled, WAIT)
    out["channel_open"] = c.is_open
    out["ack_after_delete"] = attempt(lambda: ack_all_then_qos(c, col))
    # a classic and a quorum queue for contrast
    for label, arguments, tag in (("classic", None, "victim2"), ("quorum", QQ, "victim3")):
        q = ctx.queue(label)
        ch.queue_declare(q, durable=arguments is not None, arguments=arguments)
        publish_confirmed(ch, q, ["a", "b"])
        other = conn.channel()
        other.basic_qos(prefetch_count=1)
        other_cancelled = cancel_watch(other)
        other.basic_consume(q, Collector(), consumer_tag=tag)
        conn.process_data_events(time_limit=0.3)
        out[f"{label}_delete"] = attempt(lambda q=q: conn2.channel().queue_delete(q))
        out[f"{label}_cancel_received"] = pump_until_some(conn, other_cancelled, WAIT)
    return out


@scenario
def scenario_st_policy(ctx: QsCtx) -> Observation:
    """Policies on streams: max-age, max-length-bytes, stream-max-segment-size-bytes, unsupported keys."""
    ch = ctx.channel()
    out: dict[str, Any] = {}
    definitions = {
        "max_age": {"max-age": "1h"},
        "max_length_bytes": {"max-length-bytes": 100000},
        "segment": {"stream-max-segment-size-bytes": 100000},
        "max_age_bad": {"max-age": "1x"},
        "with_unsupported": {"max-age": "1h", "max-length": 5},
        "with_message_ttl": {"max-age": "1h", "message-ttl": 1000},
    }
    for label, definition in definitions.items():
        s = ctx.queue(label)
        status, body = ctx.set_policy(f"{label}_policy", f"^{s}$", definition, "queues")
        ch.queue_declare(s, durable=True, arguments=ST)
        time.sleep(0.3)
        mq = _mgmt_wait_key(ctx, s, "policy")
        out[label] = {
            "policy_put": [status, body],
            "policy": mq.get("policy", "<absent>"),
            "effective_policy_definition": mq.get("effective_policy_definition", "<absent>"),
        }
    return out


@scenario
def scenario_st_retention_segments(ctx: QsCtx) -> Observation:
    """x-max-length-bytes applies per segment: with small segments old segments are dropped."""
    conn, ch, s = durable_queue_with(
        ctx,
        "s",
        {**ST, "x-max-length-bytes": 2000, "x-stream-max-segment-size-bytes": 500},
        [f"{i:03d}" + "x" * 97 for i in range(60)],
    )
    # retention runs asynchronously after each segment roll: read until the head stops moving
    res: dict[str, Any] = {}
    heads: list[Any] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        res = _consume_stream(ctx, conn, s, "first", want=60, quiet=0.3)
        heads.append(res.get("offsets", [None])[0] if res.get("offsets") else None)
        if len(heads) >= 3 and heads[-1] == heads[-2] == heads[-3]:
            break
        time.sleep(0.5)
    out: dict[str, Any] = {}
    if "bodies" in res:
        offsets, bodies = res["offsets"], [b[:3] for b in res["bodies"]]
        out["first_offset"] = offsets[0] if offsets else None
        out["count"] = len(bodies)
        out["last_offset"] = offsets[-1] if offsets else None
        out["last_body"] = bodies[-1] if bodies else None
        out["bodies_are_a_contiguous_tail"] = bodies == [f"{i:03d}" for i in range(60 - len(bodies), 60)]
        out["offset_steps"] = sorted({b - a for a, b in pairwise(offsets)})
    else:
        out["error"] = res
    out["passive"] = stream_count(attempt(lambda: ch.queue_declare(s, passive=True)))
    return out


# --------------------------------------------------------------------------------------------------
# hash routing into quorum queues and streams
# --------------------------------------------------------------------------------------------------

HASH_KEYS = [f"key-{i}" for i in range(1000)]


def _hash_destinations(
    ctx: QsCtx, tag: str, exchange_type: str, kinds: list[tuple[str, dict[str, Any]]]
) -> str:
    """Bind one queue per (binding key, arguments) in order, publish HASH_KEYS, and return one letter per
    key naming the queue it reached ('-' for none)."""
    conn = ctx.connect()
    ch = conn.channel()
    x = ctx.exchange(tag)
    ch.exchange_declare(x, exchange_type)
    names = []
    for idx, (binding_key, args) in enumerate(kinds):
        name = ctx.queue(f"{tag}_{idx}")
        ch.queue_declare(name, durable=True, arguments=args)
        ch.queue_bind(name, x, routing_key=binding_key)
        names.append((name, args.get("x-queue-type", "classic")))
    pub = conn.channel()
    for key in HASH_KEYS:
        pub.basic_publish(x, key, key.encode())
    # wait until the non-stream queues plus the streams hold every key
    where: dict[str, str] = {}
    deadline = time.monotonic() + 30
    pending = list(enumerate(names))
    while pending and time.monotonic() < deadline:
        for idx, (name, qtype) in list(pending):
            letter = "ABCDEFGH"[idx]
            if qtype == "stream":
                res = _consume_stream(ctx, conn, name, "first", prefetch=1000, want=len(HASH_KEYS), quiet=1.0)
                got = res["bodies"]
                fresh = [b for b in got if b not in where]
            else:
                fresh = [m["body"] for m in drain(ch, name, headers_only=True)]
            for body in fresh:
                where[body] = letter
        if len(where) >= len(HASH_KEYS):
            break
        time.sleep(0.3)
    return "".join(where.get(k, "-") for k in HASH_KEYS)


@scenario
def scenario_hash_routing_into_quorum_and_stream(ctx: QsCtx) -> Observation:
    """x-consistent-hash and x-modulus-hash bound to classic / quorum / stream route identically."""
    out: dict[str, Any] = {}
    for xtype, weights in (("x-consistent-hash", ("1", "2", "3")), ("x-modulus-hash", ("", "", ""))):
        per_kind = {}
        for combo in ("classic", "quorum", "stream", "mixed"):
            if combo == "mixed":
                types = [{}, QQ, ST]
            else:
                types = [{} if combo == "classic" else {"x-queue-type": combo}] * 3
            kinds = [(weights[i], types[i]) for i in range(3)]
            per_kind[combo] = _hash_destinations(ctx, f"{xtype[2:5]}_{combo}", xtype, kinds)
        out[xtype] = {
            "destinations_classic": per_kind["classic"],
            "counts": {k: {c: v.count(c) for c in "ABC-"} for k, v in per_kind.items()},
            "quorum_equals_classic": per_kind["quorum"] == per_kind["classic"],
            "stream_equals_classic": per_kind["stream"] == per_kind["classic"],
            "mixed_equals_classic": per_kind["mixed"] == per_kind["classic"],
        }
    return out
