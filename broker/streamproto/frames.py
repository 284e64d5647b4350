"""Stream protocol frames: each command as a value, parsed from and packed to bytes as RabbitMQ
3.10.8's `rabbit_stream_core` does.

A frame is `size:u32` then `key:u16 version:u16` and the command's fields; the key's top bit marks
a response. Parsing is strict where RabbitMQ's binary patterns are: a frame of another version, of
an unknown key, with missing or trailing bytes parses as `Unknown` (RabbitMQ answers it with a
close request, UNKNOWN_FRAME). The element counts in front of maps and lists are not read, the
elements run to the end of the frame, as there. Where RabbitMQ's parser crashes instead (a map or a
string list that does not end on an element boundary, an unknown offset type), the frame parses as
`Crash`: RabbitMQ's connection process dies and the socket closes without a close frame.

Route and partitions responses go out with the request's key (no response bit), as 3.10.8 sends
them; `parse(..., from_server=True)` reads them so.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, cast, overload

from broker.streamproto.constants import RESPONSE_BIT, VERSION, Key, OffsetType

_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_I16 = struct.Struct(">h")
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_U64 = struct.Struct(">Q")
_I64 = struct.Struct(">q")
_HEAD = struct.Struct(">HH")
_HEAD_CORR = struct.Struct(">HHI")
_SIZE = struct.Struct(">I")
_PUB_ENTRY = struct.Struct(">QI")
_SUB_BATCH = struct.Struct(">QBHII")


class ParseError(ValueError):
    """The frame does not match the command's layout."""


class CrashError(ParseError):
    """A layout RabbitMQ's parser crashes on (its connection process dies)."""


# -- field readers ----------------------------------------------------------------------------


class Reader:
    """Reads big-endian fields from one frame's bytes."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes | memoryview, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def _take(self, s: struct.Struct) -> int:
        end = self.pos + s.size
        if end > len(self.data):
            raise ParseError("short frame")
        (v,) = s.unpack_from(self.data, self.pos)
        self.pos = end
        return int(v)

    def u8(self) -> int:
        return self._take(_U8)

    def u16(self) -> int:
        return self._take(_U16)

    def i16(self) -> int:
        return self._take(_I16)

    def u32(self) -> int:
        return self._take(_U32)

    def i32(self) -> int:
        return self._take(_I32)

    def u64(self) -> int:
        return self._take(_U64)

    def i64(self) -> int:
        return self._take(_I64)

    def raw(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise ParseError("short frame")
        out = bytes(self.data[self.pos : end])
        self.pos = end
        return out

    def string(self) -> str:
        return self.raw(self.u16()).decode("utf-8", "surrogateescape")

    def rest(self) -> bytes:
        out = bytes(self.data[self.pos :])
        self.pos = len(self.data)
        return out

    @property
    def left(self) -> int:
        return len(self.data) - self.pos

    def end(self) -> None:
        if self.pos != len(self.data):
            raise ParseError("trailing bytes")

    def strings_to_end(self) -> list[str]:
        """list_of_strings: strings up to the end (a partial one crashes RabbitMQ)."""
        out = []
        try:
            while self.left:
                out.append(self.string())
        except ParseError as e:
            raise CrashError(str(e)) from None
        return out

    def map_to_end(self) -> dict[str, str]:
        """parse_map: key/value strings up to the end (a partial pair crashes RabbitMQ)."""
        out: dict[str, str] = {}
        try:
            while self.left:
                k = self.string()
                out[k] = self.string()
        except ParseError as e:
            raise CrashError(str(e)) from None
        return out


def s(text: str) -> bytes:
    raw = text.encode("utf-8", "surrogateescape")
    return _U16.pack(len(raw)) + raw


def str_map(d: Mapping[str, str]) -> bytes:
    return _U32.pack(len(d)) + b"".join(s(k) + s(v) for k, v in d.items())


def str_list(items: list[str]) -> bytes:
    return _U32.pack(len(items)) + b"".join(s(x) for x in items)


def frame(body: bytes) -> bytes:
    return _SIZE.pack(len(body)) + body


# -- commands ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Command:
    """A parsed frame. `key` is the 15-bit command key, `response` the direction bit."""

    key: ClassVar[int] = 0
    response: ClassVar[bool] = False

    def pack_body(self) -> bytes:
        raise NotImplementedError

    def to_bytes(self) -> bytes:
        return frame(self.pack_body())


def _head(cmd: Command, corr: int | None = None) -> bytes:
    k = cmd.key | (RESPONSE_BIT if cmd.response else 0)
    if corr is None:
        return _HEAD.pack(k, VERSION)
    return _HEAD_CORR.pack(k, VERSION, corr)


@dataclass(frozen=True, slots=True)
class Unknown(Command):
    """A frame RabbitMQ does not parse (answered with close UNKNOWN_FRAME after open)."""

    data: bytes = b""

    def pack_body(self) -> bytes:
        return self.data


@dataclass(frozen=True, slots=True)
class Crash(Command):
    """A frame RabbitMQ's parser crashes on: the connection is dropped without a frame."""

    data: bytes = b""
    reason: str = ""

    def pack_body(self) -> bytes:
        return self.data


