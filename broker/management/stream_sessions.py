"""The read model of the stream-protocol connections (rabbitmq_stream_management's figures):
frozen views taken from the connections the broker lists (`ports.StreamConnectionReads`), so the
handlers never hold a live connection."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from broker.management.ports import StreamConnectionReads


@dataclass(frozen=True)
class StreamPublisherView:
    publisher_id: int
    stream: str
    reference: str  # "" for an unnamed publisher
    published: int
    confirmed: int
    errored: int


@dataclass(frozen=True)
class StreamConsumerView:
    subscription_id: int
    stream: str
    credits: int  # chunks the subscription may still be sent
    consumed: int  # records sent
    offset: int  # the first offset of the last chunk sent
    offset_lag: int  # how far the stream's committed end is ahead of `offset`
    properties: dict[str, str]


@dataclass(frozen=True)
class StreamConnectionView:
    """`figures`: what the API shows under the connection's own names (`FIGURES`)."""

    name: str
    user: str
    vhost: str
    peer_host: str
    peer_port: int
    timeout: int  # the negotiated heartbeat, seconds
    client_properties: dict[str, str]
    figures: dict[str, object]
    publishers: tuple[StreamPublisherView, ...]
    consumers: tuple[StreamConsumerView, ...]


#: The connection's figures shown as they are: the listener it reached and the socket counters,
#: the negotiated limits, when it connected.
FIGURES = (
    "auth_mechanism",
    "connected_at",
    "frame_max",
    "host",
    "port",
    "recv_cnt",
    "recv_oct",
    "send_cnt",
    "send_oct",
)


def stream_connection_views(conns: Iterable[StreamConnectionReads]) -> list[StreamConnectionView]:
    """The open connections, by name; their publishers and consumers by id."""
    out = []
    for c in conns:
        if not c.is_open:
            continue
        publishers = tuple(
            StreamPublisherView(
                p.publisher_id, p.stream, p.reference or "", p.published, p.confirmed, p.errored
            )
            for _, p in sorted(c.publishers.items())
        )
        consumers = tuple(
            StreamConsumerView(
                s.subscription_id,
                s.stream,
                s.credit,
                s.consumed,
                s.offset,
                max(0, s.committed_offset - s.offset),
                dict(s.properties),
            )
            for _, s in sorted(c.subscriptions.items())
        )
        out.append(
            StreamConnectionView(
                name=c.name,
                user=c.username,
                vhost=c.vhost,
                peer_host=c.peer_host,
                peer_port=c.peer_port,
                timeout=c.heartbeat or 0,
                client_properties=dict(c.client_properties),
                figures={k: getattr(c, k) for k in FIGURES},
                publishers=publishers,
                consumers=consumers,
            )
        )
    out.sort(key=lambda v: v.name)
    return out
