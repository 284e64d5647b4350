"""The stream queue type without sockets: arguments, offsets, the segmented log and retention,
what a stream keeps of a message and what consumers receive (ManualClock, recording channel)."""

from __future__ import annotations

import pytest

from amqpwire.errors import AmqpError
from amqpwire.fields import Field, FieldTable
from broker.entities.clock import ManualClock
from broker.entities.message import StoredMessage
from broker.entities.queues.catalog import Consumer, Queue
from broker.entities.queues.stream.arguments import (
    OffsetSpec,
    check_consume,
    check_declare,
    max_age_ms,
    parse_offset,
)
from broker.entities.queues.stream.log import StreamLog
from broker.entities.queues.stream.queue import StreamQueue, stream_message
from broker.protocol import properties as P
from tests.unit.entities_support import RecordingChannel, vhost

RS = "queue 's' in vhost '/'"


def table(**values: Field) -> FieldTable:
    return FieldTable((k.replace("_", "-"), v) for k, v in values.items())


def S(v: str) -> Field:
    return Field("longstr", v.encode())


def stream(clock: ManualClock | None = None, **extra: Field) -> StreamQueue:
    v = vhost(clock)
    q = Queue(
        v, "s", durable=True, exclusive_owner=None, auto_delete=False,
        arguments=table(x_queue_type=S("stream"), **extra),
    )  # fmt: skip
    assert isinstance(q, StreamQueue)
    v.add_queue(q)
    return q


def msg(body: str, props: bytes = b"\x00\x00", rk: str = "qsobs-12345678-s") -> StoredMessage:
    return StoredMessage("", rk, props, body.encode())


def refusal(fn: object, *args: object, **kw: object) -> tuple[int, str, bool]:
    with pytest.raises(AmqpError) as info:
        fn(*args, **kw)  # type: ignore[operator]
    e = info.value
    return e.reply_code, e.reply_text, e.hard


# -- arguments ----------------------------------------------------------------------------------------


def test_max_age_grammar() -> None:
    assert max_age_ms(b"1Y") == 365 * 86_400_000
    assert max_age_ms(b"1M") == 30 * 86_400_000
    assert max_age_ms(b"10s") == 10_000
    for bad in (b"0s", b"1d", b"1H", b"10", b"1x"):
        with pytest.raises(ValueError):
            max_age_ms(bad)
    assert refusal(max_age_ms, b"-1h") == (541, "INTERNAL_ERROR", True)


def test_declare_refusals_in_rabbitmq_order() -> None:
    def check(args: FieldTable, **flags: bool) -> tuple[int, str, bool]:
        kw = {"durable": True, "exclusive": False, "auto_delete": False, **flags}
        return refusal(check_declare, args, RS, **kw)

    assert check(table(x_max_age=Field("signedint", 10)))[1].endswith(": {unacceptable_type,signedint}")
    assert check(table(x_max_age=S("1d")))[1].endswith(": invalid_max_age")
    assert check(table(x_initial_cluster_size=Field("signedint", 0)))[1].endswith(": {value_zero,0}")
    # a value error of an argument the stream takes comes before an unsupported key, whatever the
    # table order; the value of an unsupported key is never checked
    bad_bytes = table(x_max_priority=Field("signedint", 300), x_max_length_bytes=Field("signedint", -1))
    assert check(bad_bytes)[:2] == (
        406, f"PRECONDITION_FAILED - invalid arg 'x-max-length-bytes' for {RS}: {{value_negative,-1}}",
    )  # fmt: skip
    assert check(table(x_max_priority=Field("signedint", 300)))[1].endswith("type rabbit_stream_queue")
    assert check(table(x_overflow=S("drop-head"), x_max_length=Field("signedint", 1)))[1] == (
        f"PRECONDITION_FAILED - invalid arg 'x-overflow' for {RS} of queue type rabbit_stream_queue"
    )
    assert check(table(x_max_length=Field("signedint", 1)), durable=False)[1].endswith(
        "queue type rabbit_stream_queue"
    )
    assert check(FieldTable(), durable=False, auto_delete=True)[1] == (
        f"PRECONDITION_FAILED - invalid property 'auto-delete' for {RS}"
    )
    check_declare(
        table(x_whatever=Field("signedint", 1)), RS, durable=True, exclusive=False, auto_delete=False
    )


