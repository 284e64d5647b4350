"""The sink's options, parsed and validated once on the driver.

Spark hands data-source options over as strings in a case-insensitive map. They are turned into a
frozen, picklable `SinkOptions` on the driver so that a typo or a missing column fails the query
before any task starts, instead of failing every task (and every retry) on the executors.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Binding:
    """One binding of a queue to the sink's exchange: `key` is the weight for hash exchanges."""

    queue: str
    key: str

    @classmethod
    def parse(cls, item: Any) -> Binding:
        if isinstance(item, list | tuple) and len(item) == 2:
            return cls(queue=str(item[0]), key=str(item[1]))
        if not isinstance(item, Mapping) or "queue" not in item:
            raise ValueError(
                f"each binding must be an object with 'queue' and 'weight' or 'key' (got {item!r})"
            )
        if "weight" in item and "key" in item:
            raise ValueError(f"binding {item!r}: give 'weight' or 'key', not both")
        key = item.get("weight", item.get("key", ""))
        return cls(queue=str(item["queue"]), key=str(key))


def parse_bindings(text: str | None) -> list[Binding]:
    """Parse the `bindings` option: a JSON list of {queue, weight} or {queue, key} objects."""
    if not text:
        return []
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"option 'bindings' is not valid JSON: {exc}") from exc
    if not isinstance(raw, list):
        raise ValueError("option 'bindings' must be a JSON list")
    return [Binding.parse(item) for item in raw]


#: Columns picked up as AMQP basic properties when a column of that exact name exists.
PROPERTY_COLUMNS: tuple[str, ...] = (
    "message_id",
    "correlation_id",
    "timestamp",
    "content_type",
    "priority",
    "expiration",
    "type",
    "app_id",
)

#: Generated message ids are `<prefix>:<partition>:<row>` (batch) or
#: `<prefix>:<micro-batch id>:<partition>:<row>` (streaming), and an AMQP message_id is a short
#: string of at most 255 bytes. Partition ids are 32-bit and row and micro-batch ids 64-bit, so a
#: prefix of at most this many UTF-8 bytes always leaves room for the rest.
MAX_MESSAGE_ID_PREFIX_BYTES = 255 - 2 * len(f":{2**63 - 1}") - len(f":{2**31 - 1}")

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"option {name!r} must be true or false, got {raw!r}")


def _int(options: Mapping[str, str], name: str, default: int, minimum: int = 1) -> int:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ValueError(f"option {name!r} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"option {name!r} must be at least {minimum}, got {value}")
    return value


def _shortstr_option(options: Mapping[str, str], name: str, limit: int = 255) -> str | None:
    """An option that ends up in an AMQP short string: check its UTF-8 length on the driver."""
    raw = options.get(name)
    if raw is None:
        return None
    value = str(raw)
    size = len(value.encode("utf-8"))
    if size > limit:
        raise ValueError(f"option {name!r} is {size} bytes in UTF-8, at most {limit} allowed")
    return value


@dataclass(frozen=True)
class SinkOptions:
    """Everything a task needs to publish its partition."""

    uri: str
    exchange: str = ""
    routing_key: str = ""
    routing_key_column: str | None = None
    body_column: str | None = None
    headers_column: str | None = None
    delivery_mode: int = 2
    confirm: bool = True
    mandatory: bool = False
    max_in_flight: int = 5000
    confirm_timeout: float = 60.0
    declare_exchange: bool = False
    exchange_type: str = "direct"
    exchange_arguments: dict[str, Any] = field(default_factory=dict)
    bindings: tuple[Binding, ...] = ()
    durable: bool = True
    """Whether the declared exchange and queues are durable: by default as the messages are
    (persistent messages in transient queues would not survive a broker restart)."""
    message_id_prefix: str | None = None
    stats_file: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        """Validate the raw option map (keys are matched case-insensitively by Spark)."""
        uri = options.get("uri")
        if not uri:
            raise ValueError("option 'uri' is required, e.g. amqp://guest:guest@127.0.0.1:5672/%2F")
        routing_key = _shortstr_option(options, "routingKey")
        routing_key_column = options.get("routingKeyColumn")
        if routing_key is not None and routing_key_column is not None:
            raise ValueError("give option 'routingKey' or 'routingKeyColumn', not both")
        raw_mode = str(options.get("deliveryMode", "2")).strip().lower()
        modes = {"1": 1, "2": 2, "transient": 1, "persistent": 2, "non-persistent": 1}
        if raw_mode not in modes:
            raise ValueError(f"option 'deliveryMode' must be 1, 2, transient or persistent, got {raw_mode!r}")
        raw_args = options.get("exchangeArguments")
        try:
            exchange_arguments = json.loads(raw_args) if raw_args else {}
        except json.JSONDecodeError as exc:
            raise ValueError(f"option 'exchangeArguments' is not valid JSON: {exc}") from exc
        if not isinstance(exchange_arguments, dict):
            raise ValueError("option 'exchangeArguments' must be a JSON object")
        timeout_raw = options.get("confirmTimeout", "60")
        try:
            confirm_timeout = float(timeout_raw)
        except ValueError:
            raise ValueError(
                f"option 'confirmTimeout' must be a number of seconds, got {timeout_raw!r}"
            ) from None
        return cls(
            uri=str(uri),
            exchange=_shortstr_option(options, "exchange") or "",
            routing_key=str(routing_key or ""),
            routing_key_column=routing_key_column,
            body_column=options.get("bodyColumn"),
            headers_column=options.get("headersColumn"),
            delivery_mode=modes[raw_mode],
            confirm=_bool(options, "confirm", True),
            mandatory=_bool(options, "mandatory", False),
            max_in_flight=_int(options, "maxInFlight", 5000),
            confirm_timeout=confirm_timeout,
            declare_exchange=_bool(options, "declareExchange", False),
            exchange_type=str(options.get("exchangeType", "direct")),
            exchange_arguments=exchange_arguments,
            bindings=tuple(parse_bindings(options.get("bindings"))),
            durable=_bool(options, "durable", modes[raw_mode] == 2),
            message_id_prefix=_shortstr_option(options, "messageIdPrefix", MAX_MESSAGE_ID_PREFIX_BYTES),
            stats_file=options.get("statsFile"),
        )

    def check_columns(self, column_names: list[str]) -> None:
        """Fail early, on the driver, when a named column does not exist."""
        for option, column in (
            ("routingKeyColumn", self.routing_key_column),
            ("bodyColumn", self.body_column),
            ("headersColumn", self.headers_column),
        ):
            if column is not None and column not in column_names:
                raise ValueError(
                    f"option {option!r} names column {column!r}, which is not in the DataFrame "
                    f"(columns: {', '.join(column_names)})"
                )
