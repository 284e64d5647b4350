"""pytest plugin (entry point `hashbroker`): fixtures giving each test a fresh broker.

    def test_roundtrip(hashbroker):            # the AMQP URL of a running broker
        conn = pika.BlockingConnection(pika.URLParameters(hashbroker))

`hashbroker_broker` yields the BrokerThread itself (port, host, `.broker` state).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from broker.embedded import BrokerThread


@pytest.fixture
def hashbroker_broker() -> Iterator[BrokerThread]:
    """A broker on an ephemeral 127.0.0.1 port in a background thread, stopped after the test."""
    with BrokerThread(host="127.0.0.1", port=0) as b:
        yield b


@pytest.fixture
def hashbroker(hashbroker_broker: BrokerThread) -> str:
    """URL (amqp://guest:guest@127.0.0.1:PORT/%2F) of a fresh running broker."""
    return hashbroker_broker.url
