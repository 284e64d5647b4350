"""The stream codec against RabbitMQ 3.10.8's own bytes (tests/data/stream_protocol/)."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest

from broker.streamproto import chunk as C
from broker.streamproto import frames as F
from broker.streamproto.constants import Code, Key, OffsetType

DATA = Path(__file__).parent.parent / "data" / "stream_protocol" / "rabbitmq_3.10.8.json"
RECORDED = json.loads(DATA.read_text())
SCENARIOS = RECORDED["scenarios"]


def _frames(direction: str) -> list[tuple[str, bytes]]:
    out = []
    for name, steps in SCENARIOS.items():
        for st in steps:
            if st["dir"] == direction and "hex" in st:
                raw = bytes.fromhex(st["hex"]) + b"\0" * st.get("zero_fill", 0)
                out.append((f"{name}: {st['note']}", raw))
    return out


CLIENT = _frames("c2s")
SERVER = _frames("s2c")
#: Frames the recorder sent malformed on purpose.
BROKEN = {"unknown_frame: unknown key after open", "malformed_frame: truncated declare publisher"}


@pytest.mark.parametrize(("note", "raw"), CLIENT, ids=[n for n, _ in CLIENT])
def test_client_frames_parse_and_pack_back(note: str, raw: bytes) -> None:
    cmd = F.parse(raw[4:])
    if note in BROKEN:
        assert isinstance(cmd, F.Unknown)
        return
    assert not isinstance(cmd, (F.Unknown, F.Crash)), cmd
    assert cmd.to_bytes() == raw


@pytest.mark.parametrize(("note", "raw"), SERVER, ids=[n for n, _ in SERVER])
def test_server_frames_parse_and_pack_back(note: str, raw: bytes) -> None:
    cmd = F.parse(raw[4:], from_server=True)
    assert not isinstance(cmd, (F.Unknown, F.Crash)), cmd
    if isinstance(cmd, F.Close):  # a close request from the server is a request like the client's
        assert (cmd.code, cmd.reason, cmd.corr) == (Code.UNKNOWN_FRAME, "unknown frame", 1)
    assert cmd.to_bytes() == raw


def test_route_and_partitions_answer_without_the_response_bit() -> None:
    raw = {n: r for n, r in SERVER if n.startswith("create_delete_metadata: route")}
    (route,) = raw.values()
    assert route[4:6] == b"\x00\x18"
    cmd = F.parse(route[4:], from_server=True)
    assert isinstance(cmd, F.StreamsResponse)
    assert (cmd.code, cmd.streams) == (Code.STREAM_DOES_NOT_EXIST, ())


def test_credit_response_has_no_correlation_id() -> None:
    ((_, raw),) = [(n, r) for n, r in SERVER if n.startswith("subscribe: credit response")]
    cmd = F.parse(raw[4:], from_server=True)
    assert cmd == F.CreditResponse(Code.SUBSCRIPTION_ID_DOES_NOT_EXIST, 77)


def _delivers() -> list[tuple[str, F.Deliver]]:
    out = []
    for note, raw in SERVER:
        cmd = F.parse(raw[4:], from_server=True)
        if isinstance(cmd, F.Deliver):
            out.append((note, cmd))
    return out


DELIVERS = _delivers()


@pytest.mark.parametrize(("note", "deliver"), DELIVERS, ids=[n for n, _ in DELIVERS])
def test_chunks_reencode_byte_for_byte(note: str, deliver: F.Deliver) -> None:
    """Header fields, CRC32 of the entry data, entries: our encoder rebuilds RabbitMQ's chunk."""
    d = C.decode(deliver.chunk)
    assert d.crc_ok
    assert d.crc == zlib.crc32(deliver.chunk[C.HEADER_SIZE : C.HEADER_SIZE + d.data_length])
    sent_trailer = len(deliver.chunk) > C.HEADER_SIZE + d.data_length
    trailer = d.trailer if sent_trailer else b"\0" * d.trailer_length
    rebuilt = C.Chunk.of(
        d.entries,
        first_offset=d.first_offset,
        timestamp=d.timestamp,
        epoch=d.epoch,
        chunk_type=d.chunk_type,
        trailer=trailer,
    )
    assert rebuilt.wire(with_trailer=sent_trailer) == deliver.chunk
    assert F.deliver_header(deliver.subscription_id, len(deliver.chunk)) + deliver.chunk == deliver.to_bytes()


