"""Management operations that change broker state, performed over a real AMQP connection.

Why AMQP and not direct calls into the broker: the channel code owns every check RabbitMQ makes
(argument equivalence, exclusivity, internal exchanges, user_id, overflow, dead-lettering) and their
exact error texts. Going through the wire reuses all of it, so the HTTP API can never drift from
AMQP semantics, and the broker's internals can change freely. RabbitMQ's own management plugin
does the same through its direct Erlang client.

These functions block (pika BlockingConnection); the API runs them in a thread executor while
the broker's event loop keeps serving the connection they open.
"""

from __future__ import annotations

import base64
import calendar
import contextlib
import datetime
from collections.abc import Iterator
from typing import Any

import pika
import pika.exceptions

from broker.management.sessions import MANAGEMENT_CAPABILITY
from broker.management.values import json_value
from broker.management.write_errors import AmqpOpError, DefinitionError, Target

_PROPERTY_NAMES = (
    "content_type",
    "content_encoding",
    "headers",
    "delivery_mode",
    "priority",
    "correlation_id",
    "reply_to",
    "expiration",
    "message_id",
    "timestamp",
    "type",
    "user_id",
    "app_id",
    "cluster_id",
)


@contextlib.contextmanager
def _channel(t: Target) -> Iterator[Any]:
    caps = {
        "authentication_failure_close": True,
        "basic.nack": True,
        "connection.blocked": True,
        "consumer_cancel_notify": True,
        "publisher_confirms": True,
        MANAGEMENT_CAPABILITY: True,
    }
    params = pika.ConnectionParameters(
        host="127.0.0.1" if t.host in ("", "0.0.0.0", "::") else t.host,
        port=t.port,
        virtual_host=t.vhost,
        credentials=pika.PlainCredentials(t.user, t.password),
        client_properties={"connection_name": "hashbroker management", "capabilities": caps},
        connection_attempts=1,
        socket_timeout=5,
        blocked_connection_timeout=10,
        heartbeat=0,
    )
    try:
        conn = pika.BlockingConnection(params)
    except pika.exceptions.AMQPConnectionError as exc:
        raise AmqpOpError(541, f"INTERNAL_ERROR - cannot connect to the broker: {exc!r}") from exc
    try:
        yield conn.channel()
    except pika.exceptions.ChannelClosedByBroker as exc:
        raise AmqpOpError(exc.reply_code, exc.reply_text) from None
    except pika.exceptions.ConnectionClosedByBroker as exc:
        raise AmqpOpError(exc.reply_code, exc.reply_text) from None
    finally:
        with contextlib.suppress(Exception):
            conn.close()


# -- queues ---------------------------------------------------------------------------------------


def declare_queue(t: Target, name: str, durable: bool, auto_delete: bool, arguments: dict[str, Any]) -> None:
    with _channel(t) as ch:
        ch.queue_declare(name, durable=durable, auto_delete=auto_delete, arguments=arguments or None)


def delete_queue(t: Target, name: str, if_unused: bool, if_empty: bool) -> None:
    with _channel(t) as ch:
        ch.queue_delete(name, if_unused=if_unused, if_empty=if_empty)


def purge_queue(t: Target, name: str) -> None:
    with _channel(t) as ch:
        ch.queue_purge(name)


def get_messages(
    t: Target, queue: str, count: int, ackmode: str, encoding: str, truncate: int | None
) -> list[dict[str, Any]]:
    """RabbitMQ's "Get messages": take up to `count`, then settle all of them per `ackmode`.

    Like rabbit_mgmt_wm_queue_get, messages are taken one after another and only settled at the
    end, so requeue modes return distinct messages (marked redelivered next time).
    """
    out: list[dict[str, Any]] = []
    no_ack = ackmode == "ack_requeue_false"
    with _channel(t) as ch:
        last_tag = 0
        tags: list[int] = []
        for _ in range(max(count, 0)):
            method, props, body = ch.basic_get(queue, auto_ack=no_ack)
            if method is None:
                break
            last_tag = method.delivery_tag
            tags.append(last_tag)
            out.append(_render_message(method, props, body or b"", encoding, truncate))
        if not no_ack and tags:
            if ackmode == "reject_requeue_false":
                for tag in tags:
                    ch.basic_reject(tag, requeue=False)
            else:  # ack_requeue_true / reject_requeue_true: back to the queue
                ch.basic_nack(last_tag, multiple=True, requeue=True)
            ch.basic_qos(prefetch_count=0)  # a round trip, so the settlement is processed before closing
    return out


