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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar, cast, dataclass_transform, overload

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


T = TypeVar("T")

# -- field readers ----------------------------------------------------------------------------


def _number(fmt: struct.Struct) -> Callable[[Reader], int]:
    """A `Reader` method reading one number of `fmt`."""

    def read(self: Reader) -> int:
        return self._take(fmt)

    return read


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

    u8 = _number(_U8)
    u16 = _number(_U16)
    i16 = _number(_I16)
    u32 = _number(_U32)
    i32 = _number(_I32)
    u64 = _number(_U64)
    i64 = _number(_I64)

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


# -- field codecs -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Codec:
    """How one field goes on the wire: `pack` a value, `read` it back."""

    pack: Callable[[Any], bytes]
    read: Callable[[Reader], Any]


def _read_map(r: Reader) -> dict[str, str]:
    r.u32()
    return r.map_to_end()


def _read_list(r: Reader) -> tuple[str, ...]:
    r.u32()
    return tuple(r.strings_to_end())


U8 = Codec(_U8.pack, Reader.u8)
U16 = Codec(_U16.pack, Reader.u16)
I16 = Codec(_I16.pack, Reader.i16)
U32 = Codec(_U32.pack, Reader.u32)
U64 = Codec(_U64.pack, Reader.u64)
STR = Codec(s, Reader.string)
#: the rest of the frame, as it is
REST = Codec(bytes, Reader.rest)
#: a count, then key/value strings to the end of the frame (the count is not read)
MAP = Codec(str_map, _read_map)
#: MAP, left out when empty
SOME_MAP = Codec(lambda d: str_map(d) if d else b"", _read_map)
#: a count, then strings to the end of the frame
LIST = Codec(lambda items: str_list(list(items)), _read_list)


# -- commands ---------------------------------------------------------------------------------


@dataclass_transform(frozen_default=True)
class Command:
    """A parsed frame, a frozen dataclass. `key` is the 15-bit command key, `response` the
    direction bit. A command with a `layout` (one codec per field, in order) packs and parses by
    it; the others pack and read themselves."""

    key: ClassVar[int] = 0
    response: ClassVar[bool] = False
    layout: ClassVar[tuple[Codec, ...] | None] = None
    _names: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(
        cls, key: int = 0, response: bool = False, layout: tuple[Codec, ...] | None = None, **kw: Any
    ) -> None:
        super().__init_subclass__(**kw)
        if key:
            cls.key = key
        if response:
            cls.response = True
        cls.layout = layout
        dataclass(frozen=True)(cls)
        cls._names = tuple(f.name for f in fields(cls))  # type: ignore[arg-type]

    def pack_body(self) -> bytes:
        layout = self.layout
        if layout is None:
            raise NotImplementedError
        values = (c.pack(getattr(self, name)) for c, name in zip(layout, self._names, strict=True))
        return _head(self) + b"".join(values)

    @classmethod
    def read(cls, r: Reader) -> Command:
        """The command from its fields (after the key and version)."""
        if cls.layout is None:
            raise ParseError(f"key {cls.key}")
        return cls(*[c.read(r) for c in cls.layout])

    def to_bytes(self) -> bytes:
        return frame(self.pack_body())


def _head(cmd: Command, corr: int | None = None) -> bytes:
    k = cmd.key | (RESPONSE_BIT if cmd.response else 0)
    if corr is None:
        return _HEAD.pack(k, VERSION)
    return _HEAD_CORR.pack(k, VERSION, corr)


class Unknown(Command):
    """A frame RabbitMQ does not parse (answered with close UNKNOWN_FRAME after open)."""

    data: bytes = b""

    def pack_body(self) -> bytes:
        return self.data


class Crash(Command):
    """A frame RabbitMQ's parser crashes on: the connection is dropped without a frame."""

    data: bytes = b""
    reason: str = ""

    def pack_body(self) -> bytes:
        return self.data


class Request(Command):
    """A command that carries a correlation id and expects a response."""

    corr: int = 0


class CodeResponse(Command, response=True):
    """The plain response: correlation id and code (the key says which request)."""

    corr: int = 0
    code: int = 1
    request_key: int = 0

    def pack_body(self) -> bytes:
        return _HEAD_CORR.pack(self.request_key | RESPONSE_BIT, VERSION, self.corr) + _U16.pack(self.code)


