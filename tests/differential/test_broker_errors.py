"""Error replies: hashbroker must close the same thing (channel or connection) with the same code and
text as the live RabbitMQ 3.10.8 (the `rabbitmq_url` fixture skips when it is unreachable)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pika
import pika.exceptions
import pytest

Scenario = Callable[[Any, Any, str], None]


def _name(prefix: str) -> str:
    return f"hb.err.{prefix}.{uuid.uuid4().hex[:8]}"


def run(url: str, scenario: Scenario, tag: str) -> tuple[str, int, str]:
    """Run a scenario; return which level closed ("channel"/"connection"), code and text."""
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    try:
        scenario(conn, ch, tag)
        conn.process_data_events(0.3)
        ch.queue_declare(queue="", exclusive=True)  # any round trip surfaces an async close
    except pika.exceptions.ChannelClosedByBroker as exc:
        return "channel", exc.reply_code, exc.reply_text
    except pika.exceptions.ChannelWrongStateError:
        reason = ch._closing_reason
        if isinstance(reason, pika.exceptions.ChannelClosedByBroker):
            return "channel", reason.reply_code, reason.reply_text
        raise
    except pika.exceptions.ConnectionClosedByBroker as exc:
        return "connection", exc.reply_code, exc.reply_text
    finally:
        cleanup = pika.BlockingConnection(pika.URLParameters(url))
        cch = cleanup.channel()
        for kind in ("queue", "exchange"):
            try:
                (cch.queue_delete if kind == "queue" else cch.exchange_delete)(tag)
            except Exception:
                cch = cleanup.channel()
        cleanup.close()
        if conn.is_open:
            conn.close()
    return "none", 0, ""


def s_passive_queue(conn: Any, ch: Any, n: str) -> None:
    ch.queue_declare(n, passive=True)


def s_passive_exchange(conn: Any, ch: Any, n: str) -> None:
    ch.exchange_declare(n, passive=True)


def s_unknown_tag(conn: Any, ch: Any, n: str) -> None:
    ch.basic_ack(42)


def s_double_ack(conn: Any, ch: Any, n: str) -> None:
    ch.queue_declare(n, auto_delete=True)
    ch.basic_publish("", n, b"x")
    m, _p, _b = ch.basic_get(n)
    ch.basic_ack(m.delivery_tag)
    ch.basic_ack(m.delivery_tag)


def s_exchange_type_mismatch(conn: Any, ch: Any, n: str) -> None:
    ch.exchange_declare(n, "direct", auto_delete=True)
    ch.exchange_declare(n, "fanout", auto_delete=True)


def s_exchange_durable_mismatch(conn: Any, ch: Any, n: str) -> None:
    ch.exchange_declare(n, "direct")
    ch.exchange_declare(n, "direct", durable=True)


def s_reserved_exchange(conn: Any, ch: Any, n: str) -> None:
    ch.exchange_declare("amq.hb-" + n, "direct")


def s_reserved_queue(conn: Any, ch: Any, n: str) -> None:
    ch.queue_declare("amq.hb-" + n)


def s_default_exchange_delete(conn: Any, ch: Any, n: str) -> None:
    ch.exchange_delete("")


def s_default_exchange_bind(conn: Any, ch: Any, n: str) -> None:
    ch.queue_declare(n, auto_delete=True)
    ch.queue_bind(n, "", "k")


def s_system_exchange_delete(conn: Any, ch: Any, n: str) -> None:
    ch.exchange_delete("amq.direct")


def s_unknown_exchange_type(conn: Any, ch: Any, n: str) -> None:
    ch.exchange_declare(n, "no-such-type")


def s_publish_missing_exchange(conn: Any, ch: Any, n: str) -> None:
    ch.basic_publish(n, "k", b"x")


def s_bind_missing_queue(conn: Any, ch: Any, n: str) -> None:
    ch.queue_bind(n, "amq.direct", "k")


def s_bind_missing_exchange(conn: Any, ch: Any, n: str) -> None:
    ch.queue_declare(n, auto_delete=True)
    ch.queue_bind(n, n + ".missing", "k")


def s_ttl_negative(conn: Any, ch: Any, n: str) -> None:
    ch.queue_declare(n, arguments={"x-message-ttl": -1})


def s_ttl_string(conn: Any, ch: Any, n: str) -> None:
    ch.queue_declare(n, arguments={"x-message-ttl": "abc"})


def s_expires_zero(conn: Any, ch: Any, n: str) -> None:
    ch.queue_declare(n, arguments={"x-expires": 0})


def s_bad_overflow(conn: Any, ch: Any, n: str) -> None:
    ch.queue_declare(n, arguments={"x-overflow": "nope"})


def s_dlrk_without_dlx(conn: Any, ch: Any, n: str) -> None:
    ch.queue_declare(n, arguments={"x-dead-letter-routing-key": "k"})


def s_max_priority_too_big(conn: Any, ch: Any, n: str) -> None:
    ch.queue_declare(n, arguments={"x-max-priority": 256})


def s_queue_arg_mismatch(conn: Any, ch: Any, n: str) -> None:
    ch.queue_declare(n, auto_delete=True, arguments={"x-max-length": 10})
    ch.queue_declare(n, auto_delete=True, arguments={"x-max-length": 20})


def s_queue_arg_added(conn: Any, ch: Any, n: str) -> None:
    ch.queue_declare(n, auto_delete=True)
    ch.queue_declare(n, auto_delete=True, arguments={"x-message-ttl": 100})


def s_queue_durable_mismatch(conn: Any, ch: Any, n: str) -> None:
    ch.queue_declare(n)
    ch.queue_declare(n, durable=True)


def s_exclusive_other_connection(conn: Any, ch: Any, n: str) -> None:
    ch.queue_declare(n, exclusive=True)
    other = pika.BlockingConnection(conn._impl.params)
    try:
        other.channel().queue_declare(n, passive=True)
    finally:
        if other.is_open:
            other.close()


def s_delete_if_empty(conn: Any, ch: Any, n: str) -> None:
    ch.queue_declare(n)
    ch.basic_publish("", n, b"x")
    ch.queue_delete(n, if_empty=True)


def s_delete_if_unused(conn: Any, ch: Any, n: str) -> None:
    ch.queue_declare(n)
    ch.basic_consume(n, lambda *a: None)
    ch.queue_delete(n, if_unused=True)


def s_exchange_delete_if_unused(conn: Any, ch: Any, n: str) -> None:
    ch.exchange_declare(n, "fanout")
    ch.queue_declare(n, exclusive=True)
    ch.queue_bind(n, n)
    ch.exchange_delete(n, if_unused=True)


def s_exclusive_consume(conn: Any, ch: Any, n: str) -> None:
    ch.queue_declare(n, auto_delete=True)
    ch.basic_consume(n, lambda *a: None)
    ch.basic_consume(n, lambda *a: None, exclusive=True)


def s_get_missing(conn: Any, ch: Any, n: str) -> None:
    ch.basic_get(n)


def s_tx_commit_without_select(conn: Any, ch: Any, n: str) -> None:
    ch.tx_commit()


def s_confirm_then_tx(conn: Any, ch: Any, n: str) -> None:
    ch.confirm_delivery()
    ch.tx_select()


def s_bad_expiration(conn: Any, ch: Any, n: str) -> None:
    ch.basic_publish("", n, b"x", pika.BasicProperties(expiration="-5"))


def s_wrong_user_id(conn: Any, ch: Any, n: str) -> None:
    ch.basic_publish("", n, b"x", pika.BasicProperties(user_id="mallory"))


def s_internal_exchange_publish(conn: Any, ch: Any, n: str) -> None:
    ch.exchange_declare(n, "fanout", internal=True)
    ch.basic_publish(n, "", b"x")


def s_prefetch_size(conn: Any, ch: Any, n: str) -> None:
    ch.basic_qos(prefetch_size=10)


def s_reply_to_ack_mode(conn: Any, ch: Any, n: str) -> None:
    ch.basic_consume("amq.rabbitmq.reply-to", lambda *a: None, auto_ack=False)


def s_reply_to_without_consumer(conn: Any, ch: Any, n: str) -> None:
    ch.basic_publish("", "x", b"x", pika.BasicProperties(reply_to="amq.rabbitmq.reply-to"))


SCENARIOS: dict[str, Scenario] = {
    name[2:]: fn for name, fn in sorted(globals().items()) if name.startswith("s_") and callable(fn)
}


@pytest.mark.live
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_error_matches_rabbitmq(scenario: str, hashbroker: str, rabbitmq_url: str) -> None:
    fn = SCENARIOS[scenario]
    tag = _name(scenario)
    expected = run(rabbitmq_url, fn, tag)
    got = run(hashbroker, fn, tag)
    assert expected[0] != "none", f"scenario {scenario} raised nothing on RabbitMQ"
    assert got == expected
