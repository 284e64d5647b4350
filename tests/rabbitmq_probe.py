"""What the reference RabbitMQ of this machine can do, probed once per test session.

The live tests compare hashbroker with a real RabbitMQ 3.10.8. A machine may have none, or one
without the plugins whose exchange types the tests declare; those tests must then skip with a reason
that says what is missing and how to enable it, never fail with ``503 unknown exchange type``.

Which RabbitMQ (:func:`select_target`, once per session): the environment override below when set;
else, where the ``testcontainers`` package imports and a Docker daemon answers, a
``rabbitmq:3.10.8-management`` container with the consistent-hash and sharding plugins enabled, on
its mapped ports; else the local RabbitMQ on 127.0.0.1:5672; else the live tests skip, saying why.

Environment overrides (also how to simulate the other machines):

* ``HASHBROKER_TEST_RABBITMQ=host:port`` probes another broker; ``none`` (or a port where nothing
  listens, e.g. ``127.0.0.1:1``) means "no RabbitMQ".
* ``HASHBROKER_TEST_RABBITMQ_CONTAINER=off`` never starts a container, even where Docker runs.
* ``HASHBROKER_TEST_RABBITMQ_MANAGEMENT=host:port`` is where the management API is looked for
  (default: the AMQP host, port 15672).
* ``HASHBROKER_TEST_RABBITMQ_PLUGINS_MISSING=plugin,...`` (or ``all``) treats those plugins as not
  enabled, whatever the probe found.
"""

from __future__ import annotations

import atexit
import base64
import importlib.util
import os
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

#: The plugins the live tests depend on, with the exchange type each one adds (None: no type).
PLUGINS: dict[str, str | None] = {
    "rabbitmq_consistent_hash_exchange": "x-consistent-hash",
    "rabbitmq_sharding": "x-modulus-hash",
    "rabbitmq_management": None,
    "rabbitmq_random_exchange": "x-random",
    "rabbitmq_recent_history_exchange": "x-recent-history",
    "rabbitmq_jms_topic_exchange": "x-jms-topic",
}
CONSISTENT_HASH = "rabbitmq_consistent_hash_exchange"
SHARDING = "rabbitmq_sharding"
MANAGEMENT = "rabbitmq_management"

PROBE_TIMEOUT = 3.0
CONTAINER_IMAGE = "rabbitmq:3.10.8-management"
CONTAINER_READY_TIMEOUT = 180.0
#: Written by the container's command, named by RABBITMQ_ENABLED_PLUGINS_FILE: the image's own file
#: enables only the management plugin.
_PLUGINS_FILE = "/tmp/hashbroker_enabled_plugins"
_OVERRIDES = ("HASHBROKER_TEST_RABBITMQ", "HASHBROKER_RABBITMQ_HOST", "HASHBROKER_RABBITMQ_PORT")


def _address(value: str, default_port: int) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host:
        return value, default_port
    return host, int(port)


@dataclass(frozen=True)
class Target:
    """Where the reference RabbitMQ is expected (AMQP and management addresses)."""

    amqp: tuple[str, int] | None
    management: tuple[str, int] | None
    assumed_missing: frozenset[str] = frozenset()

    @property
    def url(self) -> str:
        host, port = self.amqp or ("127.0.0.1", 5672)
        return f"amqp://guest:guest@{host}:{port}/%2F"

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Target:
        env = dict(os.environ) if env is None else env
        raw = env.get("HASHBROKER_TEST_RABBITMQ")
        if raw is None:  # the older pair of variables, still honoured
            host = env.get("HASHBROKER_RABBITMQ_HOST", "127.0.0.1")
            raw = f"{host}:{env.get('HASHBROKER_RABBITMQ_PORT', '5672')}"
        amqp = None if raw.strip().lower() in ("", "none", "off") else _address(raw.strip(), 5672)
        mgmt_raw = env.get("HASHBROKER_TEST_RABBITMQ_MANAGEMENT")
        if mgmt_raw is not None:
            management = (
                None if mgmt_raw.strip().lower() in ("", "none", "off") else _address(mgmt_raw, 15672)
            )
        else:
            management = None if amqp is None else (amqp[0], 15672)
        missing_raw = env.get("HASHBROKER_TEST_RABBITMQ_PLUGINS_MISSING", "")
        if missing_raw.strip().lower() == "all":
            missing = frozenset(PLUGINS)
        else:
            missing = frozenset(p.strip() for p in missing_raw.split(",") if p.strip())
        return cls(amqp, management, missing)