class DeclarePublisher(Request, key=Key.DECLARE_PUBLISHER, layout=(U32, U8, STR, STR)):
    publisher_id: int = 0
    reference: str = ""
    stream: str = ""


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


class Publish(Command, key=Key.PUBLISH, layout=(U8, U32, REST)):
    """Publish: `messages` as sent (`publishing_id:u64` then a simple or sub-batch entry, each)."""

    publisher_id: int = 0
    count: int = 0
    messages: bytes = b""

    def entries(self) -> Published:
        """(publishing id, entry) pairs; a malformed list is `CrashError` (RabbitMQ's badmatch)."""
        return published(self.messages)

    @classmethod
    def build(cls, publisher_id: int, items: list[tuple[int, Entry]]) -> Publish:
        return cls(publisher_id, len(items), b"".join(pack_published(i, e) for i, e in items))


class PublishConfirm(Command, key=Key.PUBLISH_CONFIRM):
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

    @classmethod
    def read(cls, r: Reader) -> Command:
        pid, ids = _publisher_items(r, Reader.u64)
        return cls(pid, tuple(ids))


def _publisher_items(r: Reader, item: Callable[[Reader], T]) -> tuple[int, list[T]]:
    """A publisher id, then a count (not read) and items to the end of the frame."""
    pid = r.u8()
    r.u32()
    items = []
    while r.left:
        items.append(item(r))
    return pid, items


class PublishError(Command, key=Key.PUBLISH_ERROR):
    """One code for all the ids, as RabbitMQ sends it (the wire has a code per id)."""

    publisher_id: int = 0
    code: int = 0
    publishing_ids: tuple[int, ...] = ()

    def pack_body(self) -> bytes:
        body = b"".join(_U64.pack(i) + _U16.pack(self.code) for i in self.publishing_ids)
        return _head(self) + _U8.pack(self.publisher_id) + _U32.pack(len(self.publishing_ids)) + body

    @classmethod
    def read(cls, r: Reader) -> Command:
        pid, errs = _publisher_items(r, lambda r: (r.u64(), r.u16()))
        return cls(pid, errs[0][1] if errs else 0, tuple(i for i, _ in errs))


class QueryPublisherSequence(Request, key=Key.QUERY_PUBLISHER_SEQUENCE, layout=(U32, STR, STR)):
    reference: str = ""
    stream: str = ""


class QueryPublisherSequenceResponse(
    Command, key=Key.QUERY_PUBLISHER_SEQUENCE, response=True, layout=(U32, U16, U64)
):
    corr: int = 0
    code: int = 1
    sequence: int = 0


class DeletePublisher(Request, key=Key.DELETE_PUBLISHER, layout=(U32, U8)):
    publisher_id: int = 0


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

    @classmethod
    def read(cls, r: Reader) -> OffsetSpec:
        """An unknown offset type crashes RabbitMQ's parser."""
        kind = r.i16()
        if kind == OffsetType.OFFSET:
            return cls(OffsetType.OFFSET, r.u64())
        if kind == OffsetType.TIMESTAMP:
            return cls(OffsetType.TIMESTAMP, r.i64())
        if kind in (OffsetType.FIRST, OffsetType.LAST, OffsetType.NEXT):
            return cls(OffsetType(kind))
        raise CrashError(f"offset type {kind}")


class Subscribe(Request, key=Key.SUBSCRIBE):
    subscription_id: int = 0
    stream: str = ""
    offset: OffsetSpec = OffsetSpec(OffsetType.NEXT)
    credit: int = 0
    properties: dict[str, str] = field(default_factory=dict)

    def pack_body(self) -> bytes:
        props = str_map(self.properties) if self.properties else b""
        head = _head(self, self.corr) + _U8.pack(self.subscription_id) + s(self.stream)
        return head + self.offset.pack() + _U16.pack(self.credit) + props

    @classmethod
    def read(cls, r: Reader) -> Command:
        corr, sub, stream = r.u32(), r.u8(), r.string()
        spec = OffsetSpec.read(r)
        try:
            credit = r.u16()
        except ParseError as e:
            raise CrashError(str(e)) from None
        props: dict[str, str] = {}
        if r.left >= 4:  # a malformed tail is logged and ignored by RabbitMQ
            props = _read_map(r)
        else:
            r.pos = len(r.data)
        return cls(corr, sub, stream, spec, credit, props)