def test_consume_checks() -> None:
    def check(args: FieldTable, *, no_ack: bool = False, prefetch: int = 10) -> object:
        return check_consume(args, RS, no_ack=no_ack, prefetch=prefetch, now_ms=1_000_000)

    assert refusal(check, table(x_priority=Field("signedint", 1)))[1].endswith("rabbit_stream_queue")
    assert refusal(check, FieldTable(), prefetch=0) == (
        406, f"PRECONDITION_FAILED - consumer prefetch count is not set for '{RS}'", False,
    )  # fmt: skip
    assert refusal(check, FieldTable(), prefetch=0, no_ack=True)[0] == 406
    assert refusal(check, FieldTable(), no_ack=True) == (
        540, f"NOT_IMPLEMENTED - automatic acknowledgement not supported by stream queues {RS}", True,
    )  # fmt: skip
    assert refusal(check, table(x_stream_offset=S("5")))[1] == (
        f"PRECONDITION_FAILED - invalid arg 'x-stream-offset' for {RS}: "
        '{invalid_stream_offset_arg,{longstr,<<"5">>}}'
    )
    for crash in (S("bogus"), Field("bool", True), Field("decimal", (1, 15)), Field("binary", b"5")):
        assert refusal(check, table(x_stream_offset=crash)) == (541, "INTERNAL_ERROR", True)
    assert check(table(x_stream_offset=Field("binary", b"first"))) == OffsetSpec("first")


def test_offset_specs() -> None:
    now = 10_000_000
    assert parse_offset(None, RS, now) == OffsetSpec("next")
    assert parse_offset(S("1h"), RS, now) == OffsetSpec("timestamp", now - 3_600_000)
    assert parse_offset(Field("timestamp", 5), RS, now) == OffsetSpec("timestamp", 5000)
    assert parse_offset(Field("long", -1), RS, now) == OffsetSpec("offset", -1)


# -- the log -------------------------------------------------------------------------------------------


def test_retention_per_segment_as_recorded() -> None:
    """st_retention_segments on RabbitMQ 3.10.8: 60 × 100-byte messages, 500-byte segments,
    max-length-bytes 2000 -> offsets 81, 82, 84, 85, 87, 88 kept (tracking chunks take the gaps)."""
    log = StreamLog(500, max_bytes=2000)
    for i in range(60):
        log.append(msg(f"{i:03d}" + "x" * 97), 0)
    assert [r.offset for r in log.retained()] == [81, 82, 84, 85, 87, 88]
    assert log.next_offset == 89
    assert [r.msg.body[:3] for r in log.retained()] == [
        b"054",
        b"055",
        b"056",
        b"057",
        b"058",
        b"059",
    ]


def test_segment_rolls_measured_on_rabbitmq() -> None:
    """Offsets measured on RabbitMQ 3.10.8 with 100-byte bodies and a 16-character routing key."""
    measured = {
        300: [0, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21],
        400: [0, 1, 3, 4, 6, 7, 9, 10, 12, 13, 15, 16],
        600: [0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14],
        800: [0, 1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14],
        1000: [0, 1, 2, 3, 5, 6, 7, 8, 10, 11, 12, 13],
    }
    for size, offsets in measured.items():
        log = StreamLog(size)
        for _i in range(12):
            log.append(msg("x" * 100, rk="stprobe-12345678"), 0)
        assert [r.offset for r in log.retained()] == offsets, size


