"""`loopback_users`: guest may log in only from loopback unless the setting says otherwise.

RabbitMQ's default (`loopback_users.guest = true`) refuses guest from any other address with 403;
its official Docker image turns that off, and so does hashbroker's (`HASHBROKER_LOOPBACK_USERS=[]`),
so clients on the host, arriving through the container network, can use guest/guest.
"""

from __future__ import annotations

import socket

import pika
import pika.exceptions
import pytest

from broker.embedded import BrokerThread
from tests.conftest import rabbitmq_reachable


def outside_address() -> str:
    """A non-loopback IPv4 address of this machine (a connection to it does not come from 127/8)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
            address = str(s.getsockname()[0])
        except OSError:
            address = ""
    if not address or address.startswith("127."):
        pytest.skip("this machine has no non-loopback IPv4 address to connect from")
    return address


def listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def login(host: str, port: int) -> str:
    """ "ok", or the reason the broker gave for refusing guest/guest."""
    params = pika.ConnectionParameters(
        host, port, credentials=pika.PlainCredentials("guest", "guest"), connection_attempts=1
    )
    try:
        pika.BlockingConnection(params).close()
    except pika.exceptions.ProbableAuthenticationError as exc:
        return str(exc.args[0]) if exc.args else str(exc)
    except pika.exceptions.AMQPConnectionError as exc:
        return f"{type(exc).__name__}: {exc}"
    return "ok"


def test_guest_is_refused_from_outside_by_default_as_rabbitmq() -> None:
    address = outside_address()
    with BrokerThread(host="0.0.0.0", port=0) as b:
        ours = login(address, b.port)
        assert login("127.0.0.1", b.port) == "ok"
    assert ours == (
        "ConnectionClosedByBroker: (403) 'ACCESS_REFUSED - Login was refused using authentication "
        "mechanism PLAIN. For details see the broker logfile.'"
    )
    if rabbitmq_reachable() and listening(address, 5672):
        theirs = login(address, 5672)
        if theirs == "ok":
            pytest.skip("the local RabbitMQ lets guest in from outside: nothing to compare with")
        assert ours == theirs


def test_empty_loopback_users_lets_guest_in_from_outside() -> None:
    address = outside_address()
    with BrokerThread(host="0.0.0.0", port=0, loopback_users=[]) as b:
        assert login(address, b.port) == "ok"
