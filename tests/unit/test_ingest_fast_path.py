"""The single-read publish shortcut (`CommandAssembler._publish`) behaves exactly as frame by frame.

Sans-I/O: a Connection on an in-memory transport gets one byte stream of publishes (properties and
headers of many types, persistent messages to a durable queue, TTLs, CC headers, multi-frame and
empty bodies, heartbeats between content frames, mandatory returns, confirms, and the refusals:
404, 403 internal exchange, 406 user_id and expiration, 540 immediate). The same stream is fed with
the fast path switched off; the bytes the broker writes and what the queues hold (property bytes,
bodies, routing keys) must be identical. Feeding it in random pieces (so publishes straddle reads)
must change nothing but how confirms are batched.
"""

from __future__ import annotations

import datetime
from decimal import Decimal
from pathlib import Path

import pytest
from pamqp import commands

from tests.sansio_support import (
    FRAME_MAX,
    m,
    open_stream,
    parse_frames,
    publish,
    queue_contents,
    random_pieces,
    run_pieces,
)


def setup_stream() -> bytes:
    """Handshake, channels 1-6, the queues and exchanges the publishes use; confirms on channel 2."""
    out = open_stream(6)
    out += m(1, commands.Queue.Declare(queue="q.plain"))
    out += m(1, commands.Queue.Declare(queue="q.cc"))
    out += m(1, commands.Queue.Declare(queue="q.durable", durable=True))
    out += m(1, commands.Queue.Declare(queue="q.ttl", arguments={"x-message-ttl": 60000}))
    out += m(1, commands.Queue.Declare(queue="q.limit", arguments={"x-max-length": 3}))
    out += m(1, commands.Exchange.Declare(exchange="ex", exchange_type="direct"))
    out += m(1, commands.Exchange.Declare(exchange="ex.internal", exchange_type="fanout", internal=True))
    out += m(1, commands.Queue.Bind(queue="q.plain", exchange="ex", routing_key="k"))
    out += m(2, commands.Confirm.Select())
    return out


def publishes() -> bytes:
    rich = commands.Basic.Properties(
        content_type="application/json",
        content_encoding="gzip",
        headers={
            "s": "text",
            "i": 7,
            "big": 2**40,
            "neg": -3,
            "b": True,
            "f": 1.5,
            "d": Decimal("3.25"),
            "t": datetime.datetime(2026, 11, 23, 12, 0, 0),
            "nested": {"a": [1, "two", {"x": None}]},
            "empty": "",
        },
        delivery_mode=2,
        priority=4,
        correlation_id="c-1",
        reply_to="somewhere",
        expiration="60000",
        message_id="m-1",
        timestamp=datetime.datetime(2026, 1, 2, 3, 4, 5),
        message_type="kind",
        user_id="guest",
        app_id="app",
    )
    out = b""
    for i in range(50):
        out += publish(1, b"x" * 16)
        out += publish(2, f"confirmed {i}".encode())
    out += publish(1, b"rich", props=rich)
    out += publish(2, b"rich confirmed", props=rich)
    out += publish(
        1, b"persistent", routing_key="q.durable", props=commands.Basic.Properties(delivery_mode=2)
    )
    out += publish(1, b"transient", routing_key="q.durable")
    out += publish(1, b"ttl", routing_key="q.ttl")
    out += publish(1, b"expiring", routing_key="q.plain", props=commands.Basic.Properties(expiration="5000"))
    for i in range(5):
        out += publish(2, f"limited {i}".encode(), routing_key="q.limit")
    out += publish(1, b"y" * 10000)  # three body frames
    out += publish(2, b"z" * (FRAME_MAX - 8))  # exactly one full body frame
    out += publish(1, b"")  # no body frame at all
    out += publish(2, b"")
    out += publish(1, b"hb", heartbeat_inside=True)
    out += publish(1, b"by exchange", exchange="ex", routing_key="k")
    out += publish(2, b"unroutable", exchange="ex", routing_key="nowhere", mandatory=True)
    out += publish(2, b"unroutable default", routing_key="no.such.queue", mandatory=True)
    out += publish(1, b"cc", props=commands.Basic.Properties(headers={"CC": ["q.cc"], "BCC": ["q.cc"]}))
    out += publish(3, b"no exchange", exchange="missing")
    out += publish(3, b"after the close: dropped")
    out += publish(4, b"internal", exchange="ex.internal")
    out += publish(5, b"impostor", props=commands.Basic.Properties(user_id="someone"))
    out += publish(6, b"bad ttl", props=commands.Basic.Properties(expiration="-1"))
    out += publish(1, b"last plain")
    out += publish(2, b"immediate", immediate=True)  # 540: connection.close
    out += publish(1, b"after the connection close")
    return out


async def run_stream(
    pieces: list[bytes], fast: bool, data_dir: Path
) -> tuple[bytes, dict[str, list[tuple[bytes, bytes, str, tuple[str, ...]]]]]:
    return await run_pieces(pieces, fast, data_dir, queue_contents)


def without_acks(out: bytes) -> list[tuple[int, int, bytes]]:
    """Output frames other than basic.ack: how acks are batched depends on where reads end (and
    whether a flush came before the 540 closed the channel), the rest must not."""
    return [(t, c, p) for t, c, p in parse_frames(out) if not (t == 1 and p[:4] == b"\x00\x3c\x00\x50")]


async def test_fast_path_matches_frame_by_frame(tmp_path: Path) -> None:
    stream = setup_stream() + publishes()
    fast_out, fast_queues = await run_stream([stream], True, tmp_path / "fast")
    slow_out, slow_queues = await run_stream([stream], False, tmp_path / "slow")
    assert fast_out == slow_out
    assert fast_queues == slow_queues
    texts = [p for t, _c, p in parse_frames(fast_out) if t == 1 and p[:2] in (b"\x00\x14", b"\x00\x0a")]
    assert any(b"no exchange 'missing'" in p for p in texts)
    assert any(b"cannot publish to internal exchange" in p for p in texts)
    assert any(b"user_id property set to 'someone'" in p for p in texts)
    assert any(b"invalid expiration" in p for p in texts)
    assert any(b"immediate=true" in p for p in texts)
    plain = fast_queues["q.plain"]
    rich = [p for p, b, _x, _k in plain if b in (b"rich", b"rich confirmed")]
    assert len(rich) == 2 and rich[0] == rich[1] and len(rich[0]) > 100
    assert [b for _p, b, _x, _k in fast_queues["q.cc"]] == [b"cc"]
    assert len(fast_queues["q.limit"]) == 3
    assert all(b != b"after the connection close" for _p, b, _x, _k in plain)


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_fast_path_any_read_boundaries(tmp_path: Path, seed: int) -> None:
    stream = setup_stream() + publishes()
    pieces = random_pieces(stream, seed, (1, 7, 13, 50, 333, 4096, 20000))
    whole_out, whole_queues = await run_stream([stream], True, tmp_path / "whole")
    split_out, split_queues = await run_stream(pieces, True, tmp_path / "split")
    assert split_queues == whole_queues
    assert without_acks(split_out) == without_acks(whole_out)
