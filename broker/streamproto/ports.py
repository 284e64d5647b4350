"""What the stream protocol needs from the broker: the ports `StreamConnection` is driven against.

The broker satisfies them structurally (no base classes). Calls are synchronous: the broker runs
on one event loop and its stream log appends and reads in memory; what completes later (a publish
confirmed once the store committed it, new records for a waiting subscriber, a deleted stream, an
alarm) comes back through the `StreamListener` a connection registers.

Users, permissions and vhosts are the AMQP side's: the same user table, the same loopback-only
users, the same configure/write/read patterns matched against the stream's name (a stream is a
queue). Offsets and chunks are the stream log's: a chunk is what one append wrote (all of a
publish frame's messages, or one AMQP 0-9-1 publish), and a stored consumer offset is a tracking
chunk that takes an offset in the log, as osiris writes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal, Protocol

from broker.streamproto.chunk import Chunk, Entry
from broker.streamproto.frames import OffsetSpec

Permission = Literal["configure", "write", "read"]
#: (publishing id, entry) pairs of one publish frame
Entries = Sequence[tuple[int, Entry]]
#: what a log calls with the publishing ids it committed
Confirm = Callable[[list[int]], None]


class AuthRefused(Exception):
    """Wrong credentials or unknown user (AUTHENTICATION_FAILURE)."""


class LoopbackOnly(Exception):
    """A loopback-only user connecting from elsewhere (SASL_AUTHENTICATION_FAILURE_LOOPBACK)."""


class Crashed(Exception):
    """Where RabbitMQ's connection process would crash (e.g. a create-stream argument that is not
    an integer where one is expected): the connection is dropped without a frame."""


class StreamListener(Protocol):
    """What a stream tells a connection that reads from or writes to it."""

    def stream_grew(self, stream: StreamLog) -> None:
        """New chunks were committed (a waiting subscription may send)."""

    def stream_deleted(self, stream: StreamLog) -> None:
        """The stream is gone (its publishers and subscriptions end, metadata-update is sent)."""


class ChunkReader(Protocol):
    """One subscription's position in a stream: whole chunks, from the chunk holding the
    requested offset (RabbitMQ sends the whole chunk; clients skip the records before it)."""

    def next_chunk(self) -> Chunk | None:
        """The next committed chunk (any type), or None at the end; advances past it."""

    @property
    def next_offset(self) -> int:
        """The offset the next chunk starts at."""


class StreamLog(Protocol):
    """One stream as the stream protocol sees it."""

    @property
    def name(self) -> str: ...

    def append(self, entries: Entries, writer: str | None, confirm: Confirm) -> None:
        """Write one chunk of (publishing id, entry) pairs. With a `writer` reference, an entry
        whose publishing id is not above the writer's last one is dropped, still confirmed (osiris
        deduplication) and the writer's sequence goes into the chunk's trailer. `confirm` gets the
        publishing ids once the chunk is committed (at once or later)."""

    def reader(self, spec: OffsetSpec) -> ChunkReader:
        """A reader at the start of the chunk `spec` designates: first, last (the last chunk),
        next (the end), an offset (the chunk holding it; past the end: waits for it), a timestamp
        (the first chunk at or after it)."""

    def listen(self, listener: StreamListener) -> None: ...

    def unlisten(self, listener: StreamListener) -> None: ...

    def store_offset(self, reference: str, offset: int) -> None:
        """Write a tracking chunk for consumer `reference` (it takes one offset)."""

    def query_offset(self, reference: str) -> int | None: ...

    def writer_sequence(self, reference: str) -> int | None:
        """The last publishing id written by the named publisher (deduplication state)."""

    @property
    def committed_offset(self) -> int:
        """The last committed offset (-1: empty), for a consumer's lag."""


class StreamBroker(Protocol):
    """The broker as the stream protocol needs it."""

    def server_properties(self) -> Mapping[str, str]:
        """The peer-properties answer (product, version, platform, copyright, information,
        cluster_name)."""

    def auth_mechanisms(self) -> Sequence[str]: ...

    def authenticate(self, username: str, password: str, peer_host: str) -> object:
        """The user, or raises AuthRefused / LoopbackOnly."""

    def check_vhost_access(self, user: object, vhost: str, peer_host: str) -> bool: ...

    def check_permission(self, user: object, vhost: str, stream: str, permission: Permission) -> bool:
        """configure / write / read on the queue named `stream`, as for AMQP 0-9-1."""

    def advertised_endpoint(self) -> tuple[str, int]:
        """The host and port a client is told to connect to (open's connection properties and
        metadata's broker entry)."""

    def lookup(self, vhost: str, stream: str) -> StreamLog | None:
        """The stream, or None when no stream has that name (a queue of another type too)."""

    def create_stream(self, user: object, vhost: str, stream: str, arguments: Mapping[str, str]) -> int:
        """Create with RabbitMQ's stream-manager rules; a stream protocol Code: OK,
        STREAM_ALREADY_EXISTS (same arguments), PRECONDITION_FAILED (other arguments, another
        queue type, invalid arguments), INTERNAL_ERROR."""

    def delete_stream(self, user: object, vhost: str, stream: str) -> int:
        """OK or STREAM_DOES_NOT_EXIST (no such stream, or a queue of another type)."""

    def route(self, vhost: str, super_stream: str, routing_key: str) -> list[str] | None:
        """The streams the super stream's exchange routes `routing_key` to (None: no exchange)."""

    def partitions(self, vhost: str, super_stream: str) -> list[str] | None:
        """The super stream's partitions in x-stream-partition-order (None: no exchange)."""

    def watch_alarm(self, callback: Callable[[bool], None]) -> Callable[[], None]:
        """Call `callback` with the new state on each change; returns the way to stop."""

    def resource_alarm(self) -> bool:
        """Whether publishers are blocked. RabbitMQ 3.10.8's stream connections react to the disk
        alarm only (rabbit_stream_reader:resource_alarm ignores the memory alarm)."""