def test_chunk_fields_as_recorded() -> None:
    """The first chunk: three plain entries (m1, m2, and the message with properties), epoch 1,
    written by the named publisher ref-a (its 15-byte sequence trailer is not sent)."""
    _note, first = DELIVERS[0]
    d = C.decode(first.chunk)
    assert (d.chunk_type, d.num_entries, d.num_records, d.epoch, d.first_offset) == (C.USER, 3, 3, 1, 0)
    assert (d.trailer_length, d.trailer) == (15, b"")
    batch = C.decode(DELIVERS[1][1].chunk)
    assert (batch.num_entries, batch.num_records, batch.first_offset) == (1, 3, 3)
    (entry,) = batch.entries
    assert isinstance(entry, F.SubBatch)
    assert entry.compression == 0 and [r[-2:] for r in entry.records()] == [b"b1", b"b2", b"b3"]
    tracking = [C.decode(d.chunk) for n, d in DELIVERS if "tracking chunks too" in n]
    delta = [t for t in tracking if t.chunk_type == C.TRACKING_DELTA]
    assert len(delta) == 1 and delta[0].first_offset == 6
    assert delta[0].entries == (C.tracking_entries([(C.TRACK_OFFSET, "consumer-1", 3)]),)
    named = next(t for t in tracking if t.first_offset == 0)
    assert named.trailer == C.tracking_entries([(C.TRACK_SEQUENCE, "ref-a", 3)])


def test_subscribe_offset_specs_pack_as_recorded() -> None:
    stream = "rec-" + RECORDED["stream_suffix"]
    specs = {
        "subscribe first, credit 10": (1, F.OffsetSpec(OffsetType.FIRST), 10),
        "subscribe offset 1, credit 1": (3, F.OffsetSpec(OffsetType.OFFSET, 1), 1),
        "subscribe last": (4, F.OffsetSpec(OffsetType.LAST), 5),
        "subscribe next": (5, F.OffsetSpec(OffsetType.NEXT), 5),
    }
    for note, raw in CLIENT:
        name = note.split(": ", 1)[1]
        if note.startswith("subscribe: ") and name in specs:
            sub, spec, credit = specs[name]
            cmd = F.parse(raw[4:])
            assert isinstance(cmd, F.Subscribe)
            assert (cmd.subscription_id, cmd.stream, cmd.offset, cmd.credit) == (sub, stream, spec, credit)


def test_malformed_and_crashing_frames() -> None:
    """RabbitMQ answers what its patterns do not match with UNKNOWN_FRAME; its map and list
    parsers crash on a partial element (the connection dies)."""
    assert isinstance(
        F.parse(b"\x00\x01\x00\x02\x00\x00\x00\x01\x00\x00\x00\x00\x00"), F.Unknown
    )  # version 2
    assert isinstance(F.parse(b"\x00\x17\x00\x01\x00"), F.Unknown)  # heartbeat + a byte
    partial_map = F.PeerProperties(1, {"a": "b"}).to_bytes()[4:-1]
    assert isinstance(F.parse(partial_map), F.Crash)
    bad_offset = F.Subscribe(1, 0, "s", F.OffsetSpec(OffsetType.FIRST), 1).to_bytes()[4:]
    bad_offset = bad_offset[:-4] + b"\x00\x09" + bad_offset[-2:]
    assert isinstance(F.parse(bad_offset), F.Crash)
    publish = F.Publish(0, 1, b"\x00" * 8 + b"\x00\x00\x00\x09ab")
    with pytest.raises(F.CrashError):
        publish.entries()


def test_frame_decoder_splits_and_bounds() -> None:
    dec = F.FrameDecoder(limit=100)
    hb = F.Heartbeat().to_bytes()
    dec.feed(hb + hb[:3])
    assert [bytes(b) for b in dec.frames()] == [hb[4:]]
    dec.feed(hb[3:])
    assert [bytes(b) for b in dec.frames()] == [hb[4:]]
    dec.feed(b"\x00\x00\x01\x00")
    with pytest.raises(F.FrameTooLargeError):
        list(dec.frames())


def test_keys_are_the_3_10_8_set() -> None:
    assert [k.value for k in Key] == list(range(1, 26))
