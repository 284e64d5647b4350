"""Single active consumer vs the live RabbitMQ 3.10.8, and PIP-392 consistent-hash selection."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pika
import pytest

from broker.embedded import BrokerThread


def sac_scenario(url: str) -> dict[str, Any]:
    conn = pika.BlockingConnection(pika.URLParameters(url))
    admin = conn.channel()
    admin.queue_delete("hb4.sac")
    admin.queue_declare("hb4.sac", arguments={"x-single-active-consumer": True})
    chs = [conn.channel() for _ in range(3)]
    got: list[tuple[int, bytes, bool]] = []
    for i, ch in enumerate(chs):
        ch.basic_qos(prefetch_count=1)
        ch.basic_consume(
            "hb4.sac", lambda c, m, p, b, i=i: got.append((i, b, m.redelivered)), consumer_tag=f"c{i}"
        )
    out: dict[str, Any] = {
        "consumer_count": admin.queue_declare("hb4.sac", passive=True).method.consumer_count
    }
    for n in range(3):
        admin.basic_publish("", "hb4.sac", str(n).encode())
    conn.process_data_events(0.5)
    out["first"] = list(got)
    chs[0].close()  # active consumer's channel closes: its unacked message goes to the next one
    for _ in range(5):
        conn.process_data_events(0.1)
    out["after_close"] = list(got)
    out["consumer_count_after"] = admin.queue_declare("hb4.sac", passive=True).method.consumer_count
    admin.queue_delete("hb4.sac")
    conn.close()
    return out


def test_single_active_consumer_same_as_rabbitmq(rabbitmq_url: str) -> None:
    live = sac_scenario(rabbitmq_url)
    with BrokerThread(port=0) as bt:
        ours = sac_scenario(bt.url)
    assert live == {
        "consumer_count": 3,
        "first": [(0, b"0", False)],
        "after_close": [(0, b"0", False), (1, b"0", True)],
        "consumer_count_after": 2,
    }
    # pika's channel.close() first cancels c0. On 3.10.8 the newly active c1 then receives nothing
    # until the queue is kicked (here: c0's unacked message requeued by the close), a stall we do not
    # reproduce: hashbroker feeds the new active consumer at once, so c1 gets the next ready message.
    assert {k: v for k, v in ours.items() if k != "after_close"} == {
        k: v for k, v in live.items() if k != "after_close"
    }
    assert ours["after_close"] == [(0, b"0", False), (1, b"1", False)]


def assign(mode: str, consumers: int = 10, queues: int = 100, extra: bool = False) -> dict[str, Any]:
    with BrokerThread(port=0, active_consumer_selection=mode) as bt:
        conn = pika.BlockingConnection(pika.URLParameters(bt.url))
        ch = conn.channel()
        names = [f"queue-{i}" for i in range(queues)]
        for q in names:
            ch.queue_declare(q, arguments={"x-single-active-consumer": True})
        tags = [f"consumer-{i}" for i in range(consumers)]
        for t in tags:
            for q in names:
                ch.basic_consume(
                    q, lambda *a: None, consumer_tag=f"{t}/{q}", arguments={"x-consumer-name": t}
                )
        owners = lambda: {  # noqa: E731
            q: bt.broker.vhosts["/"].queues[q].sac_active.args.get("x-consumer-name").value.decode()
            for q in names
        }
        before = bt.call(owners)
        for q in names:
            ch.basic_consume(
                q,
                lambda *a: None,
                consumer_tag=f"new/{q}",
                arguments={"x-consumer-name": f"consumer-{consumers}"},
            )
        after = bt.call(owners)
        conn.close()
    return {"before": before, "after": after}


@pytest.mark.parametrize("mode", ["first", "consistent-hash"])
def test_pip392_balance(mode: str) -> None:
    r = assign(mode)
    load = Counter(r["before"].values())
    moved = [q for q in r["before"] if r["before"][q] != r["after"][q]]
    print(
        f"\n{mode:<16} active={len(load):>3} max={max(load.values()):>3} mean=10.0 "
        f"moved_on_join={len(moved)}/100"
    )
    if mode == "first":
        assert load == Counter({"consumer-0": 100})
        assert moved == []
    else:
        assert len(load) == 10
        assert max(load.values()) <= 2 * 10
        assert all(r["after"][q] == "consumer-10" for q in moved)
        assert 1 <= len(moved) <= 25
