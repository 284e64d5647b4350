"""The firehose tracer against hashbroker alone: the recorded RabbitMQ 3.10.8 observation
(tests/data/rabbitmq-3.10.8-firehose.json, made by tests/trace_support.py against the live broker and
kept equal by tests/differential/test_differential_trace.py), tracing off, transactions, and the
`hashbroker ctl trace_on/trace_off` verbs (rabbitmqctl's output, recorded)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pika
import pytest

from broker.cli import ctl
from broker.embedded import BrokerThread
from tests.differential_support import RawAmqp
from tests.trace_support import call, firehose_scenario, q, raw_get

RECORDED = Path(__file__).resolve().parents[1] / "data" / "rabbitmq-3.10.8-firehose.json"


@pytest.fixture(scope="module")
def hb() -> Iterator[BrokerThread]:
    with BrokerThread(host="127.0.0.1", port=0, management_port=0) as b:
        yield b


def api(b: BrokerThread) -> str:
    return f"http://127.0.0.1:{b.broker.management.port}"


@pytest.fixture
def traced(hb: BrokerThread) -> Iterator[str]:
    """A fresh vhost with guest's permissions and a queue 't' bound to amq.rabbitmq.trace with '#'."""
    name = "tracer-unit"
    assert call(api(hb), "PUT", f"/api/vhosts/{q(name)}")[0] == 201
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", hb.port, name))
    ch = conn.channel()
    ch.queue_declare("t")
    ch.queue_bind("t", "amq.rabbitmq.trace", "#")
    ch.queue_declare("w")
    conn.close()
    try:
        yield name
    finally:
        call(api(hb), "DELETE", f"/api/vhosts/{q(name)}")


def drain(hb: BrokerThread, vhost: str) -> list[dict[str, Any]]:
    raw = RawAmqp("127.0.0.1", hb.port, vhost=vhost)
    try:
        raw.open_channel(1)
        out = []
        while (m := raw_get(raw, 1, "t")) is not None:
            out.append(m)
        return out
    finally:
        raw.close()


def test_trace_messages_equal_the_recorded_rabbitmq_observation(hb: BrokerThread) -> None:
    ours = firehose_scenario(api(hb), hb.port, hb.broker.cluster.local)
    assert ours == json.loads(RECORDED.read_text())


def test_tracing_off_costs_one_attribute_and_emits_nothing(hb: BrokerThread, traced: str) -> None:
    vhost = hb.broker.vhosts[traced]
    assert (vhost.tracing, vhost.tapped) == (False, False)
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", hb.port, traced))
    ch = conn.channel()
    ch.confirm_delivery()
    ch.basic_publish("", "w", b"untraced")
    assert ch.basic_get("w", auto_ack=True)[2] == b"untraced"
    assert call(api(hb), "PUT", f"/api/vhosts/{q(traced)}", {"tracing": True})[0] == 204
    assert (vhost.tracing, vhost.tapped) == (True, True)
    ch.basic_publish("", "w", b"traced")
    assert ch.basic_get("w", auto_ack=True)[2] == b"traced"
    conn.close()
    keys = [(m["routing_key"], m["body"]) for m in drain(hb, traced)]
    assert keys == [("publish.", "traced"), ("deliver.w", "traced")]
    assert call(api(hb), "PUT", f"/api/vhosts/{q(traced)}", {"tracing": False})[0] == 204
    assert (vhost.tracing, vhost.tapped) == (False, False)


def test_a_transaction_traces_at_publish_and_delivers_at_commit(hb: BrokerThread, traced: str) -> None:
    """rabbit_channel calls tap_in where a publish is routed: in a transaction, before tx.commit."""
    assert call(api(hb), "PUT", f"/api/vhosts/{q(traced)}", {"tracing": True})[0] == 204
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", hb.port, traced))
    ch = conn.channel()
    ch.tx_select()
    ch.basic_publish("", "w", b"in-tx")
    ch.queue_declare("w", passive=True)  # a round trip: the publish has been handled
    assert [m["routing_key"] for m in drain(hb, traced)] == ["publish."]
    assert ch.queue_declare("w", passive=True).method.message_count == 0
    ch.tx_commit()
    assert ch.queue_declare("w", passive=True).method.message_count == 1
    conn.close()


def run_ctl(capsys: pytest.CaptureFixture[str], base: str, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = ctl.run(["--url", base, *args])
    return rc, capsys.readouterr().out


def test_ctl_trace_on_and_off(hb: BrokerThread, traced: str, capsys: pytest.CaptureFixture[str]) -> None:
    """rabbitmqctl 3.10.8 prints exactly these lines (exit 0), also for a vhost that does not exist;
    -q drops the first."""
    base = api(hb)
    vhost = hb.broker.vhosts[traced]
    assert run_ctl(capsys, base, "trace_on", "-p", traced) == (
        0,
        f'Starting tracing for vhost "{traced}" ...\nTrace enabled for vhost {traced}\n',
    )
    assert vhost.tracing and call(base, "GET", f"/api/vhosts/{q(traced)}")[1]["tracing"] is True
    off = run_ctl(capsys, base, "trace_off", "-q", "-p", traced)
    assert off == (0, f"Trace disabled for vhost {traced}\n")
    assert not vhost.tracing
    assert run_ctl(capsys, base, "trace_on", "-p", "tracer-nope") == (
        0,
        'Starting tracing for vhost "tracer-nope" ...\nTrace enabled for vhost tracer-nope\n',
    )
    assert "tracer-nope" not in hb.broker.vhosts  # not created by the verb


def test_a_channel_consuming_its_own_trace_queue_gets_tags_in_order(hb: BrokerThread, traced: str) -> None:
    """The deliver trace of a delivery is made after that delivery is sent: a trace queue consumed
    on the same channel gets the next tag, so tags arrive in order and each ack is valid."""
    assert call(api(hb), "PUT", f"/api/vhosts/{q(traced)}", {"tracing": True})[0] == 204
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", hb.port, traced))
    ch = conn.channel()
    got: list[tuple[int, str]] = []

    def on_message(c: Any, m: Any, _p: Any, body: bytes) -> None:
        got.append((m.delivery_tag, m.routing_key))
        c.basic_ack(m.delivery_tag)

    ch.basic_consume("w", on_message)
    ch.basic_consume("t", on_message)
    for i in range(3):
        ch.basic_publish("", "w", f"m{i}".encode())
    for _ in range(100):
        if len(got) >= 9:
            break
        conn.process_data_events(0.05)
    ch.queue_declare("w", passive=True)  # the channel is still open: every ack was valid
    conn.close()
    assert [tag for tag, _ in got] == list(range(1, 10))
    assert sorted(rk for _, rk in got) == ["deliver.w"] * 3 + ["publish."] * 3 + ["w"] * 3
