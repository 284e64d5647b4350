"""Record how the reference RabbitMQ rejects x-consistent-hash bindings and exchange declarations.

Run from the repository root (needs the reference broker, guest/guest, consistent-hash plugin)::

    .venv/bin/python tools/probe_rabbitmq_errors.py [--url amqp://guest:guest@127.0.0.1:5672/%2F]

It writes ``tests/data/rabbitmq_observations.json``.  Why: hashbroker must reproduce RabbitMQ's
reply codes, reply texts (byte for byte, including Erlang's ``~p`` rendering of binaries and the
255-byte truncation) and whether an error closes the channel or the whole connection.  Those
details are easy to get subtly wrong from reading sources, so they are observed on the wire.

Every probe runs on a fresh connection so a connection-level error cannot leak into the next
probe.  Everything declared is named ``hashbroker.probe.*``; queues are exclusive and the
exchanges are deleted in a ``finally`` block, so a rerun starts from (and leaves) a clean broker.
The file contains no timestamps, so rerunning against the same broker gives an identical file.

pika hides the class-id/method-id of ``channel.close``/``connection.close``; to record them the
script wraps the ``decode`` methods of ``pika.spec.Channel.Close`` and ``pika.spec.Connection.Close``
(the frames are still handled by pika as usual).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pika
import pika.exceptions
import pika.spec
from pika.adapters.blocking_connection import BlockingChannel

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = REPO / "tests" / "data" / "rabbitmq_observations.json"
DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"
PREFIX = "hashbroker.probe."
CHX = "x-consistent-hash"

# The last close frames pika decoded (see the module docstring).
_LAST_CLOSE: dict[str, Any] = {}


def _capture(cls: Any, slot: str) -> None:
    """Wrap ``cls.decode`` so the decoded close frame is remembered under ``slot``."""
    original: Callable[..., Any] = cls.decode

    def decode(self: Any, encoded: bytes, offset: int = 0) -> Any:
        result = original(self, encoded, offset)
        _LAST_CLOSE[slot] = self
        return result

    cls.decode = decode


_capture(pika.spec.Channel.Close, "channel")
_capture(pika.spec.Connection.Close, "connection")


@dataclass
class Outcome:
    """What the broker answered to one probe."""

    outcome: str  # "ok", "channel_close" or "connection_close"
    reply_code: int | None = None
    reply_text: str | None = None
    reply_text_hex: str | None = None
    class_id: int | None = None
    method_id: int | None = None

    def as_json(self) -> dict[str, Any]:
        """JSON form without the fields that do not apply."""
        data = {
            "outcome": self.outcome,
            "reply_code": self.reply_code,
            "reply_text": self.reply_text,
            "reply_text_hex": self.reply_text_hex,
            "class_id": self.class_id,
            "method_id": self.method_id,
        }
        return {k: v for k, v in data.items() if v is not None}


def _text(value: str | bytes) -> tuple[str, str]:
    """pika gives a reply text as str when it is valid UTF-8, else bytes: return (text, hex)."""
    raw = value.encode("utf-8") if isinstance(value, str) else value
    return raw.decode("utf-8", "backslashreplace"), raw.hex()


def _method_name(class_id: int, method_id: int) -> str:
    names = {(40, 10): "exchange.declare", (50, 20): "queue.bind", (50, 10): "queue.declare"}
    return names.get((class_id, method_id), f"{class_id}.{method_id}")


def run_probe(url: str, action: Callable[[BlockingChannel], object]) -> Outcome:
    """Run ``action`` on a fresh connection and classify how it ended."""
    _LAST_CLOSE.clear()
    connection = pika.BlockingConnection(pika.URLParameters(url))
    try:
        channel = connection.channel()
        try:
            action(channel)
        except (pika.exceptions.ChannelClosedByBroker, pika.exceptions.ConnectionClosedByBroker) as exc:
            kind = "channel" if isinstance(exc, pika.exceptions.ChannelClosedByBroker) else "connection"
            frame = _LAST_CLOSE.get(kind)
            text, hexed = _text(exc.reply_text)
            return Outcome(
                f"{kind}_close",
                exc.reply_code,
                text,
                hexed,
                getattr(frame, "class_id", None),
                getattr(frame, "method_id", None),
            )
        return Outcome("ok")
    finally:
        if connection.is_open:
            connection.close()


def with_method_names(record: dict[str, Any]) -> dict[str, Any]:
    """Add a readable name for the (class_id, method_id) pair of a close."""
    if "class_id" in record:
        record["method"] = _method_name(record["class_id"], record["method_id"])
    return record


def probe_binding_keys(url: str, exchanges: set[str]) -> list[dict[str, Any]]:
    """Bind an exclusive queue to an x-consistent-hash exchange with each binding key."""
    keys: list[str | bytes] = [
        "abc", "", " 5", "5 ", "0", "-1", "+5", "007", "1e3", "héllo", "日本", "1_000", "0x10",
        "-0", "+0", "1", "10", "a\"b", "back\\slash", "a\nb", b"\xff\x00\x01", "a" * 200,
    ]  # fmt: skip
    name = PREFIX + "chx.bind"
    exchanges.add(name)
    results = []
    for key in keys:
        raw = key.encode("utf-8") if isinstance(key, str) else key

        def bind(ch: BlockingChannel, key: str | bytes = key) -> None:
            ch.exchange_declare(name, CHX, durable=False, auto_delete=False)
            queue = ch.queue_declare("", exclusive=True).method.queue
            ch.queue_bind(queue, name, routing_key=key)  # type: ignore[arg-type,unused-ignore]  # bytes work on the wire

        outcome = run_probe(url, bind)
        shown = raw.decode("utf-8", "backslashreplace")
        results.append(with_method_names({"binding_key": shown, "binding_key_hex": raw.hex(),
                                          **outcome.as_json()}))  # fmt: skip
    return results


def probe_exchange_arguments(url: str, exchanges: set[str]) -> list[dict[str, Any]]:
    """Declare x-consistent-hash exchanges with assorted hash-header/hash-property arguments."""
    cases: list[dict[str, Any]] = [
        {"hash-header": "h", "hash-property": "message_id"},
        {"hash-property": "app_id"},
        {"hash-property": "héllo"},
        {"hash-property": "x" * 250},
        {"hash-header": 5},
        {"hash-property": 5},
        {"hash-header": True},
        {"hash-header": "h"},
        {"hash-header": ""},
        {"hash-property": "message_id"},
        {"hash-property": "correlation_id"},
        {"hash-property": "timestamp"},
        {"hash-property": ""},
    ]
    results = []
    for index, arguments in enumerate(cases):
        name = f"{PREFIX}chx.args.{index}"
        exchanges.add(name)

        def declare(ch: BlockingChannel, arguments: dict[str, Any] = arguments, name: str = name) -> None:
            ch.exchange_declare(name, CHX, durable=False, arguments=arguments)

        outcome = run_probe(url, declare)
        results.append(with_method_names({"arguments": arguments, **outcome.as_json()}))
    return results


def probe_redeclare(url: str, exchanges: set[str]) -> list[dict[str, Any]]:
    """Redeclare an existing x-consistent-hash exchange (hash-header "h") with other arguments."""
    name = PREFIX + "chx.redeclare"
    exchanges.add(name)
    original = {"hash-header": "h"}
    run_probe(url, lambda ch: ch.exchange_declare(name, CHX, durable=False, arguments=original))
    variants: list[tuple[str, str, bool, dict[str, Any]]] = [
        ("same arguments", CHX, False, {"hash-header": "h"}),
        ("other hash-header", CHX, False, {"hash-header": "other"}),
        ("hash-property instead", CHX, False, {"hash-property": "message_id"}),
        ("no arguments", CHX, False, {}),
        ("invalid hash-property", CHX, False, {"hash-property": "app_id"}),
        ("both (mutually exclusive)", CHX, False, {"hash-header": "h", "hash-property": "message_id"}),
        ("alternate-exchange added", CHX, False, {"hash-header": "h", "alternate-exchange": "ae"}),
        ("other type", "direct", False, {"hash-header": "h"}),
        ("other durability", CHX, True, {"hash-header": "h"}),
    ]
    results = []
    for label, ex_type, durable, arguments in variants:

        def redeclare(
            ch: BlockingChannel,
            ex_type: str = ex_type,
            durable: bool = durable,
            arguments: dict[str, Any] = arguments,
        ) -> None:
            ch.exchange_declare(name, ex_type, durable=durable, arguments=arguments)

        outcome = run_probe(url, redeclare)
        results.append(with_method_names({"case": label, "original_arguments": original, "type": ex_type,
                                          "durable": durable, "arguments": arguments,
                                          **outcome.as_json()}))  # fmt: skip
    return results


def probe_unknown_type(url: str, exchanges: set[str]) -> dict[str, Any]:
    """Declare an exchange of a type no plugin provides."""
    name = PREFIX + "unknown.type"
    exchanges.add(name)
    outcome = run_probe(url, lambda ch: ch.exchange_declare(name, "x-no-such-type", durable=False))
    return with_method_names({"type": "x-no-such-type", **outcome.as_json()})


def cleanup(url: str, exchanges: set[str]) -> None:
    """Delete every exchange a probe may have created (queues were exclusive)."""
    connection = pika.BlockingConnection(pika.URLParameters(url))
    try:
        channel = connection.channel()
        for name in sorted(exchanges):
            channel.exchange_delete(name)
    finally:
        connection.close()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)

    connection = pika.BlockingConnection(pika.URLParameters(args.url))
    props = connection._impl.server_properties  # no public accessor in pika
    broker = {k: _text(props[k])[0] for k in ("product", "version") if k in props}
    connection.close()

    exchanges: set[str] = set()
    try:
        document = {
            "doc": "Observed on the wire from the reference broker by `.venv/bin/python "
            "tools/probe_rabbitmq_errors.py` (pika 1.x, one fresh connection per probe, everything "
            "declared is deleted afterwards). reply_text_hex is the exact reply-text bytes; class_id/"
            "method_id are from the close frame. pika sends Python int table values as signed 32-bit "
            "('I', RabbitMQ type signedint) and bool as 't'.",
            "broker": broker,
            "binding_keys": probe_binding_keys(args.url, exchanges),
            "exchange_arguments": probe_exchange_arguments(args.url, exchanges),
            "redeclare": probe_redeclare(args.url, exchanges),
            "unknown_exchange_type": probe_unknown_type(args.url, exchanges),
        }
    finally:
        cleanup(args.url, exchanges)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
