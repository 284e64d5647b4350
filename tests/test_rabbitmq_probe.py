"""The session probe that decides whether live tests run: no RabbitMQ, missing plugins, overrides."""

from __future__ import annotations

import socket

import pytest

import tests.conftest as conftest
from tests.rabbitmq_probe import CONSISTENT_HASH, MANAGEMENT, PLUGINS, SHARDING, Probe, Target, probe


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
    reason = conftest._missing_plugin_behind(Item(), error)  # type: ignore[arg-type]
    assert reason is not None and "rabbitmq-plugins enable rabbitmq_consistent_hash_exchange" in reason
    # a failure that names a type the broker has is hashbroker's (or the test's) failure: it stays
    modulus = error.replace("x-consistent-hash", "x-modulus-hash")
    assert conftest._missing_plugin_behind(Item(), modulus) is None  # type: ignore[arg-type]
    assert conftest._missing_plugin_behind(Item(), "AssertionError: 3 != 4") is None  # type: ignore[arg-type]


@pytest.mark.live
def test_the_reference_rabbitmq_of_this_session(rabbitmq_url: str) -> None:
    """Where a RabbitMQ answers, the probe reports it reachable (the fixture skipped otherwise)."""
    result = conftest.session_probe()
    assert result.reachable
    assert rabbitmq_url == result.target.url