@dataclass(frozen=True)
class Probe:
    """The outcome: whether RabbitMQ answered, and which of :data:`PLUGINS` are usable."""

    target: Target
    reachable: bool
    unreachable_reason: str = ""
    enabled: frozenset[str] = field(default_factory=frozenset)

    def skip_reason(self, *plugins: str) -> str | None:
        """Why a test needing RabbitMQ (and ``plugins``) cannot run here; None when it can."""
        if not self.reachable:
            return self.unreachable_reason
        for plugin in plugins:
            if plugin not in self.enabled:
                return missing_plugin_reason(self.target, plugin)
        return None


def missing_plugin_reason(target: Target, plugin: str) -> str:
    host, port = target.amqp or ("?", 0)
    provides = PLUGINS.get(plugin)
    what = (
        f"exchange type '{provides}'"
        if provides
        else f"HTTP API on {':'.join(map(str, target.management or ('?', 0)))}"
    )
    return (
        f"the reference RabbitMQ on {host}:{port} lacks the {plugin} plugin ({what}); "
        f"enable it with: rabbitmq-plugins enable {plugin}"
    )


def _declare_works(url: str, exchange_type: str) -> bool:
    """Declare (and delete) a throwaway exchange of ``exchange_type``; False when RabbitMQ refuses it.

    An unknown type closes the connection (503), so each type gets a connection of its own.
    """
    import pika
    import pika.exceptions

    params = pika.URLParameters(url)
    params.socket_timeout = PROBE_TIMEOUT
    params.blocked_connection_timeout = PROBE_TIMEOUT
    params.connection_attempts = 1
    conn = pika.BlockingConnection(params)
    try:
        ch = conn.channel()
        name = f"hb.probe.{uuid.uuid4().hex[:10]}"
        ch.exchange_declare(name, exchange_type, auto_delete=True)
        ch.exchange_delete(name)
        return True
    except pika.exceptions.AMQPError:
        return False
    finally:
        if conn.is_open:
            conn.close()


