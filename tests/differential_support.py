"""Shared machinery for the differential tests (RabbitMQ 3.10.8 is the oracle, hashbroker the subject).

A *scenario* is written once as ``def scenario(ctx: Ctx) -> Observation`` and registered in a
:class:`Registry`; ``registry.run(name, url)`` turns it into the "function taking an AMQP URL and
returning an observation" that the issue asks for. The observation is a plain JSON-able value. Every
name a scenario creates comes from ``ctx`` so that

* it carries a random suffix (the live RabbitMQ is shared, runs must not collide),
* it is deleted at the end on a fresh connection (RabbitMQ must be left as it was found),
* it is replaced by a stable placeholder (``<q>``) in the observation, so that reply texts such as
  ``NOT_FOUND - no queue 'hb.q.1a2b' in vhost '/'`` compare equal between the two brokers.

The raw-socket client :class:`RawAmqp` (pamqp frames, no client library) is used where the exact order
of frames is the thing under test (basic.return before basic.ack, connection.tune values, channel
errors that client libraries refuse to provoke) and by the frame fuzzer.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any
from urllib.parse import unquote, urlparse

import pika
import pika.exceptions
import pytest
from pamqp import commands, frame, header, heartbeat
from pamqp.body import ContentBody

from tests.rabbitmq_probe import CONSISTENT_HASH, session_probe

Observation = Any
"""A JSON-able value (dicts with str keys, lists, str, int, float, bool, None)."""

ScenarioFn = Callable[["Ctx"], Observation]

#: Client-side socket timeout: a silent broker must fail a call, never hang it.
SOCKET_TIMEOUT = 5.0
#: How long a scenario waits for something that must arrive (deliveries, expiries).
WAIT = 5.0

_GENERATED = [
    (re.compile(r"amq\.gen-[A-Za-z0-9_\-]+"), "amq.gen-*"),
    (re.compile(r"amq\.ctag-[A-Za-z0-9_\-]+"), "amq.ctag-*"),
]


# --------------------------------------------------------------------------------------------------
# Observation helpers
# --------------------------------------------------------------------------------------------------


def jsonable(value: Any) -> Any:
    """Convert client-library values (bytes, Decimal, datetime, tuples) into plain JSON values.

    Types are kept visible where they matter for equality (bytes are tagged) so that a broker that
    turns a byte array into a string does not compare equal by accident.
    """
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return {"bytes": raw.decode()}
        except UnicodeDecodeError:
            return {"bytes_hex": raw.hex()}
    if isinstance(value, Decimal):
        return {"decimal": str(value)}
    if isinstance(value, datetime):
        return {"timestamp": int(value.timestamp())}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return {"repr": repr(value)}


def scrub(value: Any, replacements: dict[str, str]) -> Any:
    """Replace generated names (longest first) and server-generated names by stable placeholders."""
    if isinstance(value, dict):
        return {scrub(k, replacements): scrub(v, replacements) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v, replacements) for v in value]
    if isinstance(value, str):
        for real in sorted(replacements, key=len, reverse=True):
            value = value.replace(real, replacements[real])
        for pattern, placeholder in _GENERATED:
            value = pattern.sub(placeholder, value)
        return value
    return value


def props_obs(props: pika.BasicProperties | None, *, drop_headers: tuple[str, ...] = ()) -> dict[str, Any]:
    """The basic properties of a received message, None fields omitted."""
    if props is None:
        return {}
    out: dict[str, Any] = {}
    for name in (
        "content_type",
        "content_encoding",
        "headers",
        "delivery_mode",
        "priority",
        "correlation_id",
        "reply_to",
        "expiration",
        "message_id",
        "timestamp",
        "type",
        "user_id",
        "app_id",
        "cluster_id",
    ):
        val = getattr(props, name, None)
        if val is None:
            continue
        if name == "headers":
            val = {k: v for k, v in val.items() if k not in drop_headers}
        out[name] = jsonable(val)
    return out


def x_death_obs(headers: dict[str, Any] | None) -> Any:
    """The x-death header with its ``time`` entries reduced to their presence (wall clock differs)."""
    if not headers or "x-death" not in headers:
        return None
    deaths = []
    for entry in headers["x-death"]:
        item = {k: jsonable(v) for k, v in entry.items() if k != "time"}
        item["has_time"] = "time" in entry
        deaths.append(item)
    return deaths


# --------------------------------------------------------------------------------------------------
# Scenario context
# --------------------------------------------------------------------------------------------------


def url_params(url: str, **overrides: Any) -> pika.URLParameters:
    """pika parameters with client-side timeouts so that a silent broker fails instead of hanging."""
    params = pika.URLParameters(url)
    params.socket_timeout = SOCKET_TIMEOUT
    params.stack_timeout = SOCKET_TIMEOUT * 2
    params.blocked_connection_timeout = SOCKET_TIMEOUT * 2
    params.connection_attempts = 1
    for key, value in overrides.items():
        setattr(params, key, value)
    return params


@contextlib.contextmanager
def pika_channel(url: str) -> Iterator[Any]:
    """A channel on a new pika connection to `url` (its `.connection` for event processing); the
    connection is closed on exit, whatever the channel's state."""
    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        yield conn.channel()
    finally:
        with contextlib.suppress(pika.exceptions.ConnectionWrongStateError):
            conn.close()


