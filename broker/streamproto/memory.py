"""A minimal in-memory broker behind the stream protocol's ports: streams as lists of osiris chunks.

It is a real stream log, small: offsets, chunks, timestamps, publisher deduplication, tracking
chunks for stored offsets, one user table with configure/write/read patterns. The tests run the
protocol and real clients (rstream) against it; the broker proper satisfies the same ports with
its stream queue type and store.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from broker.streamproto import chunk as C
from broker.streamproto.constants import AUTH_MECHANISMS, SERVER_PROPERTIES, Code, OffsetType
from broker.streamproto.frames import OffsetSpec
from broker.streamproto.ports import AuthRefused, LoopbackOnly, Permission, StreamListener
from broker.streamproto.tracking import Refused, TrackedLog, Tracking, create_arguments


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class MemoryReader:
    """A position in a `MemoryLog`: the index of the next chunk and the offset it starts at."""

    log: MemoryLog
    index: int
    next_offset: int

    def next_chunk(self) -> C.Chunk | None:
        chunks = self.log.chunks
        if self.index >= len(chunks):
            return None
        ch = chunks[self.index]
        self.index += 1
        self.next_offset = ch.next_offset
        return ch


@dataclass(eq=False)
class MemoryLog(TrackedLog):
    name: str
    arguments: dict[str, str | int]
    clock_ms: Callable[[], int] = _now_ms
    epoch: int = 1
    chunks: list[C.Chunk] = field(default_factory=list)
    next_offset: int = 0
    tracking: Tracking = field(default_factory=Tracking)
    listeners: list[StreamListener] = field(default_factory=list)

    def _write(self, chunk: C.Chunk, committed: Callable[[], None] | None = None) -> None:
        """Append `chunk`; `committed` runs before the readers hear of it (a publisher's confirm
        goes out before the deliveries, as RabbitMQ's usually do)."""
        self.chunks.append(chunk)
        self.next_offset = chunk.next_offset
        if committed is not None:
            committed()
        for listener in list(self.listeners):
            listener.stream_grew(self)

    def write(
        self, kept: Sequence[tuple[int, C.Entry]], writer: str | None, committed: Callable[[], None]
    ) -> None:
        trailer = b""
        if writer is not None:
            trailer = C.tracking_entries([(C.TRACK_SEQUENCE, writer, kept[-1][0])])
        chunk = C.Chunk.of(
            (e for _, e in kept),
            first_offset=self.next_offset,
            timestamp=self.clock_ms(),
            epoch=self.epoch,
            trailer=trailer,
        )
        self._write(chunk, committed)

    def write_tracking(self, reference: str, offset: int) -> None:
        body = C.tracking_entries([(C.TRACK_OFFSET, reference, offset)])
        self._write(
            C.Chunk.of(
                [body],
                first_offset=self.next_offset,
                timestamp=self.clock_ms(),
                epoch=self.epoch,
                chunk_type=C.TRACKING_DELTA,
            )
        )

    @property
    def committed_offset(self) -> int:
        return self.next_offset - 1

    def reader(self, spec: OffsetSpec) -> MemoryReader:
        chunks = self.chunks
        end = MemoryReader(self, len(chunks), self.next_offset)
        if spec.kind == OffsetType.FIRST:
            return MemoryReader(self, 0, chunks[0].first_offset if chunks else self.next_offset)
        if spec.kind == OffsetType.NEXT:
            return end
        if spec.kind == OffsetType.LAST:
            for i in range(len(chunks) - 1, -1, -1):
                if chunks[i].chunk_type == C.USER:
                    return MemoryReader(self, i, chunks[i].first_offset)
            return end
        if spec.kind == OffsetType.OFFSET:
            for i, ch in enumerate(chunks):
                if spec.value < ch.next_offset:
                    return MemoryReader(self, i, ch.first_offset)
            return end
        for i, ch in enumerate(chunks):
            if ch.timestamp >= spec.value:
                return MemoryReader(self, i, ch.first_offset)
        return end

    def listen(self, listener: StreamListener) -> None:
        if listener not in self.listeners:
            self.listeners.append(listener)

    def unlisten(self, listener: StreamListener) -> None:
        if listener in self.listeners:
            self.listeners.remove(listener)


@dataclass
class MemoryUser:
    password: str
    loopback_only: bool = False
    #: vhost -> (configure, write, read) regular expressions
    permissions: dict[str, tuple[str, str, str]] = field(default_factory=dict)


@dataclass(eq=False)
class MemoryBroker:
    host: str = "localhost"
    port: int = 5552
    users: dict[str, MemoryUser] = field(
        default_factory=lambda: {"guest": MemoryUser("guest", True, {"/": (".*", ".*", ".*")})}
    )
    vhosts: set[str] = field(default_factory=lambda: {"/"})
    streams: dict[tuple[str, str], MemoryLog] = field(default_factory=dict)
    #: (vhost, super stream) -> [(partition, binding key)] in partition order
    super_streams: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=dict)
    alarm: bool = False
    clock_ms: Callable[[], int] = _now_ms
    _alarm_watchers: list[Callable[[bool], None]] = field(default_factory=list)

    def server_properties(self) -> Mapping[str, str]:
        return {**SERVER_PROPERTIES, "cluster_name": "hashbroker", "platform": "Python"}

    def auth_mechanisms(self) -> Sequence[str]:
        return AUTH_MECHANISMS

    def authenticate(self, username: str, password: str, peer_host: str) -> object:
        user = self.users.get(username)
        if user is None or user.password != password:
            raise AuthRefused(username)
        if user.loopback_only and not (peer_host.startswith("127.") or peer_host in ("::1", "localhost")):
            raise LoopbackOnly(username)
        return username

    def check_vhost_access(self, user: object, vhost: str, peer_host: str) -> bool:
        u = self.users.get(str(user))
        return vhost in self.vhosts and u is not None and vhost in u.permissions

    def check_permission(self, user: object, vhost: str, stream: str, permission: Permission) -> bool:
        u = self.users.get(str(user))
        if u is None or vhost not in u.permissions:
            return False
        pattern = u.permissions[vhost][("configure", "write", "read").index(permission)]
        return pattern != "" and re.match(pattern, stream) is not None

    def advertised_endpoint(self) -> tuple[str, int]:
        return self.host, self.port

    def lookup(self, vhost: str, stream: str) -> MemoryLog | None:
        return self.streams.get((vhost, stream))

    def create_stream(self, user: object, vhost: str, stream: str, arguments: Mapping[str, str]) -> int:
        try:
            args = create_arguments(arguments)
        except Refused as e:
            return e.code
        existing = self.streams.get((vhost, stream))
        if existing is not None:
            return Code.STREAM_ALREADY_EXISTS if existing.arguments == args else Code.PRECONDITION_FAILED
        self.streams[(vhost, stream)] = MemoryLog(stream, args, self.clock_ms)
        return Code.OK

    def delete_stream(self, user: object, vhost: str, stream: str) -> int:
        log = self.streams.pop((vhost, stream), None)
        if log is None:
            return Code.STREAM_DOES_NOT_EXIST
        for listener in list(log.listeners):
            listener.stream_deleted(log)
        return Code.OK

    def route(self, vhost: str, super_stream: str, routing_key: str) -> list[str] | None:
        parts = self.super_streams.get((vhost, super_stream))
        if parts is None:
            return None
        return [p for p, key in parts if key == routing_key and (vhost, p) in self.streams]

    def partitions(self, vhost: str, super_stream: str) -> list[str] | None:
        parts = self.super_streams.get((vhost, super_stream))
        if parts is None:
            return None
        return [p for p, _ in parts if (vhost, p) in self.streams]

    def resource_alarm(self) -> bool:
        return self.alarm

    def watch_alarm(self, callback: Callable[[bool], None]) -> Callable[[], None]:
        self._alarm_watchers.append(callback)
        return lambda: self._alarm_watchers.remove(callback)

    def set_alarm(self, on: bool) -> None:
        self.alarm = on
        for cb in list(self._alarm_watchers):
            cb(on)