def _management_works(address: tuple[str, int]) -> bool:
    host, port = address
    req = urllib.request.Request(f"http://{host}:{port}/api/overview")
    req.add_header("authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
    try:
        with urllib.request.urlopen(req, timeout=PROBE_TIMEOUT) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def probe(target: Target, note: str = "") -> Probe:
    """Connect; declare one exchange of each plugin's type; ask the management API for /overview.

    ``note`` says why no container was used; it ends the reason when nothing answers either.
    """
    import pika
    import pika.exceptions

    if target.amqp is None:
        return Probe(target, False, "no reference RabbitMQ configured (HASHBROKER_TEST_RABBITMQ=none)")
    host, port = target.amqp
    try:
        params = pika.URLParameters(target.url)
        params.socket_timeout = PROBE_TIMEOUT
        params.connection_attempts = 1
        pika.BlockingConnection(params).close()
    except (pika.exceptions.AMQPError, OSError) as exc:
        return Probe(
            target,
            False,
            f"no reference RabbitMQ reachable on {host}:{port} ({type(exc).__name__}); "
            "set HASHBROKER_TEST_RABBITMQ=host:port to use another one" + (f"; {note}" if note else ""),
        )
    enabled = set()
    for plugin, exchange_type in PLUGINS.items():
        if plugin in target.assumed_missing:
            continue
        if exchange_type is not None:
            ok = _declare_works(target.url, exchange_type)
        else:
            ok = target.management is not None and _management_works(target.management)
        if ok:
            enabled.add(plugin)
    return Probe(target, True, "", frozenset(enabled))


@dataclass(frozen=True)
class Selection:
    """The chosen target, where it came from (environment, container, local), and why no container."""

    target: Target
    origin: str
    note: str = ""


def docker_unavailable_reason(env: dict[str, str] | None = None) -> str | None:
    """None when a RabbitMQ container can be started here; otherwise why not."""
    env = dict(os.environ) if env is None else env
    if env.get("HASHBROKER_TEST_RABBITMQ_CONTAINER", "").strip().lower() in ("off", "0", "no", "false"):
        return "no container: HASHBROKER_TEST_RABBITMQ_CONTAINER=off"
    if importlib.util.find_spec("testcontainers") is None:
        return "no container: the testcontainers package is not installed"
    try:
        import docker

        docker.from_env(timeout=int(PROBE_TIMEOUT)).ping()
    except Exception as exc:  # the docker SDK raises its own types and plain OSErrors alike
        return f"no container: no Docker daemon answers ({type(exc).__name__})"
    return None


def container_command() -> list[str]:
    """The container's command: enable the plugins the live tests need, then RabbitMQ's entrypoint."""
    plugins = ",".join(PLUGINS)
    return [
        "bash",
        "-c",
        f"echo '[{plugins}].' > {_PLUGINS_FILE} && exec docker-entrypoint.sh rabbitmq-server",
    ]


def start_rabbitmq_container() -> tuple[tuple[str, int], tuple[str, int]]:
    """Start the reference RabbitMQ in Docker (stopped at exit); its AMQP and management addresses."""
    from testcontainers.core.container import DockerContainer

    container = (
        DockerContainer(CONTAINER_IMAGE)
        .with_exposed_ports(5672, 15672)
        .with_env("RABBITMQ_ENABLED_PLUGINS_FILE", _PLUGINS_FILE)
        .with_command(container_command())
    )
    container.start()
    atexit.register(container.stop)
    host = container.get_container_host_ip()
    amqp = (host, int(container.get_exposed_port(5672)))
    management = (host, int(container.get_exposed_port(15672)))
    _wait_ready(Target(amqp, management), CONTAINER_READY_TIMEOUT)
    return amqp, management


def _wait_ready(target: Target, timeout: float) -> None:
    """Until AMQP and the management API answer (RabbitMQ boots after the port is mapped)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert target.management is not None
        if probe(target).reachable and _management_works(target.management):
            return
        time.sleep(1.0)
    raise TimeoutError(f"the RabbitMQ container did not answer on {target.amqp} within {timeout:.0f} s")


def select_target(
    env: dict[str, str] | None = None,
    *,
    unavailable: Callable[[dict[str, str]], str | None] = docker_unavailable_reason,
    start: Callable[[], tuple[tuple[str, int], tuple[str, int]]] = start_rabbitmq_container,
) -> Selection:
    """The environment's target if set; else a container where Docker runs; else the local one."""
    env = dict(os.environ) if env is None else env
    configured = Target.from_env(env)
    if any(name in env for name in _OVERRIDES):
        return Selection(configured, "environment")
    note = unavailable(env)
    if note is None:
        try:
            amqp, management = start()
        except Exception as exc:  # an image pull or a daemon error: the local RabbitMQ may still do
            note = f"the {CONTAINER_IMAGE} container did not start ({type(exc).__name__}: {exc})"
        else:
            return Selection(Target(amqp, management, configured.assumed_missing), "container")
    return Selection(configured, "local", note)


@cache
def session_selection() -> Selection:
    """This session's choice (at most one container per process)."""
    return select_target()


def session_target() -> Target:
    return session_selection().target


@cache
def session_probe() -> Probe:
    """The probe of this session's target (run at most once per process)."""
    selection = session_selection()
    return probe(selection.target, selection.note)
