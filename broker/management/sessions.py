"""The read model of AMQP connections and channels for /api/connections and /api/channels.

Fields and formats are RabbitMQ 3.10.8's (observed live): `client_properties` as the client sent
them (tables as JSON objects), `user_provided_name` from its `connection_name`, `connected_at` in
milliseconds since the epoch, and the socket counters `recv_oct`/`send_oct` (bytes) and
`recv_cnt`/`send_cnt` (reads and writes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from amqpwire.fields import FieldTable
from broker.management.values import table_to_json

if TYPE_CHECKING:
    from broker.connection import Connection
    from broker.server import Broker

# Client capability the management's own AMQP connections announce, so they can be left out of
# /api/connections and object_totals (RabbitMQ's management uses internal direct connections that
# tools never count either).


@runtime_checkable
class TracksClient(Protocol):
    """What a session records about its client and its traffic (broker.session's connections)."""

    client_properties: FieldTable
    user_provided_name: str | None
    connected_at: int  # ms since the epoch
    recv_oct: int
    send_oct: int
    recv_cnt: int
    send_cnt: int


@dataclass(frozen=True)
class Traffic:
    client_properties: dict[str, Any]
    user_provided_name: str | None
    connected_at: int  # ms since the epoch, as RabbitMQ
    recv_oct: int
    send_oct: int
    recv_cnt: int
    send_cnt: int


@dataclass(frozen=True)
class ConnectionInfo:
    name: str
    user: str
    vhost: str
    peer_host: str
    peer_port: int
    host: str
    port: int
    channels: int
    state: str
    frame_max: int
    channel_max: int
    timeout: int
    auth_mechanism: str
    traffic: Traffic | None = field(default=None)


@dataclass(frozen=True)
class ChannelInfo:
    number: int
    connection: ConnectionInfo
    consumer_count: int
    messages_unacknowledged: int
    prefetch_count: int
    global_prefetch_count: int
    confirm: bool
    transactional: bool


def is_listed(conn: Connection) -> bool:
    """Open client connections: not mid-handshake, not closed."""
    return conn.state not in ("handshake", "closed")


def traffic(conn: Connection) -> Traffic | None:
    if not isinstance(conn, TracksClient):
        return None  # a connection type that records no client details
    return Traffic(
        client_properties=table_to_json(conn.client_properties),
        user_provided_name=conn.user_provided_name,
        connected_at=conn.connected_at,
        recv_oct=conn.recv_oct,
        send_oct=conn.send_oct,
        recv_cnt=conn.recv_cnt,
        send_cnt=conn.send_cnt,
    )


def connection_info(conn: Connection, host: str, port: int) -> ConnectionInfo:
    peer_host, _, peer_port = conn.peer.rpartition(":")
    return ConnectionInfo(
        name=conn.name,
        user=conn.user,
        vhost=conn.vhost_name,
        peer_host=peer_host,
        peer_port=int(peer_port) if peer_port.isdigit() else 0,
        host=host,
        port=port,
        channels=len(conn.channels),
        state=conn.state,
        frame_max=conn.frame_max,
        channel_max=conn.channel_max,
        timeout=conn.heartbeat,
        auth_mechanism=conn.auth_mechanism or "PLAIN",
        traffic=traffic(conn),
    )


def connections(broker: Broker) -> list[ConnectionInfo]:
    out = [connection_info(c, broker.host, broker.port) for c in list(broker.connections) if is_listed(c)]
    out.sort(key=lambda c: c.name)
    return out


def channels(broker: Broker) -> list[ChannelInfo]:
    out = []
    for conn in list(broker.connections):
        if not is_listed(conn):
            continue
        cinfo = connection_info(conn, broker.host, broker.port)
        for ch in list(conn.channels.values()):
            out.append(
                ChannelInfo(
                    number=ch.number,
                    connection=cinfo,
                    consumer_count=len(ch.consumers),
                    messages_unacknowledged=len(ch.unacked),
                    prefetch_count=ch.limiter.prefetch,
                    global_prefetch_count=ch.limiter.global_prefetch,
                    confirm=ch.confirm,
                    transactional=ch.tx is not None,
                )
            )
    out.sort(key=lambda c: (c.connection.name, c.number))
    return out