@dataclass(frozen=True, slots=True)
class Request(Command):
    """A command that carries a correlation id and expects a response."""

    corr: int = 0


@dataclass(frozen=True, slots=True)
class CodeResponse(Command):
    """The plain response: correlation id and code (the key says which request)."""

    response: ClassVar[bool] = True
    corr: int = 0
    code: int = 1
    request_key: int = 0

    def pack_body(self) -> bytes:
        return _HEAD_CORR.pack(self.request_key | RESPONSE_BIT, VERSION, self.corr) + _U16.pack(self.code)


@dataclass(frozen=True, slots=True)
class DeclarePublisher(Request):
    key: ClassVar[int] = Key.DECLARE_PUBLISHER
    publisher_id: int = 0
    reference: str = ""
    stream: str = ""

    def pack_body(self) -> bytes:
        return _head(self, self.corr) + _U8.pack(self.publisher_id) + s(self.reference) + s(self.stream)


@dataclass(frozen=True, slots=True)
class SubBatch:
    """A sub-entry batch: `count` records, compressed with `compression` (0: none), `data` as sent."""

    compression: int
    count: int
    uncompressed_size: int
    data: bytes

    def records(self) -> list[bytes]:
        """The records of an uncompressed batch (each `size:u32` then the message)."""
        if self.compression != 0:
            raise ValueError(f"compression type {self.compression}")
        r = Reader(self.data)
        return [r.raw(r.u32()) for _ in range(self.count)]


Entry = bytes | SubBatch


@dataclass(frozen=True, slots=True)
class Publish(Command):
    """Publish: `messages` as sent (`publishing_id:u64` then a simple or sub-batch entry, each)."""

    key: ClassVar[int] = Key.PUBLISH
    publisher_id: int = 0
    count: int = 0
    messages: bytes = b""

    def pack_body(self) -> bytes:
        return _head(self) + _U8.pack(self.publisher_id) + _U32.pack(self.count) + self.messages

    def entries(self) -> Published:
        """(publishing id, entry) pairs; a malformed list is `CrashError` (RabbitMQ's badmatch)."""
        return published(self.messages)

    @classmethod
    def build(cls, publisher_id: int, items: list[tuple[int, Entry]]) -> Publish:
        return cls(publisher_id, len(items), b"".join(pack_published(i, e) for i, e in items))


def pack_published(publishing_id: int, entry: Entry) -> bytes:
    if isinstance(entry, SubBatch):
        return (
            _SUB_BATCH.pack(
                publishing_id,
                0x80 | (entry.compression << 4),
                entry.count,
                entry.uncompressed_size,
                len(entry.data),
            )
            + entry.data
        )
    return _PUB_ENTRY.pack(publishing_id, len(entry)) + entry


class Published(Sequence[tuple[int, "Entry"]]):
    """A publish frame's (publishing id, entry) pairs, and its publishing `ids`. When every entry
    is a simple one (no sub-batch), `section` is the frame's messages as osiris lays out a chunk's
    entries (each `size:u32` then the record: the frame's bytes without the publishing ids) and
    `sizes` each record's size, so a log can keep the frame as one chunk without touching each
    record again; the pairs are then made only when asked for."""

    __slots__ = ("_entries", "ids", "section", "sizes")

    def __init__(
        self,
        ids: list[int],
        entries: list[tuple[int, Entry]] | None,
        section: bytes | None = None,
        sizes: array[int] | None = None,
    ) -> None:
        self.ids = ids
        self._entries = entries
        self.section = section
        self.sizes = sizes if sizes is not None else array("I")

    @property
    def entries(self) -> list[tuple[int, Entry]]:
        if self._entries is None:
            view = memoryview(self.section or b"")
            out: list[tuple[int, Entry]] = []
            at = 4
            for pid, size in zip(self.ids, self.sizes, strict=True):
                out.append((pid, cast(bytes, view[at : at + size])))
                at += size + 4
            self._entries = out
        return self._entries

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, i: int) -> tuple[int, Entry]: ...
    @overload
    def __getitem__(self, i: slice) -> list[tuple[int, Entry]]: ...
    def __getitem__(self, i: int | slice) -> tuple[int, Entry] | list[tuple[int, Entry]]:
        return self.entries[i]

    def __iter__(self) -> Iterator[tuple[int, Entry]]:
        return iter(self.entries)


