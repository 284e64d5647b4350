"""`RabbitMqContainer`: testcontainers' RabbitMQ container, backed by an embedded hashbroker.

A test written for testcontainers runs unchanged once its import reads
`from broker.testing import RabbitMqContainer`: same constructor (image, port, username, password,
vhost, the RABBITMQ_DEFAULT_* environment variables), same methods (start, stop, context manager,
get_connection_params, get_container_host_ip, get_exposed_port, the with_* builders). Instead of a
Docker container (5-15 s per start) it starts a broker in a thread in about a tenth of a second, on
free ephemeral ports for AMQP and the management API, so any number can run at once.

As with the official image, the given user, password and vhost are the only ones created (guest
does not exist unless it is the user asked for), and the image tag picks the RabbitMQ version the
broker behaves as: `rabbitmq:3.10...` is 3.10.8, `rabbitmq:3.13...` (and `rabbitmq:3`) 3.13.0,
`rabbitmq:4...` and `latest` (which is a 4.x release) 4.3.0. Any other image or RabbitMQ series is
refused with a ValueError saying what is emulated, rather than silently behaving as another version.

Beyond the connection helpers: `exec()` runs the `rabbitmqctl`, `rabbitmq-diagnostics` and
`rabbitmq-plugins` commands the emulator can honour (others fail with exit code 126 and a message),
`get_logs()` returns the broker's log (with RabbitMQ's "Server startup complete" line, which log
wait strategies look for), `with_volume_mapping(host, "/var/lib/rabbitmq")` keeps the broker's data
in `host` across starts, and `waiting_for(strategy)` / `get_wrapped_container()` serve
testcontainers' wait strategies.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Self
from urllib.parse import quote

if TYPE_CHECKING:
    import pika

    from broker.embedded import BrokerThread

#: The port numbers inside RabbitMQ's image, which `get_exposed_port` maps to the bound ones.
AMQP_PORT = 5672
MANAGEMENT_PORT = 15672
#: What a `rabbitmq:4...` tag behaves as: the 4.x release hashbroker emulates.
RABBITMQ_4 = "4.3.0"
#: The plugins hashbroker always emulates (`rabbitmq-plugins list` in the container shows them on).
EMULATED_PLUGINS = (
    "rabbitmq_consistent_hash_exchange",
    "rabbitmq_delayed_message_exchange",
    "rabbitmq_management",
    "rabbitmq_sharding",
)

_VERSION = re.compile(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?")
#: Series hashbroker emulates: (major, minor) of a tag -> the version it behaves as.
_SERIES = {(3, 10): "3.10.8", (3, 13): "3.13.0"}
#: Tags without a version that name the newest release (a 4.x).
_LATEST = ("", "latest", "management", "alpine", "management-alpine")
#: Where RabbitMQ's image keeps its data: a volume mapped there keeps the broker's data dir.
DATA_PATH = "/var/lib/rabbitmq"


def compat_version(image: str) -> str:
    """The RabbitMQ version an image stands for; ValueError for an image or series not emulated."""
    emulated = "hashbroker emulates rabbitmq:3.10*, rabbitmq:3.13* and rabbitmq:4* (latest is 4.x)"
    name, colon, tag = image.rpartition(":")
    if not colon or "/" in tag:  # no tag, or the colon was a registry's port
        name, tag = image, ""
    if name.rsplit("/", 1)[-1] != "rabbitmq":
        raise ValueError(f"{image!r} is not a RabbitMQ image: {emulated}")
    if tag in _LATEST:
        return RABBITMQ_4
    match = _VERSION.match(tag)
    if match is None:
        raise ValueError(f"{image!r}: no RabbitMQ version in the tag {tag!r}: {emulated}")
    major, minor = int(match.group(1)), int(match.group(2) or -1)
    if major >= 4:
        return RABBITMQ_4
    if major == 3 and minor == -1:
        return _SERIES[(3, 13)]  # rabbitmq:3 is the newest 3.x
    version = _SERIES.get((major, minor))
    if version is None:
        raise ValueError(f"{image!r}: RabbitMQ {major}.{minor} is not emulated: {emulated}")
    return f"{major}.{minor}.{match.group(3)}" if match.group(3) and (major, minor) == (3, 13) else version


class ExecResult(NamedTuple):
    """What docker's `exec_run` (and testcontainers' `exec`) returns."""

    exit_code: int
    output: bytes


class _BrokerLog(logging.Handler):
    """The broker's log records, as the container's stdout: those of its own loop thread."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.thread: int | None = None
        self.raised_level = False
        self.setFormatter(
            logging.Formatter("%(asctime)s.%(msecs)03d [%(levelname)s] %(message)s", "%Y-%m-%d %H:%M:%S")
        )

    def emit(self, record: logging.LogRecord) -> None:
        mine = record.thread == self.thread if self.thread is not None else record.threadName == "hashbroker"
        if mine:
            self.lines.append(
                self.format(record).replace("[INFO]", "[info]").replace("[WARNING]", "[warning]")
            )

    def text(self) -> bytes:
        return "".join(line + "\n" for line in self.lines).encode()


