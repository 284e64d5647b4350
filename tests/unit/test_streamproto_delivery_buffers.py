"""Chunk delivery's output: a chunk's entry section leaves the connection as a buffer of its own
(not copied into one joined with the frames around it), the frames around it are joined, and the
I/O side can write each chunk as soon as it is queued, stopping the sending when its buffer fills;
credit still bounds what is sent."""

from __future__ import annotations

from broker.streamproto import chunk as C
from broker.streamproto import frames as F
from broker.streamproto.connection import BIG_BUFFER
from broker.streamproto.memory import MemoryBroker
from tests.unit.test_streamproto_connection import _open

RECORD = b"r" * 1000
PER_FRAME = 40  # 40 records of 1000 bytes: each chunk's entry section is above BIG_BUFFER


def _frames(out: bytes) -> list[F.Command]:
    cmds = []
    while out:
        size = int.from_bytes(out[:4], "big")
        cmds.append(F.parse(out[4 : 4 + size], from_server=True))
        out = out[4 + size :]
    return cmds


def _stream_with_chunks(n: int) -> MemoryBroker:
    b = MemoryBroker()
    b.create_stream("guest", "/", "s", {})
    pub = _open(b)
    pub.receive_data(F.DeclarePublisher(5, 0, "", "s").to_bytes())
    for f in range(n):
        ids = range(f * PER_FRAME, (f + 1) * PER_FRAME)
        pub.receive_data(F.Publish.build(0, [(i, RECORD) for i in ids]).to_bytes())
    return b


def test_a_big_entry_section_is_a_buffer_of_its_own_and_the_frames_around_it_are_joined() -> None:
    conn = _open(_stream_with_chunks(3))
    conn.receive_data(F.Subscribe(5, 1, "s", F.OffsetSpec(F.OffsetType.FIRST), 2).to_bytes())
    bufs = conn.buffers_to_send()
    section = 4 * PER_FRAME + len(RECORD) * PER_FRAME
    assert section >= BIG_BUFFER
    # the subscribe response and the first deliver header, the first section, the second
    # deliver header, the second section
    assert [len(b) for b in bufs][1::2] == [section, section]
    assert all(len(b) < BIG_BUFFER for b in bufs[0::2])
    cmds = _frames(b"".join(bufs))
    assert isinstance(cmds[0], F.CodeResponse) and cmds[0].code == 1
    delivered = [C.decode(c.chunk) for c in cmds if isinstance(c, F.Deliver)]
    assert [(d.first_offset, len(d.records())) for d in delivered] == [(0, PER_FRAME), (PER_FRAME, PER_FRAME)]
    assert all(rec == RECORD for d in delivered for _o, rec in d.records())
    assert conn.buffers_to_send() == []  # credit spent: nothing more, though a chunk is left


def test_data_to_send_counts_and_joins_what_buffers_to_send_gives() -> None:
    broker = _stream_with_chunks(2)
    a, b = _open(broker), _open(broker)
    for conn in (a, b):
        conn.receive_data(F.Subscribe(5, 1, "s", F.OffsetSpec(F.OffsetType.FIRST), 5).to_bytes())
    sent_a, sent_b = a.send_oct, b.send_oct
    joined = b"".join(a.buffers_to_send())
    assert joined == b.data_to_send()
    assert a.send_oct - sent_a == b.send_oct - sent_b == len(joined)


def test_the_io_side_writes_each_chunk_as_it_is_queued_and_a_full_buffer_stops_the_sending() -> None:
    conn = _open(_stream_with_chunks(4))
    written: list[list[bytes]] = []

    def write_now() -> None:
        written.append(conn.buffers_to_send())
        if len(written) == 2:  # the transport's buffer went above its high-water mark
            conn.set_writable(False)

    conn.on_chunk = write_now
    conn.receive_data(F.Subscribe(5, 1, "s", F.OffsetSpec(F.OffsetType.FIRST), 10).to_bytes())
    assert len(written) == 2  # the response went out with the first chunk, before the second was read
    first = _frames(b"".join(written[0]))
    assert isinstance(first[0], F.CodeResponse) and [type(c) for c in first[1:]] == [F.Deliver]
    assert conn.subscriptions[1].credit == 8
    conn.set_writable(True)  # drained: the two chunks left go, the credit left stays
    assert len(written) == 4
    offsets = [
        C.decode(c.chunk).first_offset
        for w in written
        for c in _frames(b"".join(w))
        if isinstance(c, F.Deliver)
    ]
    assert offsets == [0, PER_FRAME, 2 * PER_FRAME, 3 * PER_FRAME]
    assert conn.subscriptions[1].credit == 6