def iter_published(data: bytes) -> Iterator[tuple[int, Entry]]:
    """The entries of a publish frame (see `published`)."""
    return iter(published(data))


def published(data: bytes) -> Published:
    """The entries of a publish frame, read in one pass. A malformed list is `CrashError`
    (RabbitMQ's badmatch)."""
    n = len(data)
    if n >= 12:
        _pid, size = _PUB_ENTRY.unpack_from(data, 0)
        if not size & 0x80000000 and n % (12 + size) == 0:
            uniform = _uniform(data, size)
            if uniform is not None:
                return uniform
    return _published(data)


#: By (record size, records): a frame's `pid:u64 size:u32` fields, and its entries without the
#: publishing ids, each read with one unpack.
_UNIFORM: dict[tuple[int, int], tuple[struct.Struct, struct.Struct]] = {}


def _uniform(data: bytes, size: int) -> Published | None:
    """A frame whose records all have one size (a producer sending one kind of message, the
    common case) read with two unpacks over the frame (None: the sizes differ)."""
    count = len(data) // (12 + size)
    key = (size, count)
    structs = _UNIFORM.get(key)
    if structs is None:
        if len(_UNIFORM) > 32:
            _UNIFORM.clear()
        structs = _UNIFORM[key] = (
            struct.Struct(">" + f"QI{size}x" * count),
            struct.Struct(">" + f"8x{size + 4}s" * count),
        )
    fields = structs[0].unpack(data)
    sizes = fields[1::2]
    if sizes.count(size) != count:
        return None
    section = b"".join(structs[1].unpack(data))
    return Published(list(fields[0::2]), None, section, array("I", sizes))


def _published(data: bytes) -> Published:
    n = len(data)
    pos = 0
    unpack_entry = _PUB_ENTRY.unpack_from
    ids: list[int] = []
    out: list[tuple[int, Entry]] = []
    sizes = array("I")
    entries: list[memoryview] = []
    view = memoryview(data)
    simple = True
    while pos < n:
        if pos + 12 > n:
            raise CrashError("short frame")
        pid, size = unpack_entry(data, pos)
        ids.append(pid)
        if size & 0x80000000:
            if pos + 19 > n:
                raise CrashError("short frame")
            _pid, first, count, uncompressed, size = _SUB_BATCH.unpack_from(data, pos)
            start = pos + 19
            if start + size > n:
                raise CrashError("short frame")
            pos = start + size
            out.append((pid, SubBatch((first >> 4) & 0x7, count, uncompressed, bytes(data[start:pos]))))
            simple = False
        else:
            start = pos + 12
            end = start + size
            if end > n:
                raise CrashError("short frame")
            out.append((pid, cast(bytes, view[start:end])))  # a view: copied only if kept apart
            entries.append(view[pos + 8 : end])
            sizes.append(size)
            pos = end
    return Published(ids, out, b"".join(entries) if simple else None, sizes)


@dataclass(frozen=True, slots=True)
class PublishConfirm(Command):
    key: ClassVar[int] = Key.PUBLISH_CONFIRM
    publisher_id: int = 0
    publishing_ids: tuple[int, ...] = ()

    def pack_body(self) -> bytes:
        ids = self.publishing_ids
        return (
            _head(self)
            + _U8.pack(self.publisher_id)
            + _U32.pack(len(ids))
            + struct.pack(f">{len(ids)}Q", *ids)
        )


@dataclass(frozen=True, slots=True)
class PublishError(Command):
    """One code for all the ids, as RabbitMQ sends it (the wire has a code per id)."""

    key: ClassVar[int] = Key.PUBLISH_ERROR
    publisher_id: int = 0
    code: int = 0
    publishing_ids: tuple[int, ...] = ()

    def pack_body(self) -> bytes:
        body = b"".join(_U64.pack(i) + _U16.pack(self.code) for i in self.publishing_ids)
        return _head(self) + _U8.pack(self.publisher_id) + _U32.pack(len(self.publishing_ids)) + body