def test_segment_rolls_after_max_chunks_too() -> None:
    """osiris's max_segment_size_chunks (256,000): a 1,000,000-message stream of one-message
    chunks ends at offset 1,000,000 on RabbitMQ 3.10.8 (the second segment's tracking chunk takes
    one offset); batched records join a chunk and do not count."""
    assert StreamLog(500_000_000).segment_chunks == 256_000
    log = StreamLog(500_000_000, segment_chunks=3)
    for _i in range(3):
        log.append(msg("x"), 0)
    log.chunk_open = True
    log.append(msg("y"), 0)  # joins the third chunk
    log.chunk_open = False
    assert log.write_offset == 5
    log.append(msg("z"), 0)
    assert [r.offset for r in log.retained()] == [0, 1, 2, 3, 5]
    log.append(msg("z"), 0)  # the new segment: tracking chunk + 2 chunks = 3
    log.append(msg("z"), 0)
    assert [r.offset for r in log.retained()][-2:] == [6, 8]


def test_max_age_drops_old_segments_on_roll() -> None:
    log = StreamLog(300, max_age_ms=1000)
    for t in (0, 0, 5000, 5000):
        log.append(msg("x" * 100), t)
    assert log.first_offset == 3  # the first segment (offsets 0, 1) aged out when the third rolled


def test_start_offsets() -> None:
    log = StreamLog(500_000_000)
    for t in range(10):
        log.append(msg(f"m{t}"), t * 1000)
    assert log.start_offset(OffsetSpec("first")) == 0
    assert log.start_offset(OffsetSpec("last")) == 9
    assert log.start_offset(OffsetSpec("next")) == 10
    assert log.start_offset(OffsetSpec("offset", -5)) == 0
    assert log.start_offset(OffsetSpec("offset", 100)) == 100
    assert log.start_offset(OffsetSpec("timestamp", 4500)) == 5
    assert log.start_offset(OffsetSpec("timestamp", 99_000)) == 10


def test_index_of_finds_offsets_across_tracking_gaps_and_retention() -> None:
    """The contiguous-offset guess and the binary search agree: every offset (a tracking chunk's
    gap too) maps to the first retained record at or after it, also after retention cut the head."""
    import bisect

    log = StreamLog(400, max_bytes=1500)
    for i in range(40):
        log.append(msg(f"{i:03d}" + "x" * 97), 0)
    assert log.head > 0 and len(set(range(log.first_offset, log.next_offset)) - set(log.offsets)) > 0
    for offset in range(0, log.next_offset + 2):
        expected = bisect.bisect_left(log.offsets, offset, lo=log.head)
        assert log.index_of(offset) == expected, offset


def test_a_paged_out_record_costs_a_few_machine_words() -> None:
    """A stream of millions of messages whose bodies the store holds keeps only its index in
    memory: offsets, chunk times and chunk starts as machine integers, and one list slot."""
    import tracemalloc

    body = msg("x" * 100)
    tracemalloc.start()
    try:
        log = StreamLog(500_000_000)
        for i in range(50_000):
            log.append(body, 1_700_000_000_000 + i)
        log.msgs[:] = [None] * len(log.msgs)
        used, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert used / 50_000 < 48, used / 50_000


# -- messages and consumers -----------------------------------------------------------------------------


def test_message_kept_without_cluster_id_and_containers() -> None:
    headers = FieldTable(
        [
            ("s", Field("longstr", b"v")),
            ("a", Field("array", ())),
            ("t", Field("table", FieldTable())),
            ("i", Field("signedint", 5)),
        ]
    )
    props = P.encode({"headers": headers, "cluster_id": "c", "app_id": "app"})
    kept = stream_message(msg("b", props))
    assert kept.prop("cluster_id") is None and kept.prop("app_id") == "app"
    assert [k for k, _ in kept.headers() or ()] == ["s", "i"]
    decimal = P.encode({"headers": FieldTable([("d", Field("decimal", (1, 15)))])})
    assert refusal(stream_message, msg("b", decimal)) == (541, "INTERNAL_ERROR", True)