def host_port(url: str) -> tuple[str, int]:
    parsed = urlparse(url)
    return parsed.hostname or "127.0.0.1", parsed.port or 5672


def credentials(url: str) -> tuple[str, str, str]:
    parsed = urlparse(url)
    vhost = unquote(parsed.path[1:]) if parsed.path and parsed.path != "/" else "/"
    return unquote(parsed.username or "guest"), unquote(parsed.password or "guest"), vhost


@dataclass
class Ctx:
    """Per-run state of one scenario against one broker."""

    url: str
    names: dict[str, str] = field(default_factory=dict)  # real name -> placeholder
    queues: list[str] = field(default_factory=list)
    exchanges: list[str] = field(default_factory=list)
    connections: list[pika.BlockingConnection] = field(default_factory=list)
    raws: list[RawAmqp] = field(default_factory=list)

    # names -----------------------------------------------------------------------------------------
    def name_for(self, label: str) -> str:
        real = f"hb.{label}.{uuid.uuid4().hex[:12]}"
        self.names[real] = f"<{label}>"
        return real

    def queue(self, label: str = "q") -> str:
        """A unique queue name, deleted at the end."""
        real = self.name_for(label)
        self.queues.append(real)
        return real

    def exchange(self, label: str = "x") -> str:
        """A unique exchange name, deleted at the end."""
        real = self.name_for(label)
        self.exchanges.append(real)
        return real

    def register(self, real: str, label: str) -> str:
        """Scrub a name that the scenario built itself (e.g. with a reserved prefix)."""
        self.names[real] = f"<{label}>"
        return real

    def confirm_channel(self, conn: pika.BlockingConnection) -> Any:
        """A channel in confirm mode: each basic_publish returns only once the broker confirmed it.

        RabbitMQ answers queue.declare (stat) with priority over pending deliveries, so a count read
        right after an unconfirmed publish is racy there; confirmed publishes make counts exact.
        """
        ch = conn.channel()
        ch.confirm_delivery()
        return ch

    def confirmed_queue(
        self, messages: int = 0, label: str = "q", **declare: Any
    ) -> tuple[pika.BlockingConnection, Any, str]:
        """A new connection, a confirming channel on it and a new queue `label` (declared with
        `declare`) holding `messages` messages m0, m1, ... (each confirmed)."""
        conn = self.connect()
        ch = self.confirm_channel(conn)
        q = self.queue(label)
        ch.queue_declare(q, **declare)
        for i in range(messages):
            ch.basic_publish("", q, f"m{i}".encode())
        return conn, ch, q

    def token(self, label: str) -> str:
        """A unique string that is neither queue nor exchange (consumer tags, ids) but is scrubbed."""
        return self.name_for(label)

    # connections -----------------------------------------------------------------------------------
    def connect(self, **overrides: Any) -> pika.BlockingConnection:
        conn = pika.BlockingConnection(url_params(self.url, **overrides))
        self.connections.append(conn)
        return conn

    def channel(
        self, conn: pika.BlockingConnection | None = None
    ) -> pika.adapters.blocking_connection.BlockingChannel:
        """A new channel on ``conn`` (or on a fresh connection)."""
        conn = conn or self.connect()
        return conn.channel()

    def raw(self, **kwargs: Any) -> RawAmqp:
        host, port = host_port(self.url)
        user, password, vhost = credentials(self.url)
        raw = RawAmqp(host, port, user=user, password=password, vhost=vhost, **kwargs)
        self.raws.append(raw)
        return raw

    # cleanup ---------------------------------------------------------------------------------------
    def cleanup(self) -> None:
        """Close what the scenario opened and delete what it declared, ignoring every error."""
        for conn in self.connections:
            with contextlib.suppress(Exception):
                if conn.is_open:
                    conn.close()
        for raw in self.raws:
            raw.close()
        delete_declared(self.url, self.queues, self.exchanges)

    def scrub(self, value: Any) -> Any:
        return scrub(jsonable(value), self.names)


