"""`RabbitMqContainer`: testcontainers' RabbitMQ container, backed by an embedded hashbroker.

A test written for testcontainers runs unchanged once its import reads
`from broker.testing import RabbitMqContainer`: same constructor (image, port, username, password,
vhost, the RABBITMQ_DEFAULT_* environment variables), same methods (start, stop, context manager,
get_connection_params, get_container_host_ip, get_exposed_port, the with_* builders). Instead of a
Docker container (5-15 s per start) it starts a broker in a thread in about a tenth of a second, on
free ephemeral ports for AMQP and the management API, so any number can run at once.

As with the official image, the given user, password and vhost are the only ones created (guest
does not exist unless it is the user asked for), and the image tag picks the RabbitMQ version the
broker behaves as: `rabbitmq:3.10.8` is 3.10.8, `rabbitmq:3.13` is 3.13.0, `rabbitmq:4...` is 4.3.0
and `latest` (or a tag without a version) hashbroker's default.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import quote

if TYPE_CHECKING:
    import pika

    from broker.embedded import BrokerThread

#: The port numbers inside RabbitMQ's image, which `get_exposed_port` maps to the bound ones.
AMQP_PORT = 5672
MANAGEMENT_PORT = 15672
#: What a `rabbitmq:4...` tag behaves as: the 4.x release hashbroker emulates.
RABBITMQ_4 = "4.3.0"

_VERSION = re.compile(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?")


def compat_version(image: str) -> str | None:
    """The RabbitMQ version an image name's tag stands for; None for `latest` or no version."""
    name, _, tag = image.rpartition(":")
    if not name or "/" in tag:  # no tag, or the colon was a registry's port
        return None
    match = _VERSION.match(tag)
    if match is None:
        return None
    major, minor, patch = (int(part) if part else 0 for part in match.groups())
    if major >= 4:
        return RABBITMQ_4
    return f"{major}.{minor}.{patch}"


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
        self._broker: BrokerThread | None = None

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
        version = compat_version(self.image)
        if version is not None:
            settings["rabbitmq_compat_version"] = version
        self._broker = BrokerThread(**settings).start()
        return self

    def stop(self, force: bool = True, delete_volume: bool = True) -> None:
        if self._broker is not None:
            broker, self._broker = self._broker, None
            broker.stop()

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

    def get_logs(self) -> tuple[bytes, bytes]:
        return b"", b""