def test_consumers_read_from_their_offsets_with_credit() -> None:
    clock = ManualClock()
    q = stream(clock)
    for i in range(5):
        q.enqueue(msg(f"m{i}", P.encode({"headers": FieldTable([("x-stream-offset", S("mine"))])})))
    ch = RecordingChannel()
    first = Consumer(ch, "first", q, False, False, 2, table(x_stream_offset=S("first")))
    at3 = Consumer(ch, "at3", q, False, False, 10, table(x_stream_offset=Field("long", 3)))
    nxt = Consumer(ch, "next", q, False, False, 10, FieldTable())
    for c in (first, at3, nxt):
        q.add_consumer(c)
    assert ch.delivered == [("first", b"m0"), ("first", b"m1"), ("at3", b"m3"), ("at3", b"m4")]
    headers = [list(e.msg.headers() or ()) for _c, _q, e in ch.entries]
    assert headers == [[("x-stream-offset", Field("long", n))] for n in (0, 1, 3, 4)]
    ch.ack_all()
    q.try_deliver()
    q.enqueue(msg("m5"))
    assert ch.delivered[4:] == [("first", b"m2"), ("first", b"m3"), ("at3", b"m5"), ("next", b"m5")]
    assert q.message_count == 0 and q.consumer_count == 0 and q.count == 6


def test_refused_operations_and_delete() -> None:
    q = stream()
    ch = RecordingChannel()
    q.add_consumer(Consumer(ch, "c", q, False, False, 1, FieldTable()))
    assert refusal(q.get, False)[:2] == (
        540,
        f"NOT_IMPLEMENTED - basic.get not supported by stream queues {RS}",
    )
    assert refusal(q.purge)[:2] == (540, f"NOT_IMPLEMENTED - queue.purge not supported by stream queues {RS}")
    assert refusal(q.check_reject)[1] == (
        f"NOT_IMPLEMENTED - basic.nack and basic.reject not supported by stream queues {RS}"
    )
    q.check_delete(if_unused=True, if_empty=True)
    assert q.vhost.delete_queue(q) == 0
    assert ch.cancelled == []  # the consumer hears of it after the deleting method's reply
    q.clock.advance(0)  # type: ignore[attr-defined]  # the test's ManualClock
    assert ch.cancelled == ["c"]


def test_store_positions_follow_offsets_across_a_restart() -> None:
    """The position a stream reserves for the store is the offset plus one, segment rolls
    included, so messages restored after a restart keep their offsets."""
    clock = ManualClock()
    q = stream(clock, x_stream_max_segment_size_bytes=Field("long", 300))
    positions = []
    for i in range(6):
        q.seq += 1  # what persistence does before enqueue
        positions.append(q.seq)
        q.enqueue(msg(f"m{i}" + "x" * 98, rk="stprobe-12345678"))
        clock.advance(0)  # one publish per pass of the event loop: one chunk each
    assert [r.offset + 1 for r in q.log.retained()] == positions == [1, 2, 4, 6, 8, 10]
    again = stream(None, x_stream_max_segment_size_bytes=Field("long", 300))
    for seq, record in zip(positions, q.log.retained(), strict=True):
        again.restore(seq, record.msg, False)
    assert [r.offset for r in again.log.retained()] == [r.offset for r in q.log.retained()]
    assert again.seq == q.seq and again.log.next_offset == q.log.next_offset
    ch = RecordingChannel()
    again.add_consumer(Consumer(ch, "c", again, False, False, 10, table(x_stream_offset=Field("long", 3))))
    assert [b[:2] for _t, b in ch.delivered] == [b"m2", b"m3", b"m4", b"m5"]


def test_global_qos_is_refused_after_the_consume_checks() -> None:
    q = stream()
    q.check_global_qos(0)
    assert refusal(q.check_global_qos, 5)[:2] == (540, f"NOT_IMPLEMENTED - {RS} does not support global qos")


