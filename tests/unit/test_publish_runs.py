"""Publishes taken a read at a time (`Channel.on_publish_run`, `ClassicQueue.enqueue_run`, the
pager's staged writes) leave the broker exactly as the same publishes taken one by one.

Sans-I/O: a Connection on an in-memory transport gets one byte stream: thousands of publishes to
one queue (past the paging window, so most are paged out in staged runs), runs that alternate
between queues, messages with an expiration in the middle of a run, a queue with a TTL, one with
priorities, one with a length limit, a durable queue with persistent messages, an unroutable
mandatory publish, a consumer that takes messages as they arrive, and a 404 in the middle of a run
after which the channel's publishes are dropped. The same stream with the shortcut off goes
frame by frame, one publish at a time; the bytes written and every queue's messages, drained to
the end through the pager, must be identical, and so must the exchanges' publish counts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pamqp import commands

from broker.server import Broker
from tests.sansio_support import m, open_stream, publish, random_pieces, run_pieces

Drained = dict[str, list[tuple[int, bytes, bytes, str, tuple[str, ...], bool]]]


def setup_stream() -> bytes:
    out = open_stream(4)
    for name, args in (
        ("q.a", {}),
        ("q.b", {}),
        ("q.ttl", {"x-message-ttl": 600_000}),
        ("q.prio", {"x-max-priority": 5}),
        ("q.limit", {"x-max-length": 100}),
        ("q.consumed", {}),
    ):
        out += m(1, commands.Queue.Declare(queue=name, arguments=args))
    out += m(1, commands.Queue.Declare(queue="q.durable", durable=True))
    out += m(4, commands.Basic.Consume(queue="q.consumed", consumer_tag="c", no_ack=True))
    return out


def publishes() -> bytes:
    expiring = commands.Basic.Properties(expiration="600000")
    persistent = commands.Basic.Properties(delivery_mode=2)
    prio = [commands.Basic.Properties(priority=p) for p in range(6)]
    out = b""
    for i in range(3000):  # past the window: paged, in runs
        out += publish(1, b"a%d" % i, routing_key="q.a")
    for i in range(600):  # alternating targets end one run and start the next
        out += publish(1, b"x%d" % i, routing_key="q.a" if i % 3 else "q.b")
        if i % 97 == 0:
            out += publish(1, b"e%d" % i, routing_key="q.a", props=expiring)
        if i % 50 == 0:
            out += publish(1, b"t%d" % i, routing_key="q.ttl")
            out += publish(1, b"p%d" % i, routing_key="q.prio", props=prio[i % 6])
            out += publish(1, b"c%d" % i, routing_key="q.consumed")
    for i in range(300):
        out += publish(1, b"l%d" % i, routing_key="q.limit")
        out += publish(1, b"d%d" % i, routing_key="q.durable", props=persistent)
    out += publish(2, b"unroutable", routing_key="no.such.queue", mandatory=True)
    for i in range(50):
        out += publish(3, b"before %d" % i, routing_key="q.b")
    out += publish(3, b"no exchange", exchange="missing")
    for i in range(50):
        out += publish(3, b"dropped %d" % i, routing_key="q.b")
    for i in range(500):
        out += publish(1, b"z%d" % i, routing_key="q.a")
    return out


def drain(broker: Broker) -> Drained:
    """Every queue's messages in the order it hands them out, the paged ones read back."""
    vhost = broker.vhosts["/"]
    out: Drained = {}
    for name, q in sorted(vhost.queues.items()):
        ready = q.ready
        got = []
        while True:
            entry = ready.pop()
            if entry is None:
                break
            msg = entry.msg
            got.append(
                (entry.seq, msg.props, msg.body, msg.exchange, tuple(msg.routing_keys), bool(entry.expires))
            )
        out[name] = got
    return out


def inspect(broker: Broker) -> tuple[Drained, dict[str, int]]:
    counts = {name: x.publish_in for name, x in broker.vhosts["/"].exchanges.items()}
    return drain(broker), counts


async def run_stream(
    pieces: list[bytes], fast: bool, data_dir: Path
) -> tuple[bytes, Drained, dict[str, int]]:
    out, (drained, counts) = await run_pieces(pieces, fast, data_dir, inspect)
    return out, drained, counts


async def test_runs_match_one_by_one(tmp_path: Path) -> None:
    stream = setup_stream() + publishes()
    fast_out, fast_queues, fast_counts = await run_stream([stream], True, tmp_path / "fast")
    slow_out, slow_queues, slow_counts = await run_stream([stream], False, tmp_path / "slow")
    assert fast_out == slow_out
    assert fast_counts == slow_counts
    assert fast_queues.keys() == slow_queues.keys()
    for name in fast_queues:
        assert fast_queues[name] == slow_queues[name], name
    bodies = [body for _s, _p, body, _x, _k, _e in fast_queues["q.a"]]
    assert len(bodies) == 3000 + 400 + 7 + 500
    assert bodies[:3] == [b"a0", b"a1", b"a2"] and bodies[-1] == b"z499"
    assert [b for b in bodies if b.startswith(b"e")] == [b"e%d" % i for i in range(0, 600, 97)]
    assert [s for s, *_ in fast_queues["q.a"]] == sorted(s for s, *_ in fast_queues["q.a"])
    assert sum(1 for *_x, expires in fast_queues["q.a"] if expires) == 7
    b_bodies = [body for _s, _p, body, _x, _k, _e in fast_queues["q.b"]]
    assert b_bodies[-50:] == [b"before %d" % i for i in range(50)]
    assert not any(b.startswith(b"dropped") for b in b_bodies)
    assert len(fast_queues["q.limit"]) == 100 and fast_queues["q.limit"][0][2] == b"l200"
    assert len(fast_queues["q.durable"]) == 300
    assert fast_queues["q.consumed"] == []  # each went to the consumer on arrival
    assert fast_queues["q.prio"][0][2] == b"p100"  # priority 4 (the highest sent) first
    assert fast_counts[""] == 3000 + 600 + 7 + 12 * 3 + 600 + 1 + 50 + 500


@pytest.mark.parametrize("seed", [1, 2])
async def test_runs_any_read_boundaries(tmp_path: Path, seed: int) -> None:
    stream = setup_stream() + publishes()
    pieces = random_pieces(stream, seed, (7, 333, 4096, 20000, 65536))
    whole_out, whole_queues, whole_counts = await run_stream([stream], True, tmp_path / "whole")
    split_out, split_queues, split_counts = await run_stream(pieces, True, tmp_path / "split")
    assert split_queues == whole_queues
    assert split_counts == whole_counts
    assert split_out == whole_out