class Deliver(Command, key=Key.DELIVER, layout=(U8, REST)):
    subscription_id: int = 0
    chunk: bytes = b""


def deliver_header(subscription_id: int, chunk_size: int) -> bytes:
    """The bytes in front of a chunk RabbitMQ sends (its send_file callback writes these first)."""
    return _SIZE.pack(5 + chunk_size) + _HEAD.pack(Key.DELIVER, VERSION) + _U8.pack(subscription_id)


class Credit(Command, key=Key.CREDIT, layout=(U8, I16)):
    """Credit in chunks; RabbitMQ reads it signed."""

    subscription_id: int = 0
    credit: int = 0


class CreditResponse(Command, key=Key.CREDIT, response=True, layout=(U16, U8)):
    """Sent only for a credit to an unknown subscription; it has no correlation id."""

    code: int = 0
    subscription_id: int = 0


class StoreOffset(Command, key=Key.STORE_OFFSET, layout=(STR, STR, U64)):
    reference: str = ""
    stream: str = ""
    offset: int = 0


class QueryOffset(Request, key=Key.QUERY_OFFSET, layout=(U32, STR, STR)):
    reference: str = ""
    stream: str = ""


class QueryOffsetResponse(Command, key=Key.QUERY_OFFSET, response=True, layout=(U32, U16, U64)):
    corr: int = 0
    code: int = 1
    offset: int = 0


class Unsubscribe(Request, key=Key.UNSUBSCRIBE, layout=(U32, U8)):
    subscription_id: int = 0


class CreateStream(Request, key=Key.CREATE_STREAM, layout=(U32, STR, MAP)):
    stream: str = ""
    arguments: dict[str, str] = field(default_factory=dict)


class DeleteStream(Request, key=Key.DELETE_STREAM, layout=(U32, STR)):
    stream: str = ""


class Metadata(Request, key=Key.METADATA, layout=(U32, LIST)):
    streams: tuple[str, ...] = ()


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


class MetadataResponse(Command, key=Key.METADATA, response=True):
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

    @classmethod
    def read(cls, r: Reader) -> Command:
        corr = r.u32()
        brokers = [Broker(r.u16(), r.string(), r.u32()) for _ in range(r.u32())]
        metas = []
        for _ in range(r.u32()):
            name, code, leader = r.string(), r.u16(), r.u16()
            metas.append(StreamMetadata(name, code, leader, tuple(r.u16() for _ in range(r.u32()))))
        return cls(corr, tuple(brokers), tuple(metas))


class MetadataUpdate(Command, key=Key.METADATA_UPDATE, layout=(U16, STR)):
    code: int = 0
    stream: str = ""


class PeerProperties(Request, key=Key.PEER_PROPERTIES, layout=(U32, MAP)):
    properties: dict[str, str] = field(default_factory=dict)


class PeerPropertiesResponse(Command, key=Key.PEER_PROPERTIES, response=True, layout=(U32, U16, MAP)):
    corr: int = 0
    code: int = 1
    properties: dict[str, str] = field(default_factory=dict)


class SaslHandshake(Request, key=Key.SASL_HANDSHAKE, layout=(U32,)):
    pass


class SaslHandshakeResponse(Command, key=Key.SASL_HANDSHAKE, response=True, layout=(U32, U16, LIST)):
    corr: int = 0
    code: int = 1
    mechanisms: tuple[str, ...] = ()


class SaslAuthenticate(Request, key=Key.SASL_AUTHENTICATE):
    """`data` None is the null bytes (length -1)."""

    mechanism: str = ""
    data: bytes | None = None

    def pack_body(self) -> bytes:
        tail = _I32.pack(-1) if self.data is None else _U32.pack(len(self.data)) + self.data
        return _head(self, self.corr) + s(self.mechanism) + tail

    @classmethod
    def read(cls, r: Reader) -> Command:
        corr, mechanism, n = r.u32(), r.string(), r.i32()
        return cls(corr, mechanism, None if n == -1 else r.raw(n))