def _render_message(
    method: Any, props: Any, body: bytes, encoding: str, truncate: int | None
) -> dict[str, Any]:
    payload = body if truncate is None else body[: max(truncate, 0)]
    text: str | None = None
    if encoding == "auto":
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError:
            text = None
    properties = _render_properties(props)
    return {
        "payload_bytes": len(body),
        "redelivered": bool(method.redelivered),
        "exchange": method.exchange,
        "routing_key": method.routing_key,
        "message_count": method.message_count,
        # RabbitMQ renders an empty property list as the empty Erlang list, i.e. a JSON array
        "properties": properties if properties else [],
        "payload": text if text is not None else base64.b64encode(payload).decode("ascii"),
        "payload_encoding": "string" if text is not None else "base64",
    }


def _render_properties(props: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in _PROPERTY_NAMES:
        value = getattr(props, name, None)
        if value is not None:
            out[name] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, datetime.datetime):  # AMQP timestamps are seconds, shown as integers
        return calendar.timegm(value.utctimetuple())
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return json_value(value)


# -- exchanges ------------------------------------------------------------------------------------


def declare_exchange(
    t: Target,
    name: str,
    type_: str,
    durable: bool,
    auto_delete: bool,
    internal: bool,
    arguments: dict[str, Any],
) -> None:
    with _channel(t) as ch:
        ch.exchange_declare(
            name,
            exchange_type=type_,
            durable=durable,
            auto_delete=auto_delete,
            internal=internal,
            arguments=arguments or None,
        )


def delete_exchange(t: Target, name: str, if_unused: bool) -> None:
    with _channel(t) as ch:
        ch.exchange_delete(name, if_unused=if_unused)


def publish(t: Target, exchange: str, routing_key: str, properties: dict[str, Any], body: bytes) -> bool:
    """Publish with mandatory + confirms; returns whether any queue took the message."""
    props = pika.BasicProperties(**{k: v for k, v in properties.items() if k in _PROPERTY_NAMES})
    with _channel(t) as ch:
        ch.confirm_delivery()
        try:
            ch.basic_publish(exchange, routing_key, body, props, mandatory=True)
        except pika.exceptions.UnroutableError:
            return False
        except pika.exceptions.NackError:
            return True  # reached a queue that refused it (reject-publish overflow): still routed
    return True


# -- bindings -------------------------------------------------------------------------------------


def _bind(
    ch: Any, source: str, destination: str, destination_type: str, key: str, args: dict[str, Any]
) -> None:
    if destination_type == "exchange":
        ch.exchange_bind(destination, source, routing_key=key, arguments=args or None)
    else:
        ch.queue_bind(destination, source, routing_key=key, arguments=args or None)


def bind(
    t: Target, source: str, destination: str, destination_type: str, key: str, args: dict[str, Any]
) -> None:
    with _channel(t) as ch:
        _bind(ch, source, destination, destination_type, key, args)


def unbind(
    t: Target, source: str, destination: str, destination_type: str, key: str, args: dict[str, Any]
) -> None:
    with _channel(t) as ch:
        if destination_type == "exchange":
            ch.exchange_unbind(destination, source, routing_key=key, arguments=args or None)
        else:
            ch.queue_unbind(destination, source, routing_key=key, arguments=args or None)


# -- definitions ----------------------------------------------------------------------------------


def apply_definitions(
    t: Target,
    queues: list[dict[str, Any]],
    exchanges: list[dict[str, Any]],
    bindings: list[dict[str, Any]],
) -> None:
    """Declare queues, then exchanges, then bindings (rabbit_definitions' order), each in file order.

    File order matters for bindings: on x-consistent-hash the n-th binding made decides which
    buckets its queue gets. One connection, one channel, each step a synchronous round trip, so
    the broker applies them in exactly this order; the first failure stops the import.
    """
    current = ""
    try:
        with _channel(t) as ch:
            for q in queues:
                current = f"queue '{q['name']}'"
                ch.queue_declare(
                    q["name"],
                    durable=bool(q.get("durable", False)),
                    auto_delete=bool(q.get("auto_delete", False)),
                    arguments=q.get("arguments") or None,
                )
            for x in exchanges:
                current = f"exchange '{x['name']}'"
                ch.exchange_declare(
                    x["name"],
                    exchange_type=x.get("type") or "direct",
                    durable=bool(x.get("durable", False)),
                    auto_delete=bool(x.get("auto_delete", False)),
                    internal=bool(x.get("internal", False)),
                    arguments=x.get("arguments") or None,
                )
            for b in bindings:
                current = (
                    f"binding '{b['source']}' -> {b.get('destination_type', 'queue')} '{b['destination']}'"
                )
                _bind(
                    ch,
                    b["source"],
                    b["destination"],
                    str(b.get("destination_type", "queue")),
                    str(b.get("routing_key", "")),
                    b.get("arguments") or {},
                )
    except AmqpOpError as exc:
        raise DefinitionError(exc.code, exc.text, current) from None
