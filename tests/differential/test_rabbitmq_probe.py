"""The session probe that decides whether live tests run: no RabbitMQ, missing plugins, overrides."""

from __future__ import annotations

import socket
import sys
import types
from typing import Any

import pytest

import tests.conftest as conftest
from tests import rabbitmq_probe
from tests.rabbitmq_probe import (
    CONSISTENT_HASH,
    CONTAINER_IMAGE,
    MANAGEMENT,
    PLUGINS,
    SHARDING,
    Probe,
    Target,
    docker_unavailable_reason,
    probe,
    select_target,
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # closed again: nothing listens there


def test_target_from_env() -> None:
    assert Target.from_env({}).amqp == ("127.0.0.1", 5672)
    assert Target.from_env({}).management == ("127.0.0.1", 15672)
    t = Target.from_env({"HASHBROKER_TEST_RABBITMQ": "10.0.0.5:5699"})
    assert t.amqp == ("10.0.0.5", 5699) and t.management == ("10.0.0.5", 15672)
    assert t.url == "amqp://guest:guest@10.0.0.5:5699/%2F"
    assert Target.from_env({"HASHBROKER_TEST_RABBITMQ": "none"}).amqp is None
    t = Target.from_env({"HASHBROKER_TEST_RABBITMQ_MANAGEMENT": "127.0.0.1:1"})
    assert t.management == ("127.0.0.1", 1)
    assert Target.from_env({"HASHBROKER_TEST_RABBITMQ_PLUGINS_MISSING": "all"}).assumed_missing == set(
        PLUGINS
    )
    t = Target.from_env(
        {"HASHBROKER_TEST_RABBITMQ_PLUGINS_MISSING": "rabbitmq_sharding, rabbitmq_management"}
    )
    assert t.assumed_missing == {SHARDING, MANAGEMENT}
    assert Target.from_env({"HASHBROKER_RABBITMQ_PORT": "5673"}).amqp == ("127.0.0.1", 5673)


def test_no_rabbitmq_listening_gives_a_skip_reason() -> None:
    port = free_port()
    result = probe(Target(("127.0.0.1", port), ("127.0.0.1", port)))
    assert not result.reachable
    reason = result.skip_reason()
    assert reason is not None and f"127.0.0.1:{port}" in reason and "HASHBROKER_TEST_RABBITMQ" in reason
    assert result.skip_reason(CONSISTENT_HASH) == reason


def test_none_configured() -> None:
    result = probe(Target(None, None))
    assert not result.reachable
    assert "HASHBROKER_TEST_RABBITMQ=none" in (result.skip_reason() or "")


@pytest.mark.parametrize(
    ("plugin", "names"),
    [
        (CONSISTENT_HASH, "x-consistent-hash"),
        (SHARDING, "x-modulus-hash"),
        (MANAGEMENT, "HTTP API on 127.0.0.1:15672"),
    ],
)
def test_missing_plugin_reason_names_plugin_and_command(plugin: str, names: str) -> None:
    target = Target(("127.0.0.1", 5672), ("127.0.0.1", 15672))
    enabled = frozenset(PLUGINS) - {plugin}
    result = Probe(target, True, "", enabled)
    assert result.skip_reason() is None
    assert result.skip_reason(*(enabled)) is None
    reason = result.skip_reason(plugin)
    assert reason is not None
    assert f"lacks the {plugin} plugin" in reason and names in reason
    assert f"rabbitmq-plugins enable {plugin}" in reason


def test_failure_naming_a_missing_exchange_type_becomes_a_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    target = Target(("127.0.0.1", 5672), ("127.0.0.1", 15672))
    without_hash = Probe(target, True, "", frozenset({SHARDING, MANAGEMENT}))
    monkeypatch.setattr(conftest, "session_probe", lambda: without_hash)

    class Item:
        def get_closest_marker(self, name: str) -> object:
            return object() if name == "live" else None

    error = "ConnectionClosedByBroker: (503, \"COMMAND_INVALID - unknown exchange type 'x-consistent-hash'\")"
    reason = conftest.missing_plugin_behind(Item(), error)  # type: ignore[arg-type]
    assert reason is not None and "rabbitmq-plugins enable rabbitmq_consistent_hash_exchange" in reason
    # a failure that names a type the broker has is hashbroker's (or the test's) failure: it stays
    modulus = error.replace("x-consistent-hash", "x-modulus-hash")
    assert conftest.missing_plugin_behind(Item(), modulus) is None  # type: ignore[arg-type]
    assert conftest.missing_plugin_behind(Item(), "AssertionError: 3 != 4") is None  # type: ignore[arg-type]


@pytest.mark.live
def test_the_reference_rabbitmq_of_this_session(rabbitmq_url: str) -> None:
    """Where a RabbitMQ answers, the probe reports it reachable (the fixture skipped otherwise)."""
    result = conftest.session_probe()
    assert result.reachable
    assert rabbitmq_url == result.target.url
    assert rabbitmq_url == conftest.RABBITMQ_URL


class FakeDocker:
    """The container boundary: records the calls, answers with fixed mapped ports (or fails)."""

    def __init__(self, unavailable: str | None = None, fails: Exception | None = None) -> None:
        self.unavailable = unavailable
        self.fails = fails
        self.checks = 0
        self.starts = 0

    def check(self, env: dict[str, str]) -> str | None:
        self.checks += 1
        return self.unavailable

    def start(self) -> tuple[tuple[str, int], tuple[str, int]]:
        self.starts += 1
        if self.fails is not None:
            raise self.fails
        return ("localhost", 32771), ("localhost", 32772)


def test_the_environment_override_comes_first_and_starts_no_container() -> None:
    docker = FakeDocker()
    chosen = select_target(
        {"HASHBROKER_TEST_RABBITMQ": "10.0.0.5:5699"}, unavailable=docker.check, start=docker.start
    )
    assert chosen.origin == "environment" and chosen.target.amqp == ("10.0.0.5", 5699)
    assert docker.checks == docker.starts == 0
    chosen = select_target({"HASHBROKER_TEST_RABBITMQ": "none"}, unavailable=docker.check, start=docker.start)
    assert chosen.target.amqp is None and docker.starts == 0


def test_docker_answering_starts_the_container_and_points_at_its_mapped_ports() -> None:
    docker = FakeDocker()
    env = {"HASHBROKER_TEST_RABBITMQ_PLUGINS_MISSING": "rabbitmq_sharding"}
    chosen = select_target(env, unavailable=docker.check, start=docker.start)
    assert chosen.origin == "container" and docker.starts == 1
    assert chosen.target.amqp == ("localhost", 32771)
    assert chosen.target.management == ("localhost", 32772)
    assert chosen.target.url == "amqp://guest:guest@localhost:32771/%2F"
    assert chosen.target.assumed_missing == {SHARDING}


def test_without_docker_the_local_rabbitmq_and_the_reason_reaches_the_skip() -> None:
    docker = FakeDocker(unavailable="no container: no Docker daemon answers (DockerException)")
    chosen = select_target({}, unavailable=docker.check, start=docker.start)
    assert chosen.origin == "local" and docker.starts == 0
    assert chosen.target.amqp == ("127.0.0.1", 5672)
    port = free_port()
    nothing = probe(Target(("127.0.0.1", port), None), chosen.note)
    reason = nothing.skip_reason() or ""
    assert f"127.0.0.1:{port}" in reason and "no Docker daemon answers" in reason


def test_a_container_that_fails_to_start_falls_back_to_the_local_rabbitmq() -> None:
    docker = FakeDocker(fails=RuntimeError("pull access denied"))
    chosen = select_target({}, unavailable=docker.check, start=docker.start)
    assert chosen.origin == "local" and docker.starts == 1
    assert CONTAINER_IMAGE in chosen.note and "pull access denied" in chosen.note


def test_docker_unavailable_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    off = docker_unavailable_reason({"HASHBROKER_TEST_RABBITMQ_CONTAINER": "off"})
    assert off is not None and "HASHBROKER_TEST_RABBITMQ_CONTAINER=off" in off
    monkeypatch.setattr(rabbitmq_probe.importlib.util, "find_spec", lambda name: None)
    missing = docker_unavailable_reason({})
    assert missing is not None and "testcontainers" in missing


def test_the_container_enables_the_plugins_the_live_tests_need(monkeypatch: pytest.MonkeyPatch) -> None:
    """start_rabbitmq_container against a fake testcontainers module: image, ports, plugins file."""
    made: list[Any] = []

    class FakeContainer:
        def __init__(self, image: str) -> None:
            self.image = image
            self.ports: tuple[int, ...] = ()
            self.env: dict[str, str] = {}
            self.command: list[str] = []
            self.started = False
            made.append(self)

        def with_exposed_ports(self, *ports: int) -> FakeContainer:
            self.ports = ports
            return self

        def with_env(self, key: str, value: str) -> FakeContainer:
            self.env[key] = value
            return self

        def with_command(self, command: list[str]) -> FakeContainer:
            self.command = command
            return self

        def start(self) -> FakeContainer:
            self.started = True
            return self

        def stop(self) -> None:
            pass

        def get_container_host_ip(self) -> str:
            return "localhost"

        def get_exposed_port(self, port: int) -> str:
            return str(40000 + port)

    module = types.ModuleType("testcontainers.core.container")
    module.DockerContainer = FakeContainer  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "testcontainers.core.container", module)
    waited: list[Target] = []
    monkeypatch.setattr(rabbitmq_probe, "_wait_ready", lambda target, timeout: waited.append(target))
    monkeypatch.setattr(rabbitmq_probe.atexit, "register", lambda fn: None)
    amqp, management = rabbitmq_probe.start_rabbitmq_container()
    assert amqp == ("localhost", 45672) and management == ("localhost", 55672)
    (container,) = made
    assert container.image == "rabbitmq:3.10.8-management" and container.started
    assert set(container.ports) == {5672, 15672}
    plugins_file = container.env["RABBITMQ_ENABLED_PLUGINS_FILE"]
    script = container.command[-1]
    assert f"> {plugins_file}" in script and "exec docker-entrypoint.sh rabbitmq-server" in script
    for plugin in (CONSISTENT_HASH, SHARDING, MANAGEMENT):
        assert plugin in script
    assert waited == [Target(amqp, management)]