#: A value for every basic property but headers: what a broker must hand on unchanged.
ALL_PROPERTIES: dict[str, Any] = {
    "content_type": "text/plain",
    "content_encoding": "utf-8",
    "delivery_mode": 2,
    "priority": 3,
    "correlation_id": "corr",
    "reply_to": "back",
    "expiration": "60000",
    "message_id": "mid",
    "timestamp": 1_700_000_000,
    "type": "kind",
    "user_id": "guest",
    "app_id": "app",
    "cluster_id": "cl",
}

RABBITMQ_SERVER_PROPERTY_KEYS = [
    "capabilities",
    "cluster_name",
    "copyright",
    "information",
    "platform",
    "product",
    "version",
]
"""The keys of RabbitMQ 3.10.8's connection.start server-properties (clients expose the table as is)."""


def delete_declared(url: str, queues: list[str], exchanges: list[str]) -> None:
    """Delete what a scenario declared on the broker at `url`, ignoring every error (a refused
    delete closes the channel: go on with a new one)."""
    if not (queues or exchanges):
        return
    try:
        conn = pika.BlockingConnection(url_params(url))
    except Exception:
        return
    try:
        ch = conn.channel()
        for kind, names in (("q", queues), ("x", exchanges)):
            for name in names:
                try:
                    if kind == "q":
                        ch.queue_delete(name)
                    else:
                        ch.exchange_delete(name)
                except pika.exceptions.ChannelClosed:
                    ch = conn.channel()
    except Exception:
        pass
    finally:
        with contextlib.suppress(Exception):
            conn.close()


def attempt(fn: Callable[[], Any]) -> dict[str, Any]:
    """Run one client call; return its result or the broker's channel/connection close (code, text).

    Channel and connection errors are the *observations* of error scenarios, so they are returned,
    never raised. Anything else (timeouts, client bugs) propagates and fails the test.
    """
    try:
        result = fn()
        if hasattr(getattr(result, "method", None), "NAME"):
            return {"ok": method_obs(result)}
        return {"ok": jsonable(result)}
    except pika.exceptions.ChannelClosedByBroker as exc:
        return {"channel_close": [exc.reply_code, exc.reply_text]}
    except pika.exceptions.ConnectionClosedByBroker as exc:
        return {"connection_close": [exc.reply_code, exc.reply_text]}


def attempt_each(
    ctx: Ctx,
    cases: Mapping[str, Callable[[Any], Any]],
    conn: pika.BlockingConnection | None = None,
    observe: Callable[[Any], Any] = lambda result: result and "ok",
) -> dict[str, Any]:
    """Run each case on a fresh channel of `conn` (default: a new connection; a new one again after a
    case closed it), recording `observe(case(channel))` or the error, as `attempt` does."""
    conn = conn or ctx.connect()
    out: dict[str, Any] = {}
    for label, case in cases.items():
        ch = conn.channel()
        out[label] = attempt(lambda case=case, ch=ch: observe(case(ch)))
        if conn.is_closed:
            conn = ctx.connect()
    return out


