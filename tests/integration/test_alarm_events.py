"""Resource alarms reach `amq.rabbitmq.event` as RabbitMQ 3.10.8's rabbit_alarm tells them.

rabbit_alarm calls rabbit_event:notify(alarm_set | alarm_cleared, [{source, Source}, {node, Node}])
once per resource when it is first set and when it clears; the event exchange folds that list
(node, source) and appends timestamp_in_ms, with no user_who_performed_action. The shared
RabbitMQ cannot be driven into an alarm, so this is checked against the source's headers, on
hashbroker with a disk limit first above and then below the free space (and a memory limit of one
byte for the memory alarm).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from broker.embedded import BrokerThread
from tests.event_exchange_session import Recorder


def on_loop(b: BrokerThread, fn: Callable[[], Any]) -> None:
    assert b.loop is not None

    async def run() -> None:
        fn()

    asyncio.run_coroutine_threadsafe(run(), b.loop).result(10)


def alarm_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["key"].startswith("alarm.")]


def test_disk_alarm_set_and_cleared_are_published() -> None:
    with BrokerThread(host="127.0.0.1", port=0, plugins=["rabbitmq_event_exchange"]) as b:
        node = b.broker.settings.nodes[0]
        alarms = b.broker.alarms
        rec = Recorder("127.0.0.1", b.port)

        def low_on_disk() -> None:
            alarms.disk_limit = 1 << 60
            alarms.check_disk()

        def enough_disk() -> None:
            alarms.disk_limit = 0
            alarms.check_disk()

        on_loop(b, low_on_disk)
        on_loop(b, low_on_disk)  # still alarmed: no second event
        on_loop(b, lambda: alarms.set("disk", "", "store"))  # another holder: still one alarm
        on_loop(b, enough_disk)  # the store still holds it: not cleared yet
        on_loop(b, lambda: alarms.clear("disk", "", "store"))
        events = alarm_events(rec.stop(settle=0.5))
    assert [e["key"] for e in events] == ["alarm.set", "alarm.cleared"]
    for e in events:
        assert e["delivery_mode"] == 2
        assert "timestamp" in e["properties"]
        [(n, node_value), (s, source), (t, (ts_type, _ms))] = e["headers"]
        assert (n, node_value, s, source, t, ts_type) == (
            "node",
            ["longstr", node],
            "source",
            ["longstr", "disk"],
            "timestamp_in_ms",
            "long",
        )


def test_memory_alarm_is_published_and_counted() -> None:
    with BrokerThread(host="127.0.0.1", port=0, plugins=["rabbitmq_event_exchange"]) as b:
        alarms = b.broker.alarms
        rec = Recorder("127.0.0.1", b.port)

        def watermark(limit: int) -> Callable[[], None]:
            def apply() -> None:
                alarms.memory_limit = limit
                alarms.check_memory()

            return apply

        on_loop(b, watermark(1))
        on_loop(b, watermark(1 << 60))
        events = alarm_events(rec.stop(settle=0.5))
        counts = b.broker.events.counts
        assert (counts["alarm.set"], counts["alarm.cleared"]) >= (1, 1)
    assert [(e["key"], e["headers"][1]) for e in events] == [
        ("alarm.set", ["source", ["longstr", "memory"]]),
        ("alarm.cleared", ["source", ["longstr", "memory"]]),
    ]
