"""`hashbroker ctl`: rabbitmqctl's verbs and output, against a running broker's management API.

    hashbroker ctl list_queues name messages consumers
    hashbroker ctl --url http://127.0.0.1:15673 export_definitions -

rabbitmqctl talks Erlang distribution to the node; hashbroker has no Erlang, so this speaks HTTP to
the management API (`--url`, `$HASHBROKER_MANAGEMENT_URL`, default http://127.0.0.1:15672) with
`--user/--password` (default guest/guest). Output copies rabbitmqctl 3.10.8 byte for byte where
scripts parse it: the "Timeout: ..." / "Listing ... ..." banner lines (dropped by `-q`), a tab-separated
table with a header row (dropped by `--no-table-headers`; no header at all when there are no rows),
booleans as `true`/`false`, arguments as Erlang-ish `[{"k",v}]`, and `--formatter json` as one
object per line. Exit codes follow rabbitmqctl's sysexits: 64 usage, 65 data error, 69 not found,
70 software error.

Wiring into `hashbroker` (broker/cli.py): `add_parser(sub)`; the subparser sets `func=main`.
It also runs alone: `python -m broker.ctl list_queues`.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote

from broker.cli import CTL_HELP

DEFAULT_URL = "http://127.0.0.1:15672"
EX_OK, EX_USAGE, EX_DATAERR, EX_NOUSER, EX_UNAVAILABLE, EX_SOFTWARE = 0, 64, 65, 67, 69, 70

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


class CtlError(Exception):
    """A failure to report as rabbitmqctl does ("Error:\\n<reason>" on stderr) with exit `code`."""

    def __init__(self, message: str, code: int = EX_SOFTWARE) -> None:
        super().__init__(message)
        self.code = code


class Client:
    """Minimal management-API client (urllib: no dependency, works before `pip install` extras)."""

    def __init__(self, url: str, user: str, password: str, timeout: float) -> None:
        self.base = url.rstrip("/")
        self.auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.timeout = timeout

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        # Imported here: urllib.request pulls in http.client, email and ssl (~40 ms, ~3 MB), which
        # `hashbroker serve` (it builds this module's parser) should not pay for.
        import urllib.error
        import urllib.request

        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + "/api" + path, data=data, method=method)
        req.add_header("authorization", self.auth)
        if data is not None:
            req.add_header("content-type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as err:
            status, raw = err.code, err.read()
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise CtlError(
                f"unable to reach the management API at {self.base}: {reason}\n"
                "Is the broker running with --management-port? (set --url or HASHBROKER_MANAGEMENT_URL)",
                EX_UNAVAILABLE,
            ) from None
        try:
            decoded = json.loads(raw) if raw else None
        except ValueError:
            decoded = raw.decode("utf-8", "replace")
        if status == 401:
            raise CtlError("Access refused: check --user/--password", 77)
        return status, decoded

    def get(self, path: str) -> Any:
        status, data = self.request("GET", path)
        if status == 404:
            raise CtlError("not_found", EX_UNAVAILABLE)
        if status >= 400:
            raise CtlError(_reason(data), EX_SOFTWARE)
        return data


def _reason(data: Any) -> str:
    if isinstance(data, dict):
        return str(data.get("reason") or data.get("error") or data)
    return str(data)


def q(segment: str) -> str:
    """One URL path segment ("/" in a vhost or name must become %2F)."""
    return quote(segment, safe="")


# -- value formatting (rabbitmqctl's table formatter) ----------------------------------------------


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


def json_cell(column: str, value: Any) -> Any:
    """A value as `--formatter json` prints it: argument tables become [[key, type, value], ...]."""
    if column == "arguments" and isinstance(value, dict):
        return [[k, amqp_type(v), value[k]] for k, v in sorted(value.items())]
    return value


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
        out("\t".join(erl(r.get(c)) for c in columns))


def check_columns(verb: str, wanted: list[str], allowed: Sequence[str], default: Sequence[str]) -> list[str]:
    cols = wanted or list(default)
    bad = [c for c in cols if c not in allowed]
    if bad:
        raise CtlError(
            f"Error (argument validation): Info key(s) {','.join(bad)} are not supported", EX_USAGE
        )
    return cols


# -- verbs ------------------------------------------------------------------------------------------


def list_queues(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    cols = check_columns("list_queues", o.columns, QUEUE_COLUMNS, ("name", "messages"))
    rows = c.get(f"/queues/{q(o.vhost)}") if _vhost_exists(c, o.vhost) else []
    for r in rows:
        r["pid"] = r.get("node")
        r["owner_pid"] = (r.get("owner_pid_details") or {}).get("name", "")
        r["leader"] = r.get("node")
        r["members"] = [r.get("node")]
        r["online"] = [r.get("node")]
    banner = [f"Timeout: {o.timeout:.1f} seconds ...", f"Listing queues for vhost {o.vhost} ..."]
    emit(out, o, banner, cols, rows)
    return EX_OK


def list_exchanges(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    cols = check_columns("list_exchanges", o.columns, EXCHANGE_COLUMNS, ("name", "type"))
    rows = c.get(f"/exchanges/{q(o.vhost)}") if _vhost_exists(c, o.vhost) else []
    emit(out, o, [f"Listing exchanges for vhost {o.vhost} ..."], cols, rows)
    return EX_OK


def list_bindings(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    cols = check_columns("list_bindings", o.columns, BINDING_COLUMNS, BINDING_COLUMNS)
    raw = c.get(f"/bindings/{q(o.vhost)}") if _vhost_exists(c, o.vhost) else []
    rows = [
        {
            "source_name": b["source"],
            "source_kind": "exchange",
            "destination_name": b["destination"],
            "destination_kind": b["destination_type"],
            "routing_key": b["routing_key"],
            "arguments": b.get("arguments") or {},
        }
        for b in raw
    ]
    emit(out, o, [f"Listing bindings for vhost {o.vhost}..."], cols, rows)
    return EX_OK


def list_connections(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    cols = check_columns(
        "list_connections", o.columns, CONNECTION_COLUMNS, ("user", "peer_host", "peer_port", "state")
    )
    emit(out, o, ["Listing connections ..."], cols, c.get("/connections"))
    return EX_OK


def list_consumers(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    cols = check_columns("list_consumers", o.columns, CONSUMER_COLUMNS, CONSUMER_COLUMNS)
    raw = c.get(f"/consumers/{q(o.vhost)}") if _vhost_exists(c, o.vhost) else []
    rows = [
        {
            "queue_name": r["queue"]["name"],
            # no Erlang pids: the channel's name stands in for channel_pid
            "channel_pid": f"<{r['channel_details'].get('name', '')}>",
            "consumer_tag": r["consumer_tag"],
            "ack_required": r["ack_required"],
            "prefetch_count": r["prefetch_count"],
            "active": r.get("active", True),
            "arguments": r.get("arguments") or {},
        }
        for r in raw
    ]
    emit(out, o, [f"Listing consumers in vhost {o.vhost} ..."], cols, rows)
    return EX_OK


def list_policies(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    rows = c.get(f"/policies/{q(o.vhost)}") if _vhost_exists(c, o.vhost) else []
    for r in rows:  # rabbitmqctl shows the definition as JSON text
        r["definition"] = json.dumps(r["definition"], separators=(",", ":"))
    emit(out, o, [f'Listing policies for vhost "{o.vhost}" ...'], POLICY_COLUMNS, rows, empty_table_line=True)
    return EX_OK


def purge_queue(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    if not o.quiet:
        out(f"Purging queue '{o.queue}' in vhost '{o.vhost}' ...")
    status, data = c.request("DELETE", f"/queues/{q(o.vhost)}/{q(o.queue)}/contents")
    if status == 404:
        raise CtlError("not_found", EX_UNAVAILABLE)
    _check(status, data)
    return EX_OK


def delete_queue(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    if not o.quiet:
        out(f"Deleting queue '{o.queue}' on vhost '{o.vhost}' ...")
    status, info = c.request("GET", f"/queues/{q(o.vhost)}/{q(o.queue)}")
    if status == 404:
        raise CtlError("Queue not found", EX_USAGE)
    flags = "&".join(f for f, on in (("if-unused=true", o.if_unused), ("if-empty=true", o.if_empty)) if on)
    status, data = c.request("DELETE", f"/queues/{q(o.vhost)}/{q(o.queue)}" + (f"?{flags}" if flags else ""))
    _check(status, data)
    ready = info.get("messages_ready", 0) if isinstance(info, dict) else 0
    out(f"Queue was successfully deleted with {ready} ready messages")
    return EX_OK


def add_user(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    if not o.quiet:
        out(f'Adding user "{o.username}" ...')
    status, _ = c.request("GET", f"/users/{q(o.username)}")
    if status == 200:
        raise CtlError(f'User "{o.username}" already exists', EX_SOFTWARE)
    status, data = c.request("PUT", f"/users/{q(o.username)}", {"password": o.password_arg, "tags": ""})
    _check(status, data)
    out(
        "Done. Don't forget to grant the user permissions to some virtual hosts! "
        "See 'rabbitmqctl help set_permissions' to learn more."
    )
    return EX_OK


def set_permissions(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    if not o.quiet:
        out(f'Setting permissions for user "{o.username}" in vhost "{o.vhost}" ...')
    _require_user_and_vhost(c, o.username, o.vhost)
    body = {"configure": o.conf, "write": o.write, "read": o.read}
    status, data = c.request("PUT", f"/permissions/{q(o.vhost)}/{q(o.username)}", body)
    _check(status, data)
    return EX_OK


def add_vhost(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    if not o.quiet:
        out(f'Adding vhost "{o.name}" ...')
    status, data = c.request("PUT", f"/vhosts/{q(o.name)}", {})
    _check(status, data)
    if status == 201:  # the API grants the acting user full permissions; rabbitmqctl does not
        c.request("DELETE", f"/permissions/{q(o.name)}/{q(o.user)}")
    return EX_OK


def delete_user(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    if not o.quiet:
        out(f'Deleting user "{o.username}" ...')
    status, data = c.request("DELETE", f"/users/{q(o.username)}")
    if status == 404:
        raise CtlError(f'User "{o.username}" does not exist', EX_NOUSER)
    _check(status, data)
    return EX_OK


def change_password(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    if not o.quiet:
        out(f'Changing password for user "{o.username}" ...')
    status, user = c.request("GET", f"/users/{q(o.username)}")
    if status == 404:
        raise CtlError(f'User "{o.username}" does not exist', EX_NOUSER)
    body = {"password": o.password_arg, "tags": ",".join(user.get("tags", []))}
    status, data = c.request("PUT", f"/users/{q(o.username)}", body)
    _check(status, data)
    return EX_OK


def delete_vhost(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    if not o.quiet:
        out(f'Deleting vhost "{o.name}" ...')
    status, data = c.request("DELETE", f"/vhosts/{q(o.name)}")
    if status == 404:
        raise CtlError(f"Virtual host '{o.name}' does not exist", EX_DATAERR)
    _check(status, data)
    return EX_OK


def list_users(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    rows = [{"user": u["name"], "tags": u["tags"]} for u in c.get("/users")]
    if o.formatter != "json":
        for r in rows:
            r["tags"] = "[" + ", ".join(r["tags"]) + "]"
    emit(out, o, ["Listing users ..."], ("user", "tags"), rows)
    return EX_OK


def list_vhosts(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    cols = check_columns("list_vhosts", o.columns, ("name", "description", "tags", "tracing"), ("name",))
    emit(out, o, ["Listing vhosts ..."], cols, c.get("/vhosts"))
    return EX_OK


def list_permissions(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    if not o.quiet and o.formatter != "json":
        out(f'Listing permissions for vhost "{o.vhost}" ...')
    status, rows = c.request("GET", f"/vhosts/{q(o.vhost)}/permissions")
    if status == 404:
        raise CtlError(f"Virtual host '{o.vhost}' does not exist", EX_DATAERR)
    _check(status, rows)
    emit(out, o, [], ("user", "configure", "write", "read"), rows)
    return EX_OK


def list_user_permissions(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    if not o.quiet and o.formatter != "json":
        out(f'Listing permissions for user "{o.username}" ...')
    status, rows = c.request("GET", f"/users/{q(o.username)}/permissions")
    if status == 404:
        raise CtlError(f'{{:no_such_user, "{o.username}"}}', EX_UNAVAILABLE)
    _check(status, rows)
    emit(out, o, [], ("vhost", "configure", "write", "read"), rows)
    return EX_OK


def clear_permissions(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    if not o.quiet:
        out(f'Clearing permissions for user "{o.username}" in vhost "{o.vhost}" ...')
    _require_user_and_vhost(c, o.username, o.vhost)
    status, data = c.request("DELETE", f"/permissions/{q(o.vhost)}/{q(o.username)}")
    if status != 404:
        _check(status, data)
    return EX_OK


def _require_user_and_vhost(c: Client, user: str, vhost: str) -> None:
    if not _vhost_exists(c, vhost):
        raise CtlError(f"Virtual host {vhost} does not exist", EX_UNAVAILABLE)
    status, _ = c.request("GET", f"/users/{q(user)}")
    if status == 404:
        raise CtlError(f"User {user} does not exist", EX_NOUSER)


def import_definitions(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    try:
        text = sys.stdin.read() if o.file == "-" else open(o.file, encoding="utf-8").read()  # noqa: SIM115
    except OSError:
        raise CtlError(
            f"Error (argument validation): Bad argument: File {o.file} does not exist", EX_DATAERR
        ) from None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise CtlError(f"Failed to decode JSON definitions: {exc}", EX_DATAERR) from None
    if not o.quiet:
        src = "standard input" if o.file == "-" else f'a file at "{o.file}"'
        out(f"Importing definitions in JSON from {src} ...")
    status, data = c.request("POST", "/definitions", doc)
    _check(status, data)
    return EX_OK


def export_definitions(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    doc = c.get("/definitions")
    text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
    if o.file == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return EX_OK
    if not o.quiet:
        out(f'Exporting definitions in JSON to a file at "{o.file}" ...')
    with open(o.file, "w", encoding="utf-8") as fh:
        fh.write(text)
    return EX_OK


def set_policy(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    if not o.quiet:
        out(
            f'Setting policy "{o.name}" for pattern "{o.pattern}" to "{o.definition}" '
            f'with priority "{o.priority}" for vhost "{o.vhost}" ...'
        )
    try:
        definition = json.loads(o.definition)
    except ValueError:
        raise CtlError(f"JSON decoding error: {o.definition}", EX_DATAERR) from None
    body = {"pattern": o.pattern, "definition": definition, "priority": o.priority, "apply-to": o.apply_to}
    status, data = c.request("PUT", f"/policies/{q(o.vhost)}/{q(o.name)}", body)
    _check(status, data)
    return EX_OK


def clear_policy(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    if not o.quiet:
        out(f'Clearing policy "{o.name}" on vhost "{o.vhost}" ...')
    status, _ = c.request("GET", f"/policies/{q(o.vhost)}/{q(o.name)}")
    if status == 404:
        raise CtlError("Parameter does not exist", EX_UNAVAILABLE)
    status, data = c.request("DELETE", f"/policies/{q(o.vhost)}/{q(o.name)}")
    _check(status, data)
    return EX_OK


def add_node(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    """hashbroker-only: a node joins the emulated cluster (sharded exchanges get its shards)."""
    if not o.quiet:
        out(f'Adding node "{o.node}" to the emulated cluster ...')
    status, data = c.request("POST", f"/hashbroker/nodes/{q(o.node)}")
    _check(status, data)
    return EX_OK


def remove_node(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    """hashbroker-only: a node leaves the emulated cluster (its shard queues stay)."""
    if not o.quiet:
        out(f'Removing node "{o.node}" from the emulated cluster ...')
    status, data = c.request("DELETE", f"/hashbroker/nodes/{q(o.node)}")
    _check(status, data)
    return EX_OK


def list_nodes(c: Client, o: argparse.Namespace, out: Callable[[str], None]) -> int:
    """hashbroker-only: the emulated cluster's running nodes (local node marked)."""
    data = c.get("/hashbroker/nodes")
    for node in data["nodes"]:
        out(f"{node}\t(local)" if node == data["local"] else node)
    return EX_OK