def test_policy_with_a_key_streams_refuse_is_not_applied() -> None:
    from broker.entities.policy import Policy

    q = stream(None, x_max_length_bytes=Field("long", 5000))
    q.apply_policy(Policy("p", "^s$", {"max-length-bytes": 1000, "max-age": "1h"}, apply_to="queues"))
    assert (q.policy_name, q.log.max_bytes, q.log.max_age_ms) == ("p", 1000, 3_600_000)
    q.apply_policy(Policy("p", "^s$", {"max-age": "1h", "max-length": 5}, apply_to="queues"))
    assert (q.policy_name, q.log.max_bytes, q.log.max_age_ms) == (None, 5000, None)


def test_publishes_in_one_pass_of_the_loop_form_chunks_as_osiris_batches() -> None:
    """The first publish of a pass of the event loop is a chunk alone, the rest of the pass one
    chunk (osiris's writer takes its mailbox as a batch): `last` starts at that chunk, whose
    records add no second chunk header and stay in its segment; the store position stays the
    offset plus one across segment rolls."""
    clock = ManualClock()
    q = stream(clock, x_stream_max_segment_size_bytes=Field("long", 300))
    positions = []
    for batch in (["a0"], ["b0", "b1", "b2"], ["c0", "c1"]):
        for body in batch:
            q.seq += 1
            positions.append(q.seq)
            q.enqueue(msg(body + "x" * 98, rk="stprobe-12345678"))
        clock.advance(1.5)
    records = q.log.retained()
    assert [r.offset + 1 for r in records] == positions
    # b1 rolls the full segment (tracking chunk at 2) and b2 joins b1's chunk past the limit;
    # c0 and c1 are chunks of their own, each opening a segment
    assert [r.offset for r in records] == [0, 1, 3, 4, 6, 8]
    assert [r.chunk_start for r in records] == [0, 1, 3, 3, 6, 8]
    assert [seg.records for seg in q.log.segments] == [2, 2, 1, 1]
    assert q.log.start_offset(OffsetSpec("last")) == 8
    stamps = [r.timestamp for r in records]
    assert stamps[0] < stamps[1] == stamps[3] < stamps[4]
    assert q.log.start_offset(OffsetSpec("timestamp", stamps[1] - 1)) == 1
    big = stream(clock)
    for i in range(5):
        big.enqueue(msg(f"t{i}"))  # one pass: a transaction's commit
    assert [r.chunk_start for r in big.log.retained()] == [0, 1, 1, 1, 1]
    assert big.log.start_offset(OffsetSpec("last")) == 1


def test_a_restart_rebuilds_chunks_and_their_times() -> None:
    """The store keeps each chunk's time on its first message: a restored log has the same chunks
    (`last`) and resolves a timestamp offset to the same records; a store without times makes
    every message a chunk of the restart's time."""
    clock = ManualClock()
    q = stream(clock)
    for batch in (["a0", "a1"], ["b0"], ["c0", "c1", "c2"]):
        for body in batch:
            q.seq += 1
            q.enqueue(msg(body))
        clock.advance(60)
    state = {r.seq: (0, 0, r.timestamp) for r in q.log.retained() if r.chunk_start == r.offset}
    assert sorted(state) == [1, 2, 3, 4, 5]  # a0 | a1 | b0 | c0 | c1 c2
    clock.advance(3600)  # the restart comes an hour later
    again = stream(clock)
    again.restore_state(state)
    for r in q.log.retained():
        again.restore(r.seq, r.msg, False)
    assert [(r.offset, r.chunk_start, r.timestamp) for r in again.log.retained()] == [
        (r.offset, r.chunk_start, r.timestamp) for r in q.log.retained()
    ]
    assert again.log.start_offset(OffsetSpec("last")) == 4
    b_time = q.log.retained()[2].timestamp
    assert again.log.start_offset(OffsetSpec("timestamp", b_time)) == 2
    legacy = stream(clock)
    legacy.restore_state({})
    for r in q.log.retained():
        legacy.restore(r.seq, r.msg, False)
    assert {r.timestamp for r in legacy.log.retained()} == {int(clock.wall() * 1000)}
    assert legacy.log.start_offset(OffsetSpec("last")) == 5