def declare_each(ctx: Ctx, arguments: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """queue.declare of a fresh queue per case with that case's x-arguments (see `attempt_each`)."""
    return attempt_each(
        ctx,
        {
            label: (lambda c, label=label, args=args: c.queue_declare(ctx.queue(label), arguments=args))
            for label, args in arguments.items()
        },
    )


def method_obs(method_frame: Any) -> Any:
    """Fields of a pika method frame (e.g. Queue.DeclareOk) as a dict, with the method name."""
    method = getattr(method_frame, "method", method_frame)
    if method is None:
        return None
    out = {"method": method.NAME}
    out.update({k: jsonable(v) for k, v in sorted(vars(method).items())})
    return out


def get_all(ch: Any, queue: str, *, ack: bool = True, limit: int = 10_000) -> list[dict[str, Any]]:
    """Drain a queue with basic.get, observing body, redelivered flag, routing key and exchange."""
    out = []
    for _ in range(limit):
        method, _props, body = ch.basic_get(queue, auto_ack=False)
        if method is None:
            break
        out.append(
            {
                "body": body.decode(errors="replace"),
                "redelivered": method.redelivered,
                "exchange": method.exchange,
                "routing_key": method.routing_key,
                "message_count": method.message_count,
            }
        )
        if ack:
            ch.basic_ack(method.delivery_tag)
    return out


def bodies(ch: Any, queue: str) -> list[str]:
    """Just the bodies of a drained queue, in order."""
    return [m["body"] for m in get_all(ch, queue)]


def wait_for_count(ch: Any, queue: str, count: int, timeout: float = WAIT) -> int:
    """Poll a passive queue.declare until it reports ``count`` messages (or the timeout passes)."""
    deadline = time.monotonic() + timeout
    seen = -1
    while time.monotonic() < deadline:
        seen = ch.queue_declare(queue, passive=True).method.message_count
        if seen == count:
            return seen
        time.sleep(0.05)
    return seen


def consume_n(ch: Any, queue: str, n: int, *, auto_ack: bool = False, timeout: float = WAIT) -> list[Any]:
    """Consume exactly ``n`` deliveries (or fewer on timeout); returns (method, props, body) triples."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    for method, props, body in ch.consume(queue, auto_ack=auto_ack, inactivity_timeout=0.2):
        if method is not None:
            got.append((method, props, body))
        if len(got) >= n or time.monotonic() > deadline:
            break
    return got


# --------------------------------------------------------------------------------------------------
# Registry and the differential test driver
# --------------------------------------------------------------------------------------------------


SCENARIO_TIMEOUT = 25.0


def run_bounded(fn: Callable[[], Any], timeout: float, what: str) -> Any:
    """Run ``fn`` in a daemon thread; raise AssertionError if it has not finished in ``timeout`` s."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:
            box["error"] = exc

    worker = threading.Thread(target=target, name=f"bounded {what}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise AssertionError(f"{what} did not finish within {timeout:.0f}s (the broker stopped answering?)")
    if "error" in box:
        raise box["error"]
    return box.get("result")


class Registry:
    """Scenarios of one test module, in definition order."""

    def __init__(self) -> None:
        self.scenarios: dict[str, ScenarioFn] = {}
        self.slow: set[str] = set()

    def scenario(self, fn: ScenarioFn) -> ScenarioFn:
        self.add(fn.__name__.removeprefix("scenario_"), fn)
        return fn

    def add(self, name: str, fn: ScenarioFn) -> None:
        """Register `fn` as scenario `name` (for scenarios built from a table of cases)."""
        assert name not in self.scenarios, name
        self.scenarios[name] = fn

    def slow_scenario(self, fn: ScenarioFn) -> ScenarioFn:
        """A scenario that takes many seconds on each broker: its tests are marked ``slow``."""
        self.slow.add(fn.__name__.removeprefix("scenario_"))
        return self.scenario(fn)

    def run(self, name: str, url: str, timeout: float = SCENARIO_TIMEOUT) -> Observation:
        """Run scenario ``name`` against ``url`` and return its scrubbed observation.

        The scenario runs in a worker thread with a deadline: pika's blocking RPCs have no timeout of
        their own, so a broker that never answers must turn into a failure here, not a hang. Cleanup
        is bounded the same way (a graceful close waits for close-ok, which a broken broker may never
        send).
        """
        ctx = Ctx(url)
        try:
            obs = run_bounded(lambda: self.scenarios[name](ctx), timeout, f"scenario {name!r}")
            return ctx.scrub(obs)
        finally:
            with contextlib.suppress(Exception):
                run_bounded(ctx.cleanup, 10, "cleanup")

    def params(self) -> list[Any]:
        """pytest params: every scenario against RabbitMQ first, then against hashbroker."""
        out = []
        for name in self.scenarios:
            marks = [pytest.mark.live, *([pytest.mark.slow] if name in self.slow else [])]
            out.append(pytest.param(name, "rabbitmq", id=f"{name}-rabbitmq", marks=marks))
            out.append(pytest.param(name, "hashbroker", id=f"{name}-hashbroker", marks=marks))
        return out


_RABBIT_CACHE: dict[tuple[int, str], Observation] = {}


def hashbroker_url(request: pytest.FixtureRequest) -> str:
    """The URL of a fresh hashbroker: the ``hashbroker`` fixture, else an embedded BrokerThread.

    The fallback exists because the plugin is only registered once the package is pip-installed; a
    checkout where ``broker/`` is importable but not installed must still run the comparison.
    """
    try:
        url: str = request.getfixturevalue("hashbroker")
        return url
    except pytest.FixtureLookupError:
        pass
    try:
        from broker.embedded import BrokerThread  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        pytest.skip(
            f"hashbroker unavailable: no 'hashbroker' fixture and broker.embedded not importable ({exc})"
        )
    thread = BrokerThread(port=0)
    thread.__enter__()
    request.addfinalizer(lambda: thread.__exit__(None, None, None))
    return str(thread.url)


def run_differential(registry: Registry, name: str, target: str, request: pytest.FixtureRequest) -> None:
    """The body of every differential test: record RabbitMQ's observation, compare hashbroker's."""
    rabbit_url: str = request.getfixturevalue("rabbitmq_url")
    key = (id(registry), name)
    if target == "rabbitmq" or key not in _RABBIT_CACHE:
        obs = registry.run(name, rabbit_url)
        json.dumps(obs)  # the observation must be plain JSON
        _RABBIT_CACHE[key] = obs
    expected = _RABBIT_CACHE[key]
    if target == "rabbitmq":
        return
    assert_same_observation(name, registry.run(name, hashbroker_url(request)), expected)


def assert_same_observation(name: str, actual: Any, expected: Any) -> None:
    """Fail, showing both observations, where hashbroker's (actual) differs from RabbitMQ's."""
    if actual != expected:
        pytest.fail(
            "hashbroker differs from RabbitMQ 3.10.8 in scenario "
            f"{name!r}\n--- rabbitmq\n{json.dumps(expected, indent=1, sort_keys=True)}\n"
            f"--- hashbroker\n{json.dumps(actual, indent=1, sort_keys=True)}",
            pytrace=False,
        )


# --------------------------------------------------------------------------------------------------
# Raw AMQP over a socket (pamqp frames)
# --------------------------------------------------------------------------------------------------

FrameT = Any


class RawClosed(Exception):
    """The peer closed the socket."""


def recv_chunk(sock: socket.socket, deadline: float) -> bytes:
    """The next bytes the server sends before the monotonic `deadline`: TimeoutError if it stays
    silent, RawClosed if it closes (or resets) the socket."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("no frame from the server")
    sock.settimeout(remaining)
    try:
        chunk = sock.recv(65536)
    except TimeoutError:
        raise TimeoutError("no frame from the server") from None
    except ConnectionError as exc:
        raise RawClosed(str(exc)) from exc
    if not chunk:
        raise RawClosed("EOF")
    return chunk


def split_frames(data: bytes) -> tuple[list[tuple[int, FrameT]], bytes]:
    """The whole frames at the start of `data` as (channel, value), and the bytes left after them
    (an incomplete or undecodable frame)."""
    out = []
    while data:
        try:
            used, channel, value = frame.unmarshal(data)
        except Exception:
            break
        data = data[used:]
        out.append((channel, value))
    return out, data


class RawAmqp:
    """A minimal AMQP 0-9-1 client on a plain socket, for frame-exact observations.

    It does only what the tests need: handshake, send frames, receive frames with a deadline. It never
    answers anything on its own (no heartbeats), so it sees exactly what the server sends.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        user: str = "guest",
        password: str = "guest",
        vhost: str = "/",
        timeout: float = SOCKET_TIMEOUT,
        handshake: bool = True,
        heartbeat: int = 0,
        frame_max: int | None = None,
        channel_max: int | None = None,
    ) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.buf = b""
        self.tune: commands.Connection.Tune | None = None
        self.start: commands.Connection.Start | None = None
        self.user, self.password, self.vhost = user, password, vhost
        if handshake:
            self.handshake(heartbeat=heartbeat, frame_max=frame_max, channel_max=channel_max)

    def handshake(
        self, *, heartbeat: int = 0, frame_max: int | None = None, channel_max: int | None = None
    ) -> None:
        self.greet()
        self.login()
        self.tune_and_open(heartbeat=heartbeat, frame_max=frame_max, channel_max=channel_max)
        self.expect(commands.Connection.OpenOk)

    # the handshake's steps, for scenarios that stop or go wrong part way --------------------------
    def greet(self) -> commands.Connection.Start:
        """Send the protocol header; the server's connection.start."""
        self.sock.sendall(frame.marshal(header.ProtocolHeader(), 0))
        start: commands.Connection.Start = self.expect(commands.Connection.Start)
        self.start = start
        return start

    def login(self, product: str = "hashbroker-tests") -> commands.Connection.Tune:
        """connection.start-ok with PLAIN user and password; the server's connection.tune."""
        response = f"\0{self.user}\0{self.password}"
        self.send(0, commands.Connection.StartOk(client_properties={"product": product}, response=response))
        tune: commands.Connection.Tune = self.expect(commands.Connection.Tune)
        self.tune = tune
        return tune

    def tune_and_open(
        self,
        *,
        heartbeat: int = 0,
        frame_max: int | None = None,
        channel_max: int | None = None,
        vhost: str | None = None,
    ) -> None:
        """connection.tune-ok (the server's limits unless given) and connection.open."""
        assert self.tune is not None, "login() first"
        self.send(
            0,
            commands.Connection.TuneOk(
                channel_max=self.tune.channel_max if channel_max is None else channel_max,
                frame_max=self.tune.frame_max if frame_max is None else frame_max,
                heartbeat=heartbeat,
            ),
        )
        self.send(0, commands.Connection.Open(virtual_host=self.vhost if vhost is None else vhost))

    # io --------------------------------------------------------------------------------------------
    def send(self, channel: int, value: Any) -> None:
        self.sock.sendall(frame.marshal(value, channel))

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def publish(
        self,
        channel: int,
        exchange: str,
        routing_key: str,
        body: bytes,
        *,
        mandatory: bool = False,
        properties: commands.Basic.Properties | None = None,
    ) -> None:
        bodies = (body,) if body else ()
        self.sock.sendall(
            publish_frames(
                routing_key,
                *bodies,
                exchange=exchange,
                channel=channel,
                properties=properties,
                mandatory=mandatory,
            )
        )

    def recv(self, timeout: float = SOCKET_TIMEOUT) -> tuple[int, FrameT]:
        """The next frame (skipping heartbeats); raises RawClosed on EOF, TimeoutError on silence."""
        deadline = time.monotonic() + timeout
        while True:
            if self.buf:
                try:
                    used, channel, value = frame.unmarshal(self.buf)
                except Exception:
                    used = 0
                if used:
                    self.buf = self.buf[used:]
                    if isinstance(value, heartbeat.Heartbeat):
                        continue
                    return channel, value
            self.buf += recv_chunk(self.sock, deadline)

    def read_until_closed(self, seconds: float, poll: float = 0.2) -> tuple[bytes, float | None]:
        """The raw bytes the server sends for up to `seconds`, and how many seconds passed before
        it closed the socket (None if it kept it open)."""
        start = time.monotonic()
        self.sock.settimeout(poll)
        data = b""
        while time.monotonic() - start < seconds:
            try:
                chunk = self.sock.recv(4096)
            except TimeoutError:
                continue
            except ConnectionError:
                chunk = b""
            if not chunk:
                return data, time.monotonic() - start
            data += chunk
        return data, None

    def expect(self, kind: type, timeout: float = SOCKET_TIMEOUT) -> Any:
        channel, value = self.recv(timeout)
        if not isinstance(value, kind):
            raise AssertionError(f"expected {kind.__name__}, got {value!r} on channel {channel}")
        return value

    def call(self, channel: int, method: Any, reply: type, timeout: float = SOCKET_TIMEOUT) -> Any:
        self.send(channel, method)
        return self.expect(reply, timeout)

    def open_channel(self, channel: int) -> None:
        self.call(channel, commands.Channel.Open(), commands.Channel.OpenOk)

    def frames_until_quiet(self, quiet: float = 0.5, limit: int = 1000) -> list[tuple[int, FrameT]]:
        """Every frame until the server stays silent for ``quiet`` seconds or closes."""
        out = []
        for _ in range(limit):
            try:
                out.append(self.recv(quiet))
            except (TimeoutError, RawClosed):
                break
        return out

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def publish_frames(
    routing_key: str,
    *bodies: bytes,
    size: int | None = None,
    exchange: str = "",
    channel: int = 1,
    properties: commands.Basic.Properties | None = None,
    **publish: Any,
) -> bytes:
    """basic.publish (with `publish`'s flags), a content header declaring `size` bytes (by default
    what `bodies` hold) and one body frame per body, as bytes on the wire."""
    data = frame.marshal(
        commands.Basic.Publish(exchange=exchange, routing_key=routing_key, **publish), channel
    )
    declared = sum(map(len, bodies)) if size is None else size
    data += frame.marshal(
        header.ContentHeader(0, declared, properties or commands.Basic.Properties()), channel
    )
    for body in bodies:
        data += frame.marshal(ContentBody(body), channel)
    return data


def frame_obs(channel: int, value: Any) -> Any:
    """A compact, comparable description of a received frame."""
    if isinstance(value, ContentBody):
        return [channel, "body", value.value.decode(errors="replace")]
    if isinstance(value, header.ContentHeader):
        return [channel, "header", value.body_size]
    name = getattr(value, "name", type(value).__name__)
    try:
        fields = {key: jsonable(val) for key, val in value}
    except TypeError:
        fields = {}
    return [channel, name, fields]


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fail (not hang) when a block runs longer than ``seconds``; a belt to pytest-timeout's braces."""
    start = time.monotonic()
    yield
    elapsed = time.monotonic() - start
    if elapsed > seconds:
        raise AssertionError(f"block took {elapsed:.1f}s > {seconds}s")


# --------------------------------------------------------------------------------------------------
# Client tests: the seed README's consistent-hash examples
# --------------------------------------------------------------------------------------------------

#: Messages per README example (the README publishes 100,000); overridable for quick local runs.
CLIENT_MESSAGES = int(__import__("os").environ.get("HASHBROKER_CLIENT_MESSAGES", "100000"))
#: Header/property examples for clients other than the README's own (pika, Bunny) use fewer messages,
#: compared with the live RabbitMQ for the same count, to keep all client tests under ~4 minutes.
CLIENT_MESSAGES_SMALL = int(__import__("os").environ.get("HASHBROKER_CLIENT_MESSAGES_SMALL", "20000"))


def messages_for(example: str, readme_client: bool) -> int:
    """100,000 where the README runs the example with this client (and always for routing keys)."""
    return CLIENT_MESSAGES if example == "routing_key" or readme_client else CLIENT_MESSAGES_SMALL


README_QUEUES = ["q1", "q2", "q3", "q4"]
README_WEIGHTS = ["1", "1", "2", "2"]
#: The three README examples: exchange arguments and how message i carries its hash input.
README_EXAMPLES: dict[str, dict[str, Any]] = {
    "routing_key": {"exchange": "e", "arguments": {}},
    "hash_header": {"exchange": "e2", "arguments": {"hash-header": "hash-on"}},
    "hash_property": {"exchange": "e3", "arguments": {"hash-property": "message_id"}},
}

_TRUTH_CACHE: dict[tuple[str, int], list[int]] = {}


def readme_publish_args(example: str, i: int) -> tuple[str, dict[str, Any]]:
    """(routing_key, property kwargs) of message i in a README example, client-neutral."""
    if example == "routing_key":
        return str(i), {}
    if example == "hash_header":
        return "", {"headers": {"hash-on": str(i)}, "content_type": "text/plain", "delivery_mode": 2}
    return "", {"message_id": str(i)}


def declare_readme_topology(ch: Any, exchange: str, arguments: dict[str, Any], queues: list[str]) -> None:
    """The README topology on a pika channel: queues q1,q2 weight 1 and q3,q4 weight 2, purged."""
    ch.exchange_declare(exchange, "x-consistent-hash", durable=True, arguments=arguments or None)
    for q in queues:
        ch.queue_declare(q, durable=True)
        ch.queue_purge(q)
    for q, weight in zip(queues, README_WEIGHTS, strict=True):
        ch.queue_bind(q, exchange, weight)


def queue_counts(url: str, queues: list[str], expected_total: int, timeout: float = 60.0) -> list[int]:
    """Per-queue ready counts once they add up to ``expected_total`` (or whatever is there at timeout)."""
    conn = pika.BlockingConnection(url_params(url))
    try:
        ch = conn.channel()
        deadline = time.monotonic() + timeout
        while True:
            counts = [ch.queue_declare(q, passive=True).method.message_count for q in queues]
            if sum(counts) >= expected_total or time.monotonic() > deadline:
                return counts
            time.sleep(0.1)
    finally:
        conn.close()


def expected_readme_counts(
    example: str, n: int, reference: dict[str, Any] | None, rabbitmq_url: str | None
) -> list[int]:
    """What RabbitMQ 3.10.8 yields for a README example: the recorded reference for routing keys
    0..99999, otherwise measured on the live RabbitMQ (once per session, fresh unique names)."""
    if example == "routing_key" and reference is not None:
        # the reference records the queue of every key "0".."99999": any prefix is known exactly
        per_key: str = reference["big"]["chx_weights_1_1_2_2"]["per_key_queue_index"]
        if n <= len(per_key):
            prefix = per_key[:n]
            return [prefix.count(str(k)) for k in range(len(README_QUEUES))]
    key = (example, n)
    if key in _TRUTH_CACHE:
        return _TRUTH_CACHE[key]
    if rabbitmq_url is None:
        pytest.skip(f"no reference RabbitMQ to measure example {example!r} with {n} messages")
    if (reason := session_probe().skip_reason(CONSISTENT_HASH)) is not None:
        pytest.skip(reason)
    suffix = uuid.uuid4().hex[:10]
    exchange = f"hb.truth.{example}.{suffix}"
    queues = [f"hb.truth.{q}.{suffix}" for q in README_QUEUES]
    conn = pika.BlockingConnection(url_params(rabbitmq_url))
    try:
        ch = conn.channel()
        declare_readme_topology(ch, exchange, README_EXAMPLES[example]["arguments"], queues)
        for i in range(n):
            rk, props = readme_publish_args(example, i)
            ch.basic_publish(exchange, rk, b"", pika.BasicProperties(**props) if props else None)
        counts = queue_counts(rabbitmq_url, queues, n)
        for q in queues:
            ch.queue_delete(q)
        ch.exchange_delete(exchange)
    finally:
        conn.close()
    _TRUTH_CACHE[key] = counts
    return counts


@contextlib.contextmanager
def rabbitmqctl_vhost(prefix: str) -> Iterator[str]:
    """A throw-away vhost made by rabbitmqctl on the reference RabbitMQ, guest allowed everything in
    it, deleted afterwards; skips where rabbitmqctl or the reference RabbitMQ is not there."""
    if shutil.which("rabbitmqctl") is None or not session_probe().reachable:
        pytest.skip("rabbitmqctl or the reference RabbitMQ is not available to compare with")
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    subprocess.run(["rabbitmqctl", "add_vhost", name], check=True, capture_output=True)
    try:
        subprocess.run(
            ["rabbitmqctl", "set_permissions", "-p", name, "guest", ".*", ".*", ".*"],
            check=True,
            capture_output=True,
        )
        yield name
    finally:
        subprocess.run(["rabbitmqctl", "delete_vhost", name], capture_output=True)


#: RabbitMQ's stream protocol port (the stream plugin's listener) on this machine.
RABBIT_STREAM = ("127.0.0.1", 5552)


def rabbitmq_stream_answers() -> bool:
    """Whether RabbitMQ's stream port accepts a connection."""
    try:
        with socket.create_connection(RABBIT_STREAM, timeout=1):
            return True
    except OSError:
        return False


def needs_rabbitmq_stream() -> pytest.MarkDecorator:
    """A skip mark, for a module that drives RabbitMQ's stream port, when that port does not answer."""
    return pytest.mark.skipif(
        not rabbitmq_stream_answers(),
        reason="RabbitMQ's stream port 5552 does not answer: rabbitmq-plugins enable rabbitmq_stream",
    )


def optional_rabbitmq_url(request: pytest.FixtureRequest) -> str | None:
    """The live RabbitMQ URL, or None when unreachable (callers skip only if they really need it).

    A test whose module needs a plugin (conftest's PLUGINS_BY_MODULE) that the reachable RabbitMQ
    lacks skips here, with the reason naming the plugin.
    """
    try:
        url: str = request.getfixturevalue("rabbitmq_url")
        return url
    except pytest.skip.Exception:
        if session_probe().reachable and request.node.get_closest_marker("rabbitmq_plugins") is not None:
            raise
        return None


def check_readme_counts(
    request: pytest.FixtureRequest, url: str, example: str, n: int = CLIENT_MESSAGES
) -> None:
    """Assert hashbroker's per-queue counts for a README example equal RabbitMQ's."""
    counts = queue_counts(url, README_QUEUES, n)
    reference = request.getfixturevalue("reference") if example == "routing_key" else None
    expected = expected_readme_counts(example, n, reference, optional_rabbitmq_url(request))
    assert sum(counts) == n, f"{example}: {sum(counts)} of {n} messages routed ({counts})"
    assert counts == expected, f"{example}: hashbroker {counts} != RabbitMQ 3.10.8 {expected}"


def pump(conn: pika.BlockingConnection, seconds: float) -> None:
    """Dispatch events for ``seconds`` (pika's time_limit returns early once anything was dispatched)."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        conn.process_data_events(time_limit=min(left, 0.05))