def _check(status: int, data: Any) -> None:
    if status == 404:
        raise CtlError("not_found", EX_UNAVAILABLE)
    if status >= 400:
        raise CtlError(_reason(data), EX_SOFTWARE)


def _vhost_exists(c: Client, vhost: str) -> bool:
    """rabbitmqctl lists nothing (exit 0) for an unknown vhost; the API would answer 404."""
    status, _ = c.request("GET", f"/vhosts/{q(vhost)}")
    return status == 200


# -- argument parsing -------------------------------------------------------------------------------


def _common() -> argparse.ArgumentParser:
    """Options accepted before or after the verb, as rabbitmqctl takes them anywhere.

    Defaults are SUPPRESSed so a value given before the verb is not reset by the verb's parser;
    `main` fills in the real defaults.
    """
    p = argparse.ArgumentParser(add_help=False)
    s = argparse.SUPPRESS
    p.add_argument(
        "--url",
        default=s,
        help=f"management API base URL (default ${{HASHBROKER_MANAGEMENT_URL}} or {DEFAULT_URL})",
    )
    p.add_argument("--user", default=s, help="management user (default guest)")
    p.add_argument("--password", default=s, help="management password (default guest)")
    p.add_argument("-q", "--quiet", action="store_true", default=s, help="no informational lines")
    p.add_argument("--formatter", choices=["table", "json"], default=s, help="output format (list verbs)")
    p.add_argument("--no-table-headers", action="store_true", default=s, help="omit the column header row")
    p.add_argument("-p", "--vhost", default=s, help="virtual host (default /)")
    p.add_argument("-t", "--timeout", type=float, default=s, help="request timeout in seconds (default 60)")
    return p