class SaslAuthenticateResponse(Command, key=Key.SASL_AUTHENTICATE, response=True):
    """A challenge goes out as a 16-bit length string, and only when there is one."""

    corr: int = 0
    code: int = 1
    challenge: bytes = b""

    def pack_body(self) -> bytes:
        tail = _U16.pack(len(self.challenge)) + self.challenge if self.challenge else b""
        return _head(self, self.corr) + _U16.pack(self.code) + tail

    @classmethod
    def read(cls, r: Reader) -> Command:
        corr, code = r.u32(), r.u16()
        return cls(corr, code, r.raw(r.u16()))


class Tune(Command, key=Key.TUNE):
    """Sent by the server (a request) and answered by the client with the same key, or with the
    response bit (both are read as the client's answer)."""

    frame_max: int = 0
    heartbeat: int = 0
    answer: bool = False

    def pack_body(self) -> bytes:
        k = Key.TUNE | (RESPONSE_BIT if self.answer else 0)
        return _HEAD.pack(k, VERSION) + _U32.pack(self.frame_max) + _U32.pack(self.heartbeat)

    @classmethod
    def read(cls, r: Reader) -> Command:
        return cls(r.u32(), r.u32())


class Open(Request, key=Key.OPEN, layout=(U32, STR)):
    vhost: str = ""


class OpenResponse(Command, key=Key.OPEN, response=True, layout=(U32, U16, SOME_MAP)):
    """Connection properties go out only with OK (a failure is the bare code)."""

    corr: int = 0
    code: int = 1
    properties: dict[str, str] = field(default_factory=dict)


class Close(Request, key=Key.CLOSE, layout=(U32, U16, STR)):
    code: int = 0
    reason: str = ""


class Heartbeat(Command, key=Key.HEARTBEAT, layout=()):
    pass


class Route(Request, key=Key.ROUTE, layout=(U32, STR, STR)):
    routing_key: str = ""
    super_stream: str = ""


class Partitions(Request, key=Key.PARTITIONS, layout=(U32, STR)):
    super_stream: str = ""


class StreamsResponse(Command):
    """The route and partitions responses: the request's key WITHOUT the response bit (3.10.8)."""

    corr: int = 0
    code: int = 1
    streams: tuple[str, ...] = ()
    request_key: int = Key.ROUTE

    def pack_body(self) -> bytes:
        head = _HEAD_CORR.pack(self.request_key, VERSION, self.corr) + _U16.pack(self.code)
        return head + str_list(list(self.streams))


# -- parsing ----------------------------------------------------------------------------------

#: The commands a client sends (with and without correlation id), by key.
_REQUESTS: dict[int, type[Command]] = {
    cls.key: cls
    for cls in (
        DeclarePublisher, QueryPublisherSequence, DeletePublisher, Subscribe, QueryOffset, Unsubscribe,
        CreateStream, DeleteStream, Metadata, PeerProperties, SaslHandshake, SaslAuthenticate, Open,
        Close, Route, Partitions, Publish, PublishConfirm, PublishError, Deliver, Credit,
        MetadataUpdate, StoreOffset, Heartbeat, Tune,
    )
}  # fmt: skip
#: The responses with a correlation id that carry more than a code, by key.
_RESPONSES: dict[int, type[Command]] = {
    cls.key: cls
    for cls in (
        QueryPublisherSequenceResponse, QueryOffsetResponse, OpenResponse, PeerPropertiesResponse,
        SaslHandshakeResponse, SaslAuthenticateResponse, MetadataResponse,
    )
}  # fmt: skip
#: Their answer is never the bare code, whatever its length.
_VALUED = frozenset({Key.QUERY_PUBLISHER_SEQUENCE, Key.QUERY_OFFSET})


def _parse_response(key: int, r: Reader) -> Command:
    if key == Key.TUNE:
        return Tune(r.u32(), r.u32(), answer=True)
    if key == Key.CREDIT:
        return CreditResponse.read(r)
    if r.left == 6 and key not in _VALUED:  # the correlation id and a code
        return CodeResponse(r.u32(), r.u16(), key)
    cls = _RESPONSES.get(key)
    if cls is None:
        raise ParseError(f"response key {key}")
    return cls.read(r)


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
            cmd = StreamsResponse(corr, code, _read_list(r), key)
        else:
            cls = _REQUESTS.get(key)
            if cls is None:
                raise ParseError(f"key {key}")
            cmd = cls.read(r)
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
