"""The session views (`broker.entities.info.ConnectionView`, `ChannelView`) of the broker's AMQP
connections, for /api/connections, /api/channels and the connection details of queues and consumers.

Fields and formats are RabbitMQ 3.10.8's (observed live): `client_properties` as the client sent
them, `user_provided_name` from its `connection_name`, `connected_at` in milliseconds since the
epoch, and the socket counters `recv_oct`/`send_oct` (bytes) and `recv_cnt`/`send_cnt` (reads and
writes).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from broker.entities.info import ChannelView, ConnectionView
from broker.management.ports import ChannelReads, ConnectionReads, TracksClient

__all__ = ["Sessions", "TracksClient", "unacked_bytes"]


def is_listed(conn: ConnectionReads) -> bool:
    """Open client connections: not mid-handshake, not closed."""
    return conn.state not in ("handshake", "closed")


def connection_view(conn: ConnectionReads, host: str, port: int) -> ConnectionView:
    peer_host, _, peer_port = conn.peer.rpartition(":")
    local_port = conn.name.rpartition(":")[2]  # "peer -> host:port": the listener it reached (AMQPS too)
    port = int(local_port) if local_port.isdigit() else port
    return ConnectionView(
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
        tls=conn.tls_info,
        client_properties=conn.client_properties,
        user_provided_name=conn.user_provided_name,
        connected_at=conn.connected_at,
        recv_oct=conn.recv_oct,
        send_oct=conn.send_oct,
        recv_cnt=conn.recv_cnt,
        send_cnt=conn.send_cnt,
    )


def channel_view(ch: ChannelReads, connection: ConnectionView) -> ChannelView:
    return ChannelView(
        number=ch.number,
        connection=connection,
        consumer_count=len(ch.consumers),
        messages_unacknowledged=len(ch.unacked),
        prefetch_count=ch.limiter.prefetch,
        global_prefetch_count=ch.limiter.global_prefetch,
        confirm=ch.confirm,
        transactional=ch.tx is not None,
    )


class Sessions:
    """The session views of every connection at one moment, and a way back from the opaque
    session references the entities' views hold (a queue's owner, a consumer's channel).

    Every connection the broker has counts for those references, listed or not: a channel cancels
    its consumers as it leaves its connection, and a connection deletes its exclusive queues before
    it leaves the broker's set, so whatever a queue refers to is found here.
    """

    def __init__(self, connections: Collection[ConnectionReads], host: str, port: int) -> None:
        self._connections: list[tuple[bool, ConnectionView]] = []  # (listed, view)
        self._by_connection: dict[int, ConnectionView] = {}
        self._by_channel: dict[int, ChannelView] = {}
        self._channels: list[tuple[bool, ChannelView]] = []
        for conn in list(connections):
            listed = is_listed(conn)
            view = connection_view(conn, host, port)
            self._connections.append((listed, view))
            self._by_connection[id(conn)] = view
            for ch in list(conn.channels.values()):
                ch_view = channel_view(ch, view)
                self._by_channel[id(ch)] = ch_view
                self._channels.append((listed, ch_view))

    def connections(self) -> list[ConnectionView]:
        """The listed connections, by name."""
        out = [view for listed, view in self._connections if listed]
        out.sort(key=lambda c: c.name)
        return out

    def channels(self) -> list[ChannelView]:
        """The channels of the listed connections, by connection name and number."""
        out = [view for listed, view in self._channels if listed]
        out.sort(key=lambda c: (c.connection.name, c.number))
        return out

    def connection_of(self, ref: object) -> ConnectionView:
        """The view of the connection `ref` is (a QueueView's owner)."""
        try:
            return self._by_connection[id(ref)]
        except KeyError:
            raise LookupError(f"{ref!r} is none of the broker's connections") from None

    def channel_of(self, ref: object) -> ChannelView:
        """The view of the channel `ref` is (a ConsumerView's channel)."""
        try:
            return self._by_channel[id(ref)]
        except KeyError:
            raise LookupError(f"{ref!r} is no channel of the broker's connections") from None


def unacked_bytes(connections: Iterable[ConnectionReads]) -> dict[int, int]:
    """Body bytes of the delivered-but-unacked messages per queue (keyed by the queue's identity).

    The deliveries are held by the channels, which keep no per-queue byte count, so this walks them
    all: the one place that does, called once per request that shows queues.
    """
    out: dict[int, int] = {}
    for conn in list(connections):
        for ch in list(conn.channels.values()):
            for u in list(ch.unacked.values()):
                key = id(u.queue)
                out[key] = out.get(key, 0) + len(u.entry.msg.body)
    return out