VERBS: dict[str, tuple[str, Callable[[Client, argparse.Namespace, Callable[[str], None]], int]]] = {
    "list_queues": ("list queues and their properties (columns: name messages consumers ...)", list_queues),
    "list_exchanges": ("list exchanges (columns: name type durable ...)", list_exchanges),
    "list_bindings": ("list bindings", list_bindings),
    "list_connections": ("list client connections", list_connections),
    "list_consumers": ("list consumers", list_consumers),
    "list_policies": ("list policies of a vhost", list_policies),
    "purge_queue": ("remove every ready message from a queue", purge_queue),
    "delete_queue": ("delete a queue", delete_queue),
    "add_user": ("create a user", add_user),
    "delete_user": ("delete a user (and its permissions)", delete_user),
    "change_password": ("change a user's password", change_password),
    "list_users": ("list users and their tags", list_users),
    "set_permissions": ("set a user's permissions in a vhost", set_permissions),
    "clear_permissions": ("remove a user's permissions in a vhost", clear_permissions),
    "list_permissions": ("list the permissions of a vhost", list_permissions),
    "list_user_permissions": ("list a user's permissions", list_user_permissions),
    "add_vhost": ("create a vhost", add_vhost),
    "delete_vhost": ("delete a vhost (closes its connections)", delete_vhost),
    "list_vhosts": ("list vhosts (columns: name description tags tracing)", list_vhosts),
    "import_definitions": ("import a definitions file (JSON; '-' for stdin)", import_definitions),
    "export_definitions": ("export definitions to a file ('-' for stdout)", export_definitions),
    "set_policy": ("set a policy (applied to matching exchanges and queues)", set_policy),
    "clear_policy": ("remove a policy", clear_policy),
    "add_node": ("add a node to the emulated cluster (hashbroker only)", add_node),
    "remove_node": ("remove a node from the emulated cluster (hashbroker only)", remove_node),
    "list_nodes": ("list the emulated cluster's nodes (hashbroker only)", list_nodes),
}


