"""Shared fixtures and markers: the reference RabbitMQ (live oracle) and the recorded reference data.

Every test that talks to the reference RabbitMQ is marked ``live`` here; it skips with a reason when
no RabbitMQ answers or when the RabbitMQ lacks a plugin the test needs (see ``rabbitmq_probe``).
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.rabbitmq_probe import CONSISTENT_HASH, MANAGEMENT, PLUGINS, SHARDING, session_probe, session_target

try:  # the Spark fixtures load only where PySpark is installed (the `spark` extra)
    import pyspark  # noqa: F401
except ImportError:
    pass
else:
    pytest_plugins = ["tests.spark_support"]

REPO = Path(__file__).resolve().parent.parent
REFERENCE_DIR = Path(__file__).resolve().parent / "data" / "reference"
REFERENCE_FILE = REFERENCE_DIR / "rabbitmq-3.10.8-routing.json"


def __getattr__(name: str) -> Any:
    """RABBITMQ_URL, RABBITMQ_HOST, RABBITMQ_PORT, RABBITMQ_API: the session's reference RabbitMQ.

    Computed on first use, so that a container starts only in sessions that import them or run a
    live test (see ``rabbitmq_probe.select_target``).
    """
    if name not in ("RABBITMQ_URL", "RABBITMQ_HOST", "RABBITMQ_PORT", "RABBITMQ_API"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    target = session_target()
    host, port = target.amqp or ("127.0.0.1", 5672)
    api_host, api_port = target.management or (host, 15672)
    values = {
        "RABBITMQ_URL": target.url,
        "RABBITMQ_HOST": host,
        "RABBITMQ_PORT": port,
        "RABBITMQ_API": f"http://{api_host}:{api_port}",
    }
    return values[name]


#: Test modules whose live tests declare a plugin's exchange type or use the management API of the
#: reference RabbitMQ. Their live tests skip (naming the plugin) where it is not enabled.
PLUGINS_BY_MODULE: dict[str, tuple[str, ...]] = {
    "test_differential_hash": (CONSISTENT_HASH, SHARDING),
    "test_live_hash_routing": (CONSISTENT_HASH, SHARDING),
    "test_sharding_live": (CONSISTENT_HASH, SHARDING),
    "test_fuzz_frames": (CONSISTENT_HASH, SHARDING),
    "test_ctl": (CONSISTENT_HASH,),
    "test_spark_publish": (CONSISTENT_HASH,),
    "test_spark_failures": (CONSISTENT_HASH,),
    "test_management_api": (MANAGEMENT,),
    "test_management_rates": (MANAGEMENT,),
    "test_management_definitions": (MANAGEMENT, CONSISTENT_HASH),
    "test_management_policies": (MANAGEMENT, SHARDING),
    "test_rabbitmqadmin": (MANAGEMENT, CONSISTENT_HASH),
    "test_definitions_import": (MANAGEMENT,),
    "test_health_checks": (MANAGEMENT,),
    "test_missing_paths": (MANAGEMENT,),
    "test_paging_sorting": (MANAGEMENT,),
    "test_header_bytes": (MANAGEMENT,),
    "test_management_hardening": (MANAGEMENT,),
    "test_stream_members": (MANAGEMENT,),
}

#: Test directories whose modules get markers without saying so themselves: the client libraries
#: start their own runtimes (JVM, Node, Ruby) and Spark a JVM per module, so both run in the slow
#: step; Spark needs PySpark. The differential directory gets none: its files compare with
#: RabbitMQ 3.10.8, live or recorded, and each test that needs the live broker is marked ``live`` by
#: asking for ``rabbitmq_url`` (so the recorded comparisons still run where no RabbitMQ answers).
MARKERS_BY_DIRECTORY: dict[str, tuple[str, ...]] = {"clients": ("slow",), "spark": ("spark", "slow")}


def rabbitmq_reachable() -> bool:
    """Whether the reference RabbitMQ answers AMQP (probed once per session)."""
    return session_probe().reachable


def plugins_needed(item: pytest.Item) -> tuple[str, ...]:
    """The plugins an item needs: the ``rabbitmq_plugins`` markers (set from PLUGINS_BY_MODULE)."""
    needed: list[str] = []
    for mark in item.iter_markers("rabbitmq_plugins"):
        needed.extend(p for p in mark.args if p not in needed)
    return tuple(needed)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        module = item.module.__name__.rpartition(".")[2] if getattr(item, "module", None) else ""
        for marker in MARKERS_BY_DIRECTORY.get(item.path.parent.name, ()):
            item.add_marker(marker)
        if "rabbitmq_url" in getattr(item, "fixturenames", ()):
            item.add_marker("live")
        if module in PLUGINS_BY_MODULE:  # also for tests that ask for RabbitMQ only at run time
            item.add_marker(pytest.mark.rabbitmq_plugins(*PLUGINS_BY_MODULE[module]))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A live test skips here, before its fixtures touch RabbitMQ, when RabbitMQ cannot serve it."""
    if item.get_closest_marker("live") is None:
        return
    reason = session_probe().skip_reason(*plugins_needed(item))
    if reason is not None:
        pytest.skip(reason)


def missing_plugin_behind(item: pytest.Item, text: str) -> str | None:
    """The reason to skip when a failure is RabbitMQ lacking a plugin that the probe found missing.

    This catches the live tests that PLUGINS_BY_MODULE does not list: the failure is not hashbroker's,
    it is the machine's, and it says so. RabbitMQ is probed only when the text names a plugin's
    exchange type (or, for a live test, the management port).
    """
    live = item.get_closest_marker("live") is not None
    suspects = [
        plugin
        for plugin, exchange_type in PLUGINS.items()
        if (exchange_type is not None and f"unknown exchange type '{exchange_type}'" in text)
        or (
            exchange_type is None
            and live
            and (management := session_target().management) is not None
            and f":{management[1]}" in text
        )
    ]
    if not suspects:
        return None
    probe = session_probe()
    for plugin in suspects:
        if probe.reachable and plugin not in probe.enabled:
            return probe.skip_reason(plugin)
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    reason = missing_plugin_behind(item, str(report.longrepr))
    if reason is not None:
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {reason}")


@pytest.fixture
def rabbitmq_url(request: pytest.FixtureRequest) -> str:
    """URL of the live reference RabbitMQ; skips (with the reason) when it cannot serve this test."""
    request.node.add_marker("live")  # also when asked for at run time (getfixturevalue)
    reason = session_probe().skip_reason(*plugins_needed(request.node))
    if reason is not None:
        pytest.skip(reason)
    return session_target().url


@pytest.fixture(scope="module")
def qs_broker_url() -> Iterator[str]:
    """An embedded hashbroker with its management API for the scenarios of ``tests.qs_scenarios``."""
    from tests.qs_scenarios import embedded_broker

    with embedded_broker() as url:
        yield url


@cache
def load_reference() -> dict[str, Any]:
    with REFERENCE_FILE.open() as fh:
        data: dict[str, Any] = json.load(fh)
    return data


@pytest.fixture(scope="session")
def reference() -> dict[str, Any]:
    """The routing recorded from RabbitMQ 3.10.8 (tests/data/reference, see NOTES.md there)."""
    return load_reference()
