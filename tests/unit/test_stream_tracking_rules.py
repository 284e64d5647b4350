"""The rules both stream logs share (broker.streamproto.tracking): osiris deduplication of a named
writer's publishing ids, tracking state as store rows, and the create-stream arguments as
rabbit_stream_manager checks them (every integer converted before any value is judged)."""

from __future__ import annotations

import pytest

from broker.streamproto.chunk import TRACK_OFFSET, TRACK_SEQUENCE
from broker.streamproto.constants import Code
from broker.streamproto.memory import MemoryBroker
from broker.streamproto.ports import Crashed
from broker.streamproto.tracking import TRACKING_CHUNK, Refused, Tracking, create_arguments


def test_a_named_writer_drops_ids_it_wrote_before() -> None:
    t = Tracking()
    assert t.fresh([(1, "a"), (2, "b")], "ref") == [(1, "a"), (2, "b")]
    assert t.writer_sequence("ref") is None  # nothing written yet
    t.wrote("ref", 2)
    assert t.fresh([(2, "b"), (3, "c")], "ref") == [(3, "c")]
    t.wrote("ref", 3)
    assert t.fresh([(1, "a")], "ref") == []
    assert t.writer_sequence("ref") == 3
    assert t.fresh([(1, "x")], None) == [(1, "x")]  # no reference: no deduplication
    assert t.writer_sequence("other") is None


def test_rows_round_trip_and_other_kinds_are_skipped() -> None:
    t = Tracking()
    t.wrote("w", 7)
    t.store_offset("c", 41)
    rows = t.rows()
    assert sorted(rows) == [(TRACK_SEQUENCE, "w", 7), (TRACK_OFFSET, "c", 41)]
    back = Tracking.from_rows([*rows, (TRACKING_CHUNK, "", 99)])
    assert (back.writers, back.offsets) == ({"w": 7}, {"c": 41})


def test_create_arguments_convert_integers_before_checking_values() -> None:
    assert create_arguments({"max-length-bytes": "10", "max-age": "1h", "x": "y"}) == {
        "max-length-bytes": 10,
        "max-age": "1h",
    }
    with pytest.raises(Crashed):  # a refused locator does not come first
        create_arguments({"queue-leader-locator": "nowhere", "max-length-bytes": "ten"})
    for bad in ({"initial-cluster-size": "0"}, {"queue-leader-locator": "nowhere"}):
        with pytest.raises(Refused):
            create_arguments(bad)
    with pytest.raises(Refused):
        create_arguments({"stream-max-segment-size-bytes": "11"}, max_segment_bytes=10)


def test_memory_broker_redeclare_compares_converted_arguments() -> None:
    b = MemoryBroker()
    assert b.create_stream("guest", "/", "s", {"max-length-bytes": "100"}) == Code.OK
    assert b.create_stream("guest", "/", "s", {"max-length-bytes": "0100"}) == Code.STREAM_ALREADY_EXISTS
    assert b.create_stream("guest", "/", "s", {"max-length-bytes": "5"}) == Code.PRECONDITION_FAILED