class _Wrapped:
    """The part of docker's Container that testcontainers' wait strategies and users touch."""

    def __init__(self, owner: RabbitMqContainer) -> None:
        self.owner = owner
        self.name = self.id = f"hashbroker-{id(owner):x}"

    @property
    def status(self) -> str:
        return "running" if self.owner.running else "exited"

    @property
    def attrs(self) -> dict[str, Any]:
        return {"State": {"Status": self.status, "Running": self.owner.running}}

    def reload(self) -> None:
        """Nothing to refresh: the status is read live."""

    def logs(self, stdout: bool = True, stderr: bool = True, **_: Any) -> bytes:
        return self.owner.get_logs()[0] if stdout else b""

    def exec_run(self, cmd: str | list[str], **_: Any) -> ExecResult:
        return self.owner.exec(cmd)


class RabbitMqContainer:
    """Drop-in for `testcontainers.rabbitmq.RabbitMqContainer` (see the module docstring)."""

    def __init__(
        self,
        image: str = "rabbitmq:latest",
        port: int | None = None,
        username: str | None = None,
        password: str | None = None,
        vhost: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.image = image
        self.port = port or int(os.environ.get("RABBITMQ_NODE_PORT", AMQP_PORT))
        self.username = username or os.environ.get("RABBITMQ_DEFAULT_USER", "guest")
        self.password = password or os.environ.get("RABBITMQ_DEFAULT_PASS", "guest")
        self.vhost = vhost or os.environ.get("RABBITMQ_DEFAULT_VHOST", "/")
        self.env: dict[str, str] = {}
        self.ports: dict[int, int | None] = {self.port: None}
        self.docker_kwargs = kwargs
        self.compat = compat_version(image)
        self.volumes: dict[str, tuple[str, str]] = {}
        self.wait_strategy: Any = None
        self._broker: BrokerThread | None = None
        self._log = _BrokerLog()
        self._wrapped = _Wrapped(self)

    # -- testcontainers' builders (kept so chained calls still work; only env has an effect) -----
    def with_env(self, key: str, value: str) -> Self:
        """RABBITMQ_DEFAULT_USER / _PASS / _VHOST as the image reads them; others are kept only."""
        self.env[key] = str(value)
        attribute = {
            "RABBITMQ_DEFAULT_USER": "username",
            "RABBITMQ_DEFAULT_PASS": "password",
            "RABBITMQ_DEFAULT_VHOST": "vhost",
        }.get(key)
        if attribute is not None:
            setattr(self, attribute, str(value))
        return self

    def with_exposed_ports(self, *ports: int) -> Self:
        for port in ports:
            self.ports.setdefault(int(port), None)
        return self

    def with_bind_ports(self, container: int, host: int | None = None) -> Self:
        self.ports[int(container)] = host
        return self

    def with_name(self, name: str) -> Self:
        self.name = name
        return self

    def with_command(self, command: str) -> Self:
        self.command = command
        return self

    def with_kwargs(self, **kwargs: Any) -> Self:
        self.docker_kwargs.update(kwargs)
        return self

    def with_volume_mapping(self, host: str | os.PathLike[str], container: str, mode: str = "ro") -> Self:
        """A host directory mapped to /var/lib/rabbitmq keeps the broker's durable data across starts
        (as RabbitMQ's data volume); other mappings are kept only."""
        self.volumes[str(host)] = (container, mode)
        return self

    def waiting_for(self, strategy: Any) -> Self:
        """A testcontainers wait strategy, run once the broker is up (it is ready at once)."""
        self.wait_strategy = strategy
        return self

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> Self:
        """Start the broker; returns once it accepts connections (as testcontainers' readiness probe)."""
        if self._broker is not None:
            return self
        from broker.embedded import BrokerThread

        settings: dict[str, Any] = {
            "host": "127.0.0.1",
            "port": self.ports.get(self.port) or 0,
            "management_port": self.ports.get(MANAGEMENT_PORT) or 0,
            "default_user": self.username,
            "default_pass": self.password,
            "default_vhost": self.vhost,
        }
        settings["rabbitmq_compat_version"] = self.compat
        for host, (container, _mode) in self.volumes.items():
            if container.rstrip("/") == DATA_PATH or container.startswith(DATA_PATH + "/"):
                settings["data_dir"] = str(Path(host) / "hashbroker")
        self._log.lines.clear()
        logger = logging.getLogger("hashbroker")
        logger.addHandler(self._log)
        if logger.level == logging.NOTSET:  # the image logs at info: so does the container's log
            logger.setLevel(logging.INFO)
            self._log.raised_level = True
        broker = self._broker = BrokerThread(**settings).start()
        self._log.thread = broker.call(threading.get_ident)
        self._log.lines.append(f"Server startup complete; emulating RabbitMQ {self.compat} (hashbroker)")
        if self.wait_strategy is not None:
            self.wait_strategy.wait_until_ready(self)
        return self

    def stop(self, force: bool = True, delete_volume: bool = True) -> None:
        if self._broker is not None:
            broker, self._broker = self._broker, None
            broker.stop()
            logger = logging.getLogger("hashbroker")
            logger.removeHandler(self._log)
            if self._log.raised_level:
                logger.setLevel(logging.NOTSET)
                self._log.raised_level = False

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- where to connect -----------------------------------------------------------------------
    def _running(self) -> BrokerThread:
        if self._broker is None:
            raise RuntimeError("the container is not started: call start() or use it as a context manager")
        return self._broker

    def get_container_host_ip(self) -> str:
        return "127.0.0.1"

    def get_exposed_port(self, port: int) -> int:
        """The bound port for a port of RabbitMQ's image: `self.port` (AMQP) or 15672 (management)."""
        broker = self._running()
        if int(port) == self.port:
            return broker.port
        if int(port) == MANAGEMENT_PORT and broker.broker.management is not None:
            return int(broker.broker.management.port)
        raise ValueError(f"port {port} is not exposed (the AMQP port {self.port} and {MANAGEMENT_PORT} are)")

    def get_connection_params(self) -> pika.ConnectionParameters:
        """pika's connection parameters for the user and vhost, as testcontainers returns them."""
        import pika

        return pika.ConnectionParameters(
            host=self.get_container_host_ip(),
            port=self.get_exposed_port(self.port),
            virtual_host=self.vhost,
            credentials=pika.PlainCredentials(username=self.username, password=self.password),
        )

    def get_connection_url(self) -> str:
        """`amqp://user:pass@host:port/vhost` (vhost escaped, so "/" is %2F), for any client."""
        return (
            f"amqp://{quote(self.username, safe='')}:{quote(self.password, safe='')}@"
            f"{self.get_container_host_ip()}:{self.get_exposed_port(self.port)}/{quote(self.vhost, safe='')}"
        )

    get_amqp_url = get_connection_url

    def get_management_url(self) -> str:
        """The management HTTP API's base URL (basic auth with the container's user)."""
        return f"http://{self.get_container_host_ip()}:{self.get_exposed_port(MANAGEMENT_PORT)}"

    @property
    def running(self) -> bool:
        return self._broker is not None

    def get_wrapped_container(self) -> _Wrapped:
        self._running()
        return self._wrapped

    def get_logs(self) -> tuple[bytes, bytes]:
        """(stdout, stderr) as the image's: the broker's log on stdout, nothing on stderr."""
        self._running()
        return self._log.text(), b""

    def exec(self, command: str | list[str]) -> ExecResult:
        """Run a RabbitMQ CLI command "in the container": rabbitmqctl's verbs through `hashbroker
        ctl` against this broker's management API, and the diagnostics and plugin commands the
        emulator can answer. Anything else exits 126 with a message saying what can run."""
        self._running()
        argv = shlex.split(command) if isinstance(command, str) else [str(part) for part in command]
        tool = Path(argv[0]).name if argv else ""
        if tool == "rabbitmqctl":
            return self._ctl(argv[1:])
        if tool == "rabbitmq-diagnostics":
            return self._diagnostics(argv[1:])
        if tool == "rabbitmq-plugins":
            return self._plugins(argv[1:])
        return ExecResult(
            126,
            f"hashbroker's RabbitMqContainer cannot run {command!r}: only rabbitmqctl, "
            "rabbitmq-diagnostics and rabbitmq-plugins commands are emulated\n".encode(),
        )

    def _ctl(self, args: list[str]) -> ExecResult:
        args = [a for a in args if a not in ("-q", "--quiet")] + (
            ["-q"] if "-q" in args or "--quiet" in args else []
        )
        env = {
            **os.environ,
            "HASHBROKER_MANAGEMENT_URL": self.get_management_url(),
            "HASHBROKER_MANAGEMENT_USER": self.username,
            "HASHBROKER_MANAGEMENT_PASSWORD": self.password,
        }
        done = subprocess.run(
            [sys.executable, "-m", "broker.cli.main", "ctl", *args],
            capture_output=True,
            env=env,
            timeout=60,
            check=False,
        )
        return ExecResult(done.returncode, done.stdout + done.stderr)

    def _diagnostics(self, args: list[str]) -> ExecResult:
        verb = args[0] if args else ""
        node = self._running().broker.cluster.local
        answers = {
            "ping": f"Will ping {node}. This only checks if the OS process is running and registered "
            "with epmd. Timeout: 60000 ms.\nPing succeeded",
            "check_running": f"Checking if RabbitMQ is running on node {node} ...\n"
            f"RabbitMQ on node {node} is fully booted and running",
            "check_port_connectivity": f"Testing TCP connections to all active listeners on node {node} ...\n"
            f"Successfully connected to ports {self.port}, {MANAGEMENT_PORT} on node {node}.",
        }
        if verb in answers:
            return ExecResult(0, (answers[verb] + "\n").encode())
        if verb in ("check_local_alarms", "check_alarms"):
            return self._alarms(node)
        emulated = ", ".join([*answers, "check_local_alarms", "check_alarms"])
        return ExecResult(
            126, f"rabbitmq-diagnostics {verb}: not emulated by hashbroker ({emulated} are)\n".encode()
        )

    def _alarms(self, node: str) -> ExecResult:
        """rabbitmq-diagnostics check_(local_)alarms: exit 0 without alarms, 1 naming them."""
        raised = sorted(self._running().broker.alarms.blocked_by)
        if not raised:
            return ExecResult(0, f"Node {node} reported no alarms, local or clusterwide\n".encode())
        lines = "\n".join(f"Node {node} reported an alarm: {kind}" for kind in raised)
        return ExecResult(1, (lines + "\n").encode())

    def _plugins(self, args: list[str]) -> ExecResult:
        verb = args[0] if args else ""
        names = [a for a in args[1:] if not a.startswith("-")]
        node = self._running().broker.cluster.local
        if verb == "list":
            header = (
                " Configured: E = explicitly enabled; e = implicitly enabled\n"
                f" | Status: * = running on {node}\n |/\n"
            )
            return ExecResult(0, (header + "".join(f"[E*] {n}\n" for n in EMULATED_PLUGINS)).encode())
        unknown = [n for n in names if n not in EMULATED_PLUGINS]
        if verb == "enable" and not unknown:
            return ExecResult(
                0, (f"Enabling plugins on node {node}:\n" + "".join(f"{n}\n" for n in names)).encode()
            )
        if verb in ("enable", "disable"):
            refused = ", ".join(unknown or names)
            why = "is not emulated" if unknown else "cannot be disabled: hashbroker's plugins are always on"
            return ExecResult(70, f"rabbitmq-plugins {verb}: {refused} {why}\n".encode())
        return ExecResult(
            126, f"rabbitmq-plugins {verb}: not emulated by hashbroker (list and enable are)\n".encode()
        )
