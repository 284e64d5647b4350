"""What a connection is, as the management API and the logs name it.

Plain attributes only (no getattr with defaults needed): the peer, the negotiated limits, the
client's properties, when it connected and its octet and frame counters. The counters are bumped
per read and per write (and per frame sent), never per byte.
"""

from __future__ import annotations

import platform
import time
from typing import Any

from amqpwire.fields import FieldTable
from broker import __version__
from broker.protocol.handshake import Handshake


def server_properties(cluster_name: str) -> dict[str, Any]:
    """connection.start's server-properties: RabbitMQ 3.10.8's capabilities and keys, our identity.

    ``cluster_name`` is there because rabbit_reader always sends it (``rabbit_nodes:cluster_name()``,
    by default the node name) and clients hand it to users: Node's amqplib exposes
    ``connection.serverProperties.cluster_name``. The value is the emulated cluster's local node, as
    ``/api/overview`` reports it. Product, version, platform, copyright and information say
    hashbroker on purpose (as the management API's ``product_name`` does); no client decides
    anything on them.
    """
    return {
        "cluster_name": cluster_name,
        "product": "hashbroker",
        "version": __version__,
        "platform": f"Python {platform.python_version()}",
        "copyright": "hashbroker contributors",
        "information": "AMQP 0-9-1 broker routing as RabbitMQ 3.10.8; Apache-2.0",
        "capabilities": {
            "publisher_confirms": True,
            "exchange_exchange_bindings": True,
            "basic.nack": True,
            "consumer_cancel_notify": True,
            "connection.blocked": True,
            "consumer_priorities": True,
            "authentication_failure_close": True,
            "per_consumer_qos": True,
            "direct_reply_to": True,
        },
    }


class ConnectionIdentity:
    """The connection's names, negotiated values and counters (base of `Connection`)."""

    def __init__(self, handshake: Handshake, peer: Any, local: str) -> None:
        self.handshake = handshake
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.name = f"{self.peer} -> {local}"
        self.user = ""  # set once the login is accepted
        self.vhost_name = ""  # set once connection.open is accepted
        self.frame_max = handshake.frame_max  # the negotiated limits, set at tune-ok
        self.channel_max = handshake.channel_max
        self.heartbeat = 0
        self.connected_at = int(time.time() * 1000)  # ms since the epoch, as RabbitMQ reports it
        self.recv_oct = 0
        self.send_oct = 0
        self.send_cnt = 0

    @property
    def capabilities(self) -> FieldTable:
        return self.handshake.capabilities

    @property
    def cancel_notify(self) -> bool:
        return self.handshake.capability("consumer_cancel_notify")

    @property
    def client_properties(self) -> FieldTable:
        """The client's connection.start-ok properties, typed as sent (management renders them)."""
        return self.handshake.client_properties

    @property
    def user_provided_name(self) -> str | None:
        """The client's "connection_name" property, which RabbitMQ shows as user_provided_name."""
        value = self.handshake.client_properties.get("connection_name")
        if value is None or value.type != "longstr":
            return None
        return bytes(value.value).decode("utf-8", "replace")

    @property
    def auth_mechanism(self) -> str:
        return self.handshake.mechanism