def add_parser(subparsers: Any) -> None:
    """Register `ctl` on the `hashbroker` command's subparsers (argparse `add_subparsers()` result)."""
    common = _common()
    ctl = subparsers.add_parser(
        "ctl",
        parents=[common],
        help=CTL_HELP,
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    verbs = ctl.add_subparsers(dest="ctl_verb", required=True, metavar="VERB")
    for verb, (help_text, func) in VERBS.items():
        p = verbs.add_parser(verb, parents=[common], help=help_text)
        p.set_defaults(ctl_func=func)
        if verb in ("add_node", "remove_node"):
            p.add_argument("node", help="node name, e.g. rabbit@d")
        elif verb in ("list_users", "list_permissions"):
            pass
        elif verb == "list_user_permissions":
            p.add_argument("username")
        elif verb.startswith("list_") and verb not in ("list_policies", "list_nodes"):
            p.add_argument("columns", nargs="*", help="info items to show")
        elif verb in ("purge_queue", "delete_queue"):
            p.add_argument("queue")
            if verb == "delete_queue":
                p.add_argument("--if-unused", "-u", action="store_true", dest="if_unused")
                p.add_argument("--if-empty", "-e", action="store_true", dest="if_empty")
        elif verb in ("add_user", "change_password"):
            p.add_argument("username")
            p.add_argument("password_arg", metavar="password")
        elif verb in ("delete_user", "clear_permissions"):
            p.add_argument("username")
        elif verb == "set_permissions":
            p.add_argument("username")
            p.add_argument("conf")
            p.add_argument("write")
            p.add_argument("read")
        elif verb in ("add_vhost", "delete_vhost"):
            p.add_argument("name")
        elif verb in ("import_definitions", "export_definitions"):
            p.add_argument("file", help="path, or '-'")
        elif verb == "set_policy":
            p.add_argument("name")
            p.add_argument("pattern")
            p.add_argument("definition", help="JSON object, e.g. '{\"max-length\":100}'")
            p.add_argument("--apply-to", default="all", choices=["all", "queues", "exchanges"])
            p.add_argument("--priority", type=int, default=0)
        elif verb == "clear_policy":
            p.add_argument("name")
    ctl.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run the parsed `ctl` verb; prints rabbitmqctl-style errors to stderr and returns an exit code."""
    opts = argparse.Namespace(**vars(args))
    defaults = {
        "url": os.environ.get("HASHBROKER_MANAGEMENT_URL", DEFAULT_URL),
        "user": os.environ.get("HASHBROKER_MANAGEMENT_USER", "guest"),
        "password": os.environ.get("HASHBROKER_MANAGEMENT_PASSWORD", "guest"),
        "quiet": False,
        "formatter": "table",
        "no_table_headers": False,
        "vhost": "/",
        "timeout": 60.0,
    }
    for k, v in defaults.items():
        if not hasattr(opts, k):
            setattr(opts, k, v)
    client = Client(opts.url, opts.user, opts.password, opts.timeout)

    def out(line: str) -> None:
        print(line)

    try:
        return int(opts.ctl_func(client, opts, out))
    except CtlError as exc:
        sys.stdout.flush()
        if str(exc).startswith("Error"):
            print(str(exc), file=sys.stderr)
        else:
            print(f"Error:\n{exc}", file=sys.stderr)
        return exc.code


def run(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` as `hashbroker ctl ARGS` would and run it (used by `python -m broker.ctl`)."""
    parser = argparse.ArgumentParser(prog="hashbroker")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["ctl", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(run())