@dataclass(frozen=True, slots=True)
class QueryPublisherSequence(Request):
    key: ClassVar[int] = Key.QUERY_PUBLISHER_SEQUENCE
    reference: str = ""
    stream: str = ""

    def pack_body(self) -> bytes:
        return _head(self, self.corr) + s(self.reference) + s(self.stream)


@dataclass(frozen=True, slots=True)
class QueryPublisherSequenceResponse(Command):
    key: ClassVar[int] = Key.QUERY_PUBLISHER_SEQUENCE
    response: ClassVar[bool] = True
    corr: int = 0
    code: int = 1
    sequence: int = 0

    def pack_body(self) -> bytes:
        return _head(self, self.corr) + _U16.pack(self.code) + _U64.pack(self.sequence)


@dataclass(frozen=True, slots=True)
class DeletePublisher(Request):
    key: ClassVar[int] = Key.DELETE_PUBLISHER
    publisher_id: int = 0

    def pack_body(self) -> bytes:
        return _head(self, self.corr) + _U8.pack(self.publisher_id)


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where a subscription starts: `kind` first / last / next / offset / timestamp; `value` the
    offset or the timestamp (milliseconds since the epoch)."""

    kind: OffsetType
    value: int = 0

    def pack(self) -> bytes:
        if self.kind == OffsetType.OFFSET:
            return _U16.pack(self.kind) + _U64.pack(self.value)
        if self.kind == OffsetType.TIMESTAMP:
            return _U16.pack(self.kind) + _I64.pack(self.value)
        return _U16.pack(self.kind)


@dataclass(frozen=True, slots=True)
class Subscribe(Request):
    key: ClassVar[int] = Key.SUBSCRIBE
    subscription_id: int = 0
    stream: str = ""
    offset: OffsetSpec = OffsetSpec(OffsetType.NEXT)
    credit: int = 0
    properties: dict[str, str] = field(default_factory=dict)

    def pack_body(self) -> bytes:
        props = str_map(self.properties) if self.properties else b""
        return (
            _head(self, self.corr)
            + _U8.pack(self.subscription_id)
            + s(self.stream)
            + self.offset.pack()
            + _U16.pack(self.credit)
            + props
        )


@dataclass(frozen=True, slots=True)
class Deliver(Command):
    key: ClassVar[int] = Key.DELIVER
    subscription_id: int = 0
    chunk: bytes = b""

    def pack_body(self) -> bytes:
        return _head(self) + _U8.pack(self.subscription_id) + self.chunk


def deliver_header(subscription_id: int, chunk_size: int) -> bytes:
    """The bytes in front of a chunk RabbitMQ sends (its send_file callback writes these first)."""
    return _SIZE.pack(5 + chunk_size) + _HEAD.pack(Key.DELIVER, VERSION) + _U8.pack(subscription_id)


@dataclass(frozen=True, slots=True)
class Credit(Command):
    """Credit in chunks; RabbitMQ reads it signed."""

    key: ClassVar[int] = Key.CREDIT
    subscription_id: int = 0
    credit: int = 0

    def pack_body(self) -> bytes:
        return _head(self) + _U8.pack(self.subscription_id) + _I16.pack(self.credit)


@dataclass(frozen=True, slots=True)
class CreditResponse(Command):
    """Sent only for a credit to an unknown subscription; it has no correlation id."""

    key: ClassVar[int] = Key.CREDIT
    response: ClassVar[bool] = True
    code: int = 0
    subscription_id: int = 0

    def pack_body(self) -> bytes:
        return _head(self) + _U16.pack(self.code) + _U8.pack(self.subscription_id)


@dataclass(frozen=True, slots=True)
class StoreOffset(Command):
    key: ClassVar[int] = Key.STORE_OFFSET
    reference: str = ""
    stream: str = ""
    offset: int = 0

    def pack_body(self) -> bytes:
        return _head(self) + s(self.reference) + s(self.stream) + _U64.pack(self.offset)


@dataclass(frozen=True, slots=True)
class QueryOffset(Request):
    key: ClassVar[int] = Key.QUERY_OFFSET
    reference: str = ""
    stream: str = ""

    def pack_body(self) -> bytes:
        return _head(self, self.corr) + s(self.reference) + s(self.stream)


@dataclass(frozen=True, slots=True)
class QueryOffsetResponse(Command):
    key: ClassVar[int] = Key.QUERY_OFFSET
    response: ClassVar[bool] = True
    corr: int = 0
    code: int = 1
    offset: int = 0

    def pack_body(self) -> bytes:
        return _head(self, self.corr) + _U16.pack(self.code) + _U64.pack(self.offset)


@dataclass(frozen=True, slots=True)
class Unsubscribe(Request):
    key: ClassVar[int] = Key.UNSUBSCRIBE
    subscription_id: int = 0

    def pack_body(self) -> bytes:
        return _head(self, self.corr) + _U8.pack(self.subscription_id)


@dataclass(frozen=True, slots=True)
class CreateStream(Request):
    key: ClassVar[int] = Key.CREATE_STREAM
    stream: str = ""
    arguments: dict[str, str] = field(default_factory=dict)

    def pack_body(self) -> bytes:
        return _head(self, self.corr) + s(self.stream) + str_map(self.arguments)


@dataclass(frozen=True, slots=True)
class DeleteStream(Request):
    key: ClassVar[int] = Key.DELETE_STREAM
    stream: str = ""

    def pack_body(self) -> bytes:
        return _head(self, self.corr) + s(self.stream)


@dataclass(frozen=True, slots=True)
class Metadata(Request):
    key: ClassVar[int] = Key.METADATA
    streams: tuple[str, ...] = ()

    def pack_body(self) -> bytes:
        return _head(self, self.corr) + str_list(list(self.streams))


@dataclass(frozen=True, slots=True)
class Broker:
    reference: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class StreamMetadata:
    """A stream's entry: `code` OK with the leader's and replicas' broker references, or an error
    code (then leader 0xFFFF and no replicas)."""

    stream: str
    code: int
    leader: int = 0xFFFF
    replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class MetadataResponse(Command):
    key: ClassVar[int] = Key.METADATA
    response: ClassVar[bool] = True
    corr: int = 0
    brokers: tuple[Broker, ...] = ()
    streams: tuple[StreamMetadata, ...] = ()

    def pack_body(self) -> bytes:
        out = [_head(self, self.corr), _U32.pack(len(self.brokers))]
        for b in self.brokers:
            out.append(_U16.pack(b.reference) + s(b.host) + _U32.pack(b.port))
        out.append(_U32.pack(len(self.streams)))
        for m in self.streams:
            out.append(s(m.stream) + _U16.pack(m.code) + _U16.pack(m.leader) + _U32.pack(len(m.replicas)))
            out.extend(_U16.pack(r) for r in m.replicas)
        return b"".join(out)


@dataclass(frozen=True, slots=True)
class MetadataUpdate(Command):
    key: ClassVar[int] = Key.METADATA_UPDATE
    code: int = 0
    stream: str = ""

    def pack_body(self) -> bytes:
        return _head(self) + _U16.pack(self.code) + s(self.stream)


@dataclass(frozen=True, slots=True)
class PeerProperties(Request):
    key: ClassVar[int] = Key.PEER_PROPERTIES
    properties: dict[str, str] = field(default_factory=dict)

    def pack_body(self) -> bytes:
        return _head(self, self.corr) + str_map(self.properties)


@dataclass(frozen=True, slots=True)
class PeerPropertiesResponse(Command):
    key: ClassVar[int] = Key.PEER_PROPERTIES
    response: ClassVar[bool] = True
    corr: int = 0
    code: int = 1
    properties: dict[str, str] = field(default_factory=dict)

    def pack_body(self) -> bytes:
        return _head(self, self.corr) + _U16.pack(self.code) + str_map(self.properties)


@dataclass(frozen=True, slots=True)
class SaslHandshake(Request):
    key: ClassVar[int] = Key.SASL_HANDSHAKE

    def pack_body(self) -> bytes:
        return _head(self, self.corr)


@dataclass(frozen=True, slots=True)
class SaslHandshakeResponse(Command):
    key: ClassVar[int] = Key.SASL_HANDSHAKE
    response: ClassVar[bool] = True
    corr: int = 0
    code: int = 1
    mechanisms: tuple[str, ...] = ()

    def pack_body(self) -> bytes:
        return _head(self, self.corr) + _U16.pack(self.code) + str_list(list(self.mechanisms))


@dataclass(frozen=True, slots=True)
class SaslAuthenticate(Request):
    """`data` None is the null bytes (length -1)."""

    key: ClassVar[int] = Key.SASL_AUTHENTICATE
    mechanism: str = ""
    data: bytes | None = None

    def pack_body(self) -> bytes:
        tail = _I32.pack(-1) if self.data is None else _U32.pack(len(self.data)) + self.data
        return _head(self, self.corr) + s(self.mechanism) + tail


@dataclass(frozen=True, slots=True)
class SaslAuthenticateResponse(Command):
    """A challenge goes out as a 16-bit length string, and only when there is one."""

    key: ClassVar[int] = Key.SASL_AUTHENTICATE
    response: ClassVar[bool] = True
    corr: int = 0
    code: int = 1
    challenge: bytes = b""

    def pack_body(self) -> bytes:
        tail = _U16.pack(len(self.challenge)) + self.challenge if self.challenge else b""
        return _head(self, self.corr) + _U16.pack(self.code) + tail


@dataclass(frozen=True, slots=True)
class Tune(Command):
    """Sent by the server (a request) and answered by the client with the same key, or with the
    response bit (both are read as the client's answer)."""

    key: ClassVar[int] = Key.TUNE
    frame_max: int = 0
    heartbeat: int = 0
    answer: bool = False

    def pack_body(self) -> bytes:
        k = Key.TUNE | (RESPONSE_BIT if self.answer else 0)
        return _HEAD.pack(k, VERSION) + _U32.pack(self.frame_max) + _U32.pack(self.heartbeat)


@dataclass(frozen=True, slots=True)
class Open(Request):
    key: ClassVar[int] = Key.OPEN
    vhost: str = ""

    def pack_body(self) -> bytes:
        return _head(self, self.corr) + s(self.vhost)


@dataclass(frozen=True, slots=True)
class OpenResponse(Command):
    """Connection properties go out only with OK (a failure is the bare code)."""

    key: ClassVar[int] = Key.OPEN
    response: ClassVar[bool] = True
    corr: int = 0
    code: int = 1
    properties: dict[str, str] = field(default_factory=dict)

    def pack_body(self) -> bytes:
        props = str_map(self.properties) if self.properties else b""
        return _head(self, self.corr) + _U16.pack(self.code) + props


@dataclass(frozen=True, slots=True)
class Close(Request):
    key: ClassVar[int] = Key.CLOSE
    code: int = 0
    reason: str = ""

    def pack_body(self) -> bytes:
        return _head(self, self.corr) + _U16.pack(self.code) + s(self.reason)


@dataclass(frozen=True, slots=True)
class Heartbeat(Command):
    key: ClassVar[int] = Key.HEARTBEAT

    def pack_body(self) -> bytes:
        return _head(self)


@dataclass(frozen=True, slots=True)
class Route(Request):
    key: ClassVar[int] = Key.ROUTE
    routing_key: str = ""
    super_stream: str = ""

    def pack_body(self) -> bytes:
        return _head(self, self.corr) + s(self.routing_key) + s(self.super_stream)


@dataclass(frozen=True, slots=True)
class Partitions(Request):
    key: ClassVar[int] = Key.PARTITIONS
    super_stream: str = ""

    def pack_body(self) -> bytes:
        return _head(self, self.corr) + s(self.super_stream)


@dataclass(frozen=True, slots=True)
class StreamsResponse(Command):
    """The route and partitions responses: the request's key WITHOUT the response bit (3.10.8)."""

    corr: int = 0
    code: int = 1
    streams: tuple[str, ...] = ()
    request_key: int = Key.ROUTE

    def pack_body(self) -> bytes:
        return (
            _HEAD_CORR.pack(self.request_key, VERSION, self.corr)
            + _U16.pack(self.code)
            + str_list(list(self.streams))
        )


# -- parsing ----------------------------------------------------------------------------------


def _parse_subscribe(corr: int, r: Reader) -> Subscribe:
    sub = r.u8()
    stream = r.string()
    kind = r.i16()
    if kind == OffsetType.OFFSET:
        spec = OffsetSpec(OffsetType.OFFSET, r.u64())
    elif kind == OffsetType.TIMESTAMP:
        spec = OffsetSpec(OffsetType.TIMESTAMP, r.i64())
    elif kind in (OffsetType.FIRST, OffsetType.LAST, OffsetType.NEXT):
        spec = OffsetSpec(OffsetType(kind))
    else:
        raise CrashError(f"offset type {kind}")
    try:
        credit = r.u16()
    except ParseError as e:
        raise CrashError(str(e)) from None
    props: dict[str, str] = {}
    if r.left >= 4:  # a malformed tail is logged and ignored by RabbitMQ
        r.u32()
        props = r.map_to_end()
    else:
        r.pos = len(r.data)
    return Subscribe(corr, sub, stream, spec, credit, props)


def _parse_sasl_authenticate(corr: int, r: Reader) -> SaslAuthenticate:
    mechanism = r.string()
    n = r.i32()
    if n == -1:
        r.end()
        return SaslAuthenticate(corr, mechanism, None)
    data = r.raw(n)
    r.end()
    return SaslAuthenticate(corr, mechanism, data)


def _parse_client_request(key: int, corr: int, r: Reader) -> Command:
    if key == Key.DECLARE_PUBLISHER:
        return DeclarePublisher(corr, r.u8(), r.string(), r.string())
    if key == Key.QUERY_PUBLISHER_SEQUENCE:
        return QueryPublisherSequence(corr, r.string(), r.string())
    if key == Key.DELETE_PUBLISHER:
        return DeletePublisher(corr, r.u8())
    if key == Key.SUBSCRIBE:
        return _parse_subscribe(corr, r)
    if key == Key.QUERY_OFFSET:
        return QueryOffset(corr, r.string(), r.string())
    if key == Key.UNSUBSCRIBE:
        return Unsubscribe(corr, r.u8())
    if key == Key.CREATE_STREAM:
        stream = r.string()
        r.u32()
        return CreateStream(corr, stream, r.map_to_end())
    if key == Key.DELETE_STREAM:
        return DeleteStream(corr, r.string())
    if key == Key.METADATA:
        r.u32()
        return Metadata(corr, tuple(r.strings_to_end()))
    if key == Key.PEER_PROPERTIES:
        r.u32()
        return PeerProperties(corr, r.map_to_end())
    if key == Key.SASL_HANDSHAKE:
        return SaslHandshake(corr)
    if key == Key.SASL_AUTHENTICATE:
        return _parse_sasl_authenticate(corr, r)
    if key == Key.OPEN:
        return Open(corr, r.string())
    if key == Key.CLOSE:
        return Close(corr, r.u16(), r.string())
    if key == Key.ROUTE:
        return Route(corr, r.string(), r.string())
    if key == Key.PARTITIONS:
        return Partitions(corr, r.string())
    raise ParseError(f"key {key}")


_CORR_REQUESTS = frozenset(
    {
        Key.DECLARE_PUBLISHER,
        Key.QUERY_PUBLISHER_SEQUENCE,
        Key.DELETE_PUBLISHER,
        Key.SUBSCRIBE,
        Key.QUERY_OFFSET,
        Key.UNSUBSCRIBE,
        Key.CREATE_STREAM,
        Key.DELETE_STREAM,
        Key.METADATA,
        Key.PEER_PROPERTIES,
        Key.SASL_HANDSHAKE,
        Key.SASL_AUTHENTICATE,
        Key.OPEN,
        Key.CLOSE,
        Key.ROUTE,
        Key.PARTITIONS,
    }
)


def _parse_plain_request(key: int, r: Reader) -> Command:
    """Commands without correlation id, in either direction."""
    if key == Key.PUBLISH:
        return Publish(r.u8(), r.u32(), r.rest())
    if key == Key.PUBLISH_CONFIRM:
        pid = r.u8()
        r.u32()
        ids = []
        while r.left:
            ids.append(r.u64())
        return PublishConfirm(pid, tuple(ids))
    if key == Key.PUBLISH_ERROR:
        pid = r.u8()
        r.u32()
        errs = []
        while r.left:
            errs.append((r.u64(), r.u16()))
        return PublishError(pid, errs[0][1] if errs else 0, tuple(i for i, _ in errs))
    if key == Key.DELIVER:
        return Deliver(r.u8(), r.rest())
    if key == Key.CREDIT:
        return Credit(r.u8(), r.i16())
    if key == Key.METADATA_UPDATE:
        return MetadataUpdate(r.u16(), r.string())
    if key == Key.STORE_OFFSET:
        return StoreOffset(r.string(), r.string(), r.u64())
    if key == Key.HEARTBEAT:
        return Heartbeat()
    if key == Key.TUNE:
        return Tune(r.u32(), r.u32())
    raise ParseError(f"key {key}")


def _parse_response(key: int, r: Reader) -> Command:
    if key == Key.TUNE:
        return Tune(r.u32(), r.u32(), answer=True)
    if key == Key.CREDIT:
        return CreditResponse(r.u16(), r.u8())
    corr = r.u32()
    if r.left == 2 and key not in (Key.QUERY_PUBLISHER_SEQUENCE, Key.QUERY_OFFSET):
        return CodeResponse(corr, r.u16(), key)
    if key == Key.QUERY_PUBLISHER_SEQUENCE:
        return QueryPublisherSequenceResponse(corr, r.u16(), r.u64())
    if key == Key.QUERY_OFFSET:
        return QueryOffsetResponse(corr, r.u16(), r.u64())
    if key == Key.OPEN:
        code = r.u16()
        r.u32()
        return OpenResponse(corr, code, r.map_to_end())
    if key == Key.PEER_PROPERTIES:
        code = r.u16()
        r.u32()
        return PeerPropertiesResponse(corr, code, r.map_to_end())
    if key == Key.SASL_HANDSHAKE:
        code = r.u16()
        r.u32()
        return SaslHandshakeResponse(corr, code, tuple(r.strings_to_end()))
    if key == Key.SASL_AUTHENTICATE:
        code = r.u16()
        return SaslAuthenticateResponse(corr, code, r.raw(r.u16()))
    if key == Key.METADATA:
        brokers = []
        for _ in range(r.u32()):
            brokers.append(Broker(r.u16(), r.string(), r.u32()))
        metas = []
        for _ in range(r.u32()):
            name, code, leader = r.string(), r.u16(), r.u16()
            replicas = tuple(r.u16() for _ in range(r.u32()))
            metas.append(StreamMetadata(name, code, leader, replicas))
        return MetadataResponse(corr, tuple(brokers), tuple(metas))
    raise ParseError(f"response key {key}")


def parse(body: bytes | memoryview, *, from_server: bool = False) -> Command:
    """One frame's body (after the size) as a command. Client commands by default; with
    `from_server` the commands a server sends (responses, deliveries, confirms...)."""
    r = Reader(body)
    try:
        raw_key, version = r.u16(), r.u16()
        if version != VERSION:
            raise ParseError(f"version {version}")
        key = raw_key & ~RESPONSE_BIT
        if raw_key & RESPONSE_BIT:
            cmd = _parse_response(key, r)
        elif from_server and key in (Key.ROUTE, Key.PARTITIONS):
            corr, code = r.u32(), r.u16()
            r.u32()
            cmd = StreamsResponse(corr, code, tuple(r.strings_to_end()), key)
        elif key in _CORR_REQUESTS:
            cmd = _parse_client_request(key, r.u32(), r)
        else:
            cmd = _parse_plain_request(key, r)
        r.end()
        return cmd
    except CrashError as e:
        return Crash(bytes(body), str(e))
    except (ParseError, UnicodeDecodeError):
        return Unknown(bytes(body))


# -- splitting a byte stream into frames ------------------------------------------------------


class FrameTooLargeError(ValueError):
    """A frame announced a size above the decoder's limit."""

    def __init__(self, size: int) -> None:
        super().__init__(f"frame of {size} bytes")
        self.size = size


class FrameDecoder:
    """Incremental frame splitter: `feed(bytes)` then `frames()` yields each complete body.

    The bodies are views of the bytes as read (no copy per frame): a read holding whole frames is
    sliced as it is; bytes after an incomplete frame wait in `_tail` and are joined once, when the
    frame they complete is all there (so a large frame arriving in many reads is not copied again
    at each read). `limit` bounds how large a frame it accepts to buffer.
    """

    __slots__ = ("_buf", "_pos", "_tail", "_tail_len", "limit")

    def __init__(self, limit: int) -> None:
        self._buf = b""
        self._pos = 0
        self._tail: list[bytes] = []
        self._tail_len = 0
        self.limit = limit

    def feed(self, data: bytes) -> None:
        if self._pos >= len(self._buf) and not self._tail:
            self._buf = bytes(data)
            self._pos = 0
        else:
            self._tail.append(bytes(data))
            self._tail_len += len(data)

    def _merge(self) -> None:
        self._buf = self._buf[self._pos :] + b"".join(self._tail)
        self._pos = 0
        self._tail.clear()
        self._tail_len = 0

    def frames(self) -> Iterator[memoryview]:
        while True:
            buf, pos = self._buf, self._pos
            have = len(buf) - pos
            if have < 4:
                if self._tail_len and have + self._tail_len >= 4:
                    self._merge()
                    continue
                return
            (size,) = _SIZE.unpack_from(buf, pos)
            if size > self.limit:
                raise FrameTooLargeError(size)
            end = pos + 4 + size
            if end > len(buf):
                if self._tail_len and have + self._tail_len >= 4 + size:
                    self._merge()
                    continue
                return
            self._pos = end
            yield memoryview(buf)[pos + 4 : end]

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos + self._tail_len
