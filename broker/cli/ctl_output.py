"""rabbitmqctl 3.10.8's output, copied byte for byte where scripts parse it.

The "Timeout: ..." / "Listing ... ..." banner lines (dropped by `-q`), a tab-separated table with a
header row (dropped by `--no-table-headers`; no header at all when there are no rows), booleans as
`true`/`false`, arguments as Erlang-ish `[{"k",v}]`, and `--formatter json` as one object per line.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from typing import Any

from broker.cli.ctl_http import CtlError
from broker.cli.status import EX_USAGE

# rabbitmqctl's default and accepted columns, per list verb
QUEUE_COLUMNS = (
    "name", "durable", "auto_delete", "arguments", "policy", "pid", "owner_pid", "exclusive",
    "exclusive_consumer_pid", "exclusive_consumer_tag", "messages_ready", "messages_unacknowledged",
    "messages", "messages_ready_ram", "messages_unacknowledged_ram", "messages_ram",
    "messages_persistent", "message_bytes", "message_bytes_ready", "message_bytes_unacknowledged",
    "message_bytes_ram", "message_bytes_persistent", "head_message_timestamp", "disk_reads",
    "disk_writes", "consumers", "consumer_utilisation", "consumer_capacity", "memory",
    "slave_pids", "synchronised_slave_pids", "state", "type", "leader", "members", "online",
)  # fmt: skip
#: Queue info items rabbitmqctl prints as "" for quorum queues and streams (classic-only items).
CLASSIC_ONLY_COLUMNS = (
    "exclusive", "exclusive_consumer_pid", "exclusive_consumer_tag", "head_message_timestamp",
    "disk_reads", "disk_writes", "slave_pids", "synchronised_slave_pids", "messages_ready_ram",
    "messages_unacknowledged_ram", "messages_persistent", "message_bytes_persistent",
    "consumer_utilisation", "consumer_capacity",
)  # fmt: skip
EXCHANGE_COLUMNS = ("name", "type", "durable", "auto_delete", "internal", "arguments", "policy")
BINDING_COLUMNS = (
    "source_name", "source_kind", "destination_name", "destination_kind", "routing_key", "arguments",
)  # fmt: skip
CONNECTION_COLUMNS = (
    "name", "user", "vhost", "peer_host", "peer_port", "host", "port", "state", "channels",
    "protocol", "auth_mechanism", "ssl", "frame_max", "channel_max", "timeout", "type", "node",
)  # fmt: skip
CONSUMER_COLUMNS = (
    "queue_name", "channel_pid", "consumer_tag", "ack_required", "prefetch_count", "active", "arguments",
)  # fmt: skip
POLICY_COLUMNS = ("vhost", "name", "pattern", "apply-to", "definition", "priority")


def erl(value: Any, top: bool = True) -> str:
    """A JSON value as rabbitmqctl prints it in a table cell: true/false, [{"k",v}], "str" inside."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "" if top else "undefined"
    if isinstance(value, dict):
        return "[" + ",".join(f'{{"{k}",{erl(v, False)}}}' for k, v in sorted(value.items())) + "]"
    if isinstance(value, list):
        return "[" + ",".join(erl(v, False) for v in value) + "]"
    if isinstance(value, str):
        return value if top else f'"{value}"'
    return json.dumps(value)


def amqp_type(value: Any) -> str:
    """Best guess of the AMQP field type of a JSON value (the API does not say; see README)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "signedint" if -(2**31) <= value < 2**31 else "long"
    if isinstance(value, float):
        return "double"
    if isinstance(value, dict):
        return "table"
    if isinstance(value, list):
        return "array"
    if value is None:
        return "void"
    return "longstr"


#: Columns holding Erlang node names, which rabbitmqctl prints as atoms: [rabbit@a,rabbit@b].
NODE_LIST_COLUMNS = frozenset({"members", "online"})


def json_cell(column: str, value: Any) -> Any:
    """A value as `--formatter json` prints it: argument tables become [[key, type, value], ...]
    in the order they were declared (RabbitMQ keeps a queue's or exchange's table as received)."""
    if column == "arguments" and isinstance(value, dict):
        return [[k, amqp_type(v), v] for k, v in value.items()]
    return "" if value is None else value  # an item without a value is '' there, never null


def table_cell(column: str, value: Any) -> str:
    """A table cell: arguments in declaration order, node lists as unquoted atoms, else `erl`."""
    if column == "arguments" and isinstance(value, dict):
        return "[" + ",".join(f'{{"{k}",{erl(v, False)}}}' for k, v in value.items()) + "]"
    if column in NODE_LIST_COLUMNS and isinstance(value, list):
        return "[" + ",".join(str(n) for n in value) + "]"
    return erl(value)


def emit(
    out: Callable[[str], None],
    opts: argparse.Namespace,
    banner: list[str],
    columns: Sequence[str],
    rows: list[dict[str, Any]],
    empty_table_line: bool = False,
) -> None:
    """Print banner (unless quiet or json), then the table or the JSON list, as rabbitmqctl does."""
    if opts.formatter == "json":
        if not rows:
            out("[]" if empty_table_line else "[\n]")
            return
        lines = [
            json.dumps(
                {c: json_cell(c, r.get(c)) for c in columns}, separators=(",", ":"), ensure_ascii=False
            )
            for r in rows
        ]
        out("[\n" + "\n,".join(lines) + "\n]")
        return
    if not opts.quiet:
        for line in banner:
            out(line)
    if not rows:
        if empty_table_line:
            out("")
        return
    if not opts.no_table_headers:
        out("\t".join(columns))
    for r in rows:
        out("\t".join(table_cell(c, r.get(c)) for c in columns))


def check_columns(verb: str, wanted: list[str], allowed: Sequence[str], default: Sequence[str]) -> list[str]:
    cols = wanted or list(default)
    bad = [c for c in cols if c not in allowed]
    if bad:
        raise CtlError(
            f"Error (argument validation): Info key(s) {','.join(bad)} are not supported", EX_USAGE
        )
    return cols
