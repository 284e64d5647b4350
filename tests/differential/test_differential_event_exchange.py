"""rabbitmq_event_exchange: the same scripted session publishes the same events on both brokers.

The session (tests/event_exchange_session.py: declares, binds, a consumer, a policy, users, a
failed login, a vhost) runs against hashbroker with the plugin on, and its events (routing keys,
header names, AMQP types and values, minus timestamps, ports and ids) must equal RabbitMQ
3.10.8's, recorded in tests/data/event_exchange (so a clone without RabbitMQ compares too), and
those of the live RabbitMQ when one runs with the plugin.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pika
import pytest

from broker.embedded import BrokerThread
from tests.event_exchange_session import EXCHANGE, record

DATA = Path(__file__).resolve().parents[1] / "data" / "event_exchange"
SESSIONS = ("session", "cascades", "policies")
MANAGEMENT_PORT = 15672
PLUGINS = ["rabbitmq_management", "rabbitmq_event_exchange"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def hashbroker_events() -> dict[str, list[dict[str, Any]]]:
    """Each session's events on one hashbroker with the plugin on."""
    mgmt = _free_port()
    with BrokerThread(host="127.0.0.1", port=0, management_port=mgmt, plugins=PLUGINS) as b:
        api = f"http://127.0.0.1:{mgmt}/api"
        return {s: record("127.0.0.1", b.broker.port, api, s, settle=0.3) for s in SESSIONS}


def recorded(session: str) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads((DATA / f"rabbitmq_3.10.8_{session}.json").read_text())
    return data


@pytest.mark.parametrize("session", SESSIONS)
def test_session_events_as_recorded_from_rabbitmq(
    hashbroker_events: dict[str, list[dict[str, Any]]], session: str
) -> None:
    ours, expected = hashbroker_events[session], recorded(session)
    assert [e["key"] for e in ours] == [e["key"] for e in expected]
    for event, theirs in zip(ours, expected, strict=True):
        assert event == theirs, event["key"]


def test_event_messages_are_persistent_with_a_timestamp(
    hashbroker_events: dict[str, list[dict[str, Any]]],
) -> None:
    assert hashbroker_events["session"]
    for e in hashbroker_events["session"]:
        assert e["properties"] == ["delivery_mode", "timestamp"]  # and the headers
        assert e["delivery_mode"] == 2
        assert e["headers"][-1][0] == "timestamp_in_ms"


def test_exchange_is_absent_without_the_plugin() -> None:
    with BrokerThread(host="127.0.0.1", port=0) as b:
        assert EXCHANGE not in b.broker.vhosts["/"].exchanges


@pytest.mark.parametrize("session", SESSIONS)
def test_session_events_as_the_live_rabbitmq(rabbitmq_url: str, session: str) -> None:
    host = pika.URLParameters(rabbitmq_url).host
    port = pika.URLParameters(rabbitmq_url).port
    api = f"http://{host}:{MANAGEMENT_PORT}/api"
    request = urllib.request.Request(f"{api}/exchanges/%2F/{EXCHANGE}")
    request.add_header("Authorization", "Basic Z3Vlc3Q6Z3Vlc3Q=")  # guest:guest
    try:
        urllib.request.urlopen(request, timeout=5).close()
    except (urllib.error.URLError, OSError):
        pytest.skip(
            f"the reference RabbitMQ on {host} has no {EXCHANGE} (or no management API on "
            f"{MANAGEMENT_PORT}); enable it with: rabbitmq-plugins enable rabbitmq_event_exchange"
        )
    live = record(host, port, api, session)
    assert [e["key"] for e in live] == [e["key"] for e in recorded(session)]
    assert live == recorded(session)
