"""Shared fixtures: the reference RabbitMQ (live oracle) and the recorded reference data."""

from __future__ import annotations

import json
import os
import socket
from functools import cache
from pathlib import Path
from typing import Any

import pytest

try:  # the Spark fixtures load only where PySpark is installed (the `spark` extra)
    import pyspark  # noqa: F401
except ImportError:
    pass
else:
    pytest_plugins = ["tests.spark_support"]

REPO = Path(__file__).resolve().parent.parent
REFERENCE_DIR = Path(os.environ.get("HASHBROKER_REFERENCE_DIR", REPO.parent / "shared" / "reference"))
REFERENCE_FILE = REFERENCE_DIR / "rabbitmq-3.10.8-routing.json"
RABBITMQ_HOST = os.environ.get("HASHBROKER_RABBITMQ_HOST", "127.0.0.1")
RABBITMQ_PORT = int(os.environ.get("HASHBROKER_RABBITMQ_PORT", "5672"))
RABBITMQ_URL = f"amqp://guest:guest@{RABBITMQ_HOST}:{RABBITMQ_PORT}/%2F"


@cache
def rabbitmq_reachable() -> bool:
    try:
        with socket.create_connection((RABBITMQ_HOST, RABBITMQ_PORT), timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def rabbitmq_url() -> str:
    """URL of the live reference RabbitMQ; skips (with the reason) when none answers."""
    if not rabbitmq_reachable():
        pytest.skip(f"no reference RabbitMQ reachable on {RABBITMQ_HOST}:{RABBITMQ_PORT}")
    return RABBITMQ_URL


@cache
def load_reference() -> dict[str, Any]:
    with REFERENCE_FILE.open() as fh:
        data: dict[str, Any] = json.load(fh)
    return data


@pytest.fixture(scope="session")
def reference() -> dict[str, Any]:
    """The routing recorded from RabbitMQ 3.10.8 (../shared/reference, never copied into the repo)."""
    if not REFERENCE_FILE.exists():
        pytest.fail(f"reference data missing: {REFERENCE_FILE} (the repo must sit beside shared/)")
    return load_reference()
