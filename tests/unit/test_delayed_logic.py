"""broker.entities.delay_scheduler: due order, stable ties, and the x-delay header rules from
exchanges.types.delayed."""

from __future__ import annotations

import random

from amqpwire.fields import FieldTable
from broker.entities.delay_scheduler import DelayScheduler
from exchanges import Field, SimpleMessage


def _message(delay: object) -> SimpleMessage:
    headers = None if delay is None else FieldTable.from_python({"x-delay": delay})
    return SimpleMessage(["k"], headers)


def test_thousand_random_delays_come_out_in_due_order() -> None:
    rng = random.Random(4)
    s: DelayScheduler[int] = DelayScheduler()
    due = {}
    for i in range(1000):
        now = rng.randrange(0, 5000)
        due[i] = s.push(i, rng.randrange(0, 3000), now)
    out: list[int] = []
    clock = 0
    while len(s):
        nxt = s.next_due()
        assert nxt is not None and nxt >= 0
        clock = nxt
        batch = s.pop_due(clock)
        assert batch and all(due[i] == clock for i in batch)
        out.extend(batch)
    assert sorted(out, key=lambda i: (due[i], i)) == out
    assert len(out) == 1000 and s.next_due() is None


def test_equal_due_times_keep_push_order_and_pop_due_is_inclusive() -> None:
    s: DelayScheduler[str] = DelayScheduler()
    for name in "cab":
        s.push(name, 10, 0)
    s.push("early", 5, 0)
    assert s.pop_due(4) == []
    assert s.pop_due(10) == ["early", "c", "a", "b"]


def test_negative_delay_is_due_now() -> None:
    s: DelayScheduler[str] = DelayScheduler()
    assert s.push("x", -5, 100) == 100
    assert s.pop_due(100) == ["x"]


def test_push_message_uses_plugin_header_semantics() -> None:
    s: DelayScheduler[str] = DelayScheduler()
    assert not s.push_message("none", _message(None), 0)
    assert not s.push_message("zero", _message(0), 0)
    assert not s.push_message("negative", _message(-10), 0)
    assert not s.push_message("string", _message("500"), 0)
    assert not s.push_message("too-big", _message(4_294_967_296), 0)
    assert s.push_message(
        "byte", SimpleMessage(["k"], FieldTable.from_python({"x-delay": Field("byte", 7)})), 0
    )
    assert s.push_message("ok", _message(250), 1000)
    assert s.next_due() == 7
    assert s.pop_due(1249) == ["byte"]
    assert s.pop_due(1250) == ["ok"]


def test_drain_returns_everything_in_order() -> None:
    s: DelayScheduler[int] = DelayScheduler()
    for i, d in enumerate([30, 10, 20]):
        s.push(i, d, 0)
    assert s.drain() == [1, 2, 0]
    assert len(s) == 0
