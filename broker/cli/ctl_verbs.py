"""The verbs of `hashbroker ctl`, one function each: `(client, options, out) -> exit code`.

Each one makes the management-API calls rabbitmqctl's verb stands for and prints what rabbitmqctl
prints; `broker.cli.ctl` maps verb names and their arguments to these functions.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from broker.cli.ctl_http import Client, CtlError, check, q, require_user_and_vhost, vhost_exists
from broker.cli.ctl_output import (
    BINDING_COLUMNS,
    CLASSIC_ONLY_COLUMNS,
    CONNECTION_COLUMNS,
    CONSUMER_COLUMNS,
    EXCHANGE_COLUMNS,
    POLICY_COLUMNS,
    QUEUE_COLUMNS,
    check_columns,
    emit,
)
from broker.cli.status import Exit

Out = Callable[[str], None]


def _say(o: argparse.Namespace, out: Out, line: str) -> None:
    """The line rabbitmqctl prints before acting, unless `--quiet`."""
    if not o.quiet:
        out(line)


def _call(c: Client, method: str, path: str, body: Any = None, *, missing: CtlError | None = None) -> Any:
    """One management-API call the verb needs to succeed; `missing` is what a 404 means to this verb
    (without it, the generic `not_found`)."""
    status, data = c.request(method, path, body)
    if status == 404 and missing is not None:
        raise missing
    check(status, data)
    return data


def _one_call(line: str, method: str, path: str) -> Callable[[Client, argparse.Namespace, Out], int]:
    """A verb that says `line` and makes the one call `method path`: both are formatted with the
    options (the path with their values URL-quoted)."""

    def run(c: Client, o: argparse.Namespace, out: Out) -> int:
        options = vars(o)
        _say(o, out, line.format(**options))
        _call(c, method, path.format(**{k: q(v) for k, v in options.items() if isinstance(v, str)}))
        return Exit.OK

    return run


def _no_such_user(o: argparse.Namespace) -> CtlError:
    return CtlError(f'User "{o.username}" does not exist', Exit.NOUSER)


def list_queues(c: Client, o: argparse.Namespace, out: Out) -> int:
    cols = check_columns("list_queues", o.columns, QUEUE_COLUMNS, ("name", "messages"))
    rows = c.get(f"/queues/{q(o.vhost)}") if vhost_exists(c, o.vhost) else []
    for r in rows:
        r["pid"] = r.get("node")
        r["owner_pid"] = (r.get("owner_pid_details") or {}).get("name", "")
        r["policy"] = r.get("policy") or ""
        queue_type_columns(r)
    banner = [f"Timeout: {o.timeout:.1f} seconds ...", f"Listing queues for vhost {o.vhost} ..."]
    emit(out, o, banner, cols, rows)
    return Exit.OK


def queue_type_columns(r: dict[str, Any]) -> None:
    """The columns rabbitmqctl fills per queue type from a management API queue object: only
    replicated queues have a leader and members (classic: ""); the classic-only items (exclusive,
    paging, head timestamp, disk counters) are "" for them."""
    if r.get("type", "classic") == "classic":
        r["leader"] = r["members"] = r["online"] = ""
        r.setdefault("disk_reads", 0)  # every message is in memory or broker.store's own files
        r.setdefault("disk_writes", 0)
        return
    r["leader"] = r.get("leader") or r.get("node") or ""
    r["members"] = list(r.get("members") or [])
    r["online"] = list(r.get("online") or [])
    for key in CLASSIC_ONLY_COLUMNS:
        r[key] = ""


def list_exchanges(c: Client, o: argparse.Namespace, out: Out) -> int:
    cols = check_columns("list_exchanges", o.columns, EXCHANGE_COLUMNS, ("name", "type"))
    rows = c.get(f"/exchanges/{q(o.vhost)}") if vhost_exists(c, o.vhost) else []
    emit(out, o, [f"Listing exchanges for vhost {o.vhost} ..."], cols, rows)
    return Exit.OK


def list_bindings(c: Client, o: argparse.Namespace, out: Out) -> int:
    cols = check_columns("list_bindings", o.columns, BINDING_COLUMNS, BINDING_COLUMNS)
    raw = c.get(f"/bindings/{q(o.vhost)}") if vhost_exists(c, o.vhost) else []
    rows = [
        {
            "source_name": b["source"],
            "source_kind": "exchange",
            "destination_name": b["destination"],
            "destination_kind": b["destination_type"],
            "routing_key": b["routing_key"],
            # rabbit_binding keeps a binding's arguments sorted by key, not as declared
            "arguments": dict(sorted((b.get("arguments") or {}).items())),
        }
        for b in raw
    ]
    emit(out, o, [f"Listing bindings for vhost {o.vhost}..."], cols, rows)
    return Exit.OK


def list_connections(c: Client, o: argparse.Namespace, out: Out) -> int:
    cols = check_columns(
        "list_connections", o.columns, CONNECTION_COLUMNS, ("user", "peer_host", "peer_port", "state")
    )
    # the API lists the stream-protocol connections too: rabbitmqctl shows the AMQP ones only
    rows = [r for r in c.get("/connections") if r.get("protocol") != "stream"]
    emit(out, o, ["Listing connections ..."], cols, rows)
    return Exit.OK


def list_consumers(c: Client, o: argparse.Namespace, out: Out) -> int:
    cols = check_columns("list_consumers", o.columns, CONSUMER_COLUMNS, CONSUMER_COLUMNS)
    raw = c.get(f"/consumers/{q(o.vhost)}") if vhost_exists(c, o.vhost) else []
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
    return Exit.OK


def list_policies(c: Client, o: argparse.Namespace, out: Out) -> int:
    rows = c.get(f"/policies/{q(o.vhost)}") if vhost_exists(c, o.vhost) else []
    for r in rows:  # rabbitmqctl shows the definition as JSON text
        r["definition"] = json.dumps(r["definition"], separators=(",", ":"))
    emit(out, o, [f'Listing policies for vhost "{o.vhost}" ...'], POLICY_COLUMNS, rows, empty_table_line=True)
    return Exit.OK


purge_queue = _one_call(
    "Purging queue '{queue}' in vhost '{vhost}' ...", "DELETE", "/queues/{vhost}/{queue}/contents"
)


def delete_queue(c: Client, o: argparse.Namespace, out: Out) -> int:
    _say(o, out, f"Deleting queue '{o.queue}' on vhost '{o.vhost}' ...")
    status, info = c.request("GET", f"/queues/{q(o.vhost)}/{q(o.queue)}")
    if status == 404:
        raise CtlError("Queue not found", Exit.USAGE)
    flags = "&".join(f for f, on in (("if-unused=true", o.if_unused), ("if-empty=true", o.if_empty)) if on)
    _call(c, "DELETE", f"/queues/{q(o.vhost)}/{q(o.queue)}" + (f"?{flags}" if flags else ""))
    ready = info.get("messages_ready", 0) if isinstance(info, dict) else 0
    out(f"Queue was successfully deleted with {ready} ready messages")
    return Exit.OK


def add_user(c: Client, o: argparse.Namespace, out: Out) -> int:
    _say(o, out, f'Adding user "{o.username}" ...')
    status, _ = c.request("GET", f"/users/{q(o.username)}")
    if status == 200:
        raise CtlError(f'User "{o.username}" already exists', Exit.SOFTWARE)
    _call(c, "PUT", f"/users/{q(o.username)}", {"password": o.password_arg, "tags": ""})
    out(
        "Done. Don't forget to grant the user permissions to some virtual hosts! "
        "See 'rabbitmqctl help set_permissions' to learn more."
    )
    return Exit.OK


def set_permissions(c: Client, o: argparse.Namespace, out: Out) -> int:
    _say(o, out, f'Setting permissions for user "{o.username}" in vhost "{o.vhost}" ...')
    require_user_and_vhost(c, o.username, o.vhost)
    body = {"configure": o.conf, "write": o.write, "read": o.read}
    _call(c, "PUT", f"/permissions/{q(o.vhost)}/{q(o.username)}", body)
    return Exit.OK


def add_vhost(c: Client, o: argparse.Namespace, out: Out) -> int:
    _say(o, out, f'Adding vhost "{o.name}" ...')
    status, data = c.request("PUT", f"/vhosts/{q(o.name)}", {})
    check(status, data)
    if status == 201:  # the API grants the acting user full permissions; rabbitmqctl does not
        c.request("DELETE", f"/permissions/{q(o.name)}/{q(o.user)}")
    return Exit.OK


def trace_on(c: Client, o: argparse.Namespace, out: Out) -> int:
    return _trace(c, o, out, True)


def trace_off(c: Client, o: argparse.Namespace, out: Out) -> int:
    return _trace(c, o, out, False)


def _trace(c: Client, o: argparse.Namespace, out: Out, on: bool) -> int:
    """rabbitmqctl trace_on/trace_off -p vhost: the API's `tracing` flag of the vhost. rabbitmqctl
    accepts a vhost that does not exist (it only names it in a list); a PUT would create one, so
    an unknown vhost is reported done and left alone."""
    _say(o, out, f'{"Starting" if on else "Stopping"} tracing for vhost "{o.vhost}" ...')
    if vhost_exists(c, o.vhost):
        _call(c, "PUT", f"/vhosts/{q(o.vhost)}", {"tracing": on})
    out(f"Trace {'enabled' if on else 'disabled'} for vhost {o.vhost}")
    return Exit.OK


def delete_user(c: Client, o: argparse.Namespace, out: Out) -> int:
    _say(o, out, f'Deleting user "{o.username}" ...')
    _call(c, "DELETE", f"/users/{q(o.username)}", missing=_no_such_user(o))
    return Exit.OK


def change_password(c: Client, o: argparse.Namespace, out: Out) -> int:
    _say(o, out, f'Changing password for user "{o.username}" ...')
    status, user = c.request("GET", f"/users/{q(o.username)}")
    if status == 404:
        raise _no_such_user(o)
    body = {"password": o.password_arg, "tags": ",".join(user.get("tags", []))}
    _call(c, "PUT", f"/users/{q(o.username)}", body)
    return Exit.OK


def set_user_tags(c: Client, o: argparse.Namespace, out: Out) -> int:
    """Replace a user's tags, keeping its password: the stored hash is sent back unchanged."""
    _say(o, out, f'Setting tags for user "{o.username}" to [{", ".join(o.tags)}] ...')
    user = _call(c, "GET", f"/users/{q(o.username)}", missing=_no_such_user(o))
    body = {"tags": ",".join(o.tags)}
    if isinstance(user, dict) and user.get("password_hash") is not None:
        body["password_hash"] = user["password_hash"]
        body["hashing_algorithm"] = user.get("hashing_algorithm", "rabbit_password_hashing_sha256")
    _call(c, "PUT", f"/users/{q(o.username)}", body)
    return Exit.OK


def delete_vhost(c: Client, o: argparse.Namespace, out: Out) -> int:
    _say(o, out, f'Deleting vhost "{o.name}" ...')
    _call(
        c,
        "DELETE",
        f"/vhosts/{q(o.name)}",
        missing=CtlError(f"Virtual host '{o.name}' does not exist", Exit.DATAERR),
    )
    return Exit.OK


def list_users(c: Client, o: argparse.Namespace, out: Out) -> int:
    rows = [{"user": u["name"], "tags": u["tags"]} for u in c.get("/users")]
    if o.formatter != "json":
        for r in rows:
            r["tags"] = "[" + ", ".join(r["tags"]) + "]"
    emit(out, o, ["Listing users ..."], ("user", "tags"), rows)
    return Exit.OK


def list_vhosts(c: Client, o: argparse.Namespace, out: Out) -> int:
    cols = check_columns("list_vhosts", o.columns, ("name", "description", "tags", "tracing"), ("name",))
    emit(out, o, ["Listing vhosts ..."], cols, c.get("/vhosts"))
    return Exit.OK


def list_permissions(c: Client, o: argparse.Namespace, out: Out) -> int:
    missing = CtlError(f"Virtual host '{o.vhost}' does not exist", Exit.DATAERR)
    header = f'Listing permissions for vhost "{o.vhost}" ...'
    return _permissions(c, o, out, header, f"/vhosts/{q(o.vhost)}/permissions", missing, "user")


def list_user_permissions(c: Client, o: argparse.Namespace, out: Out) -> int:
    missing = CtlError(f'{{:no_such_user, "{o.username}"}}', Exit.UNAVAILABLE)
    header = f'Listing permissions for user "{o.username}" ...'
    return _permissions(c, o, out, header, f"/users/{q(o.username)}/permissions", missing, "vhost")


def _permissions(
    c: Client, o: argparse.Namespace, out: Out, header: str, path: str, missing: CtlError, key: str
) -> int:
    """A permissions listing: by vhost (one row per user) or by user (one row per vhost)."""
    if not o.quiet and o.formatter != "json":
        out(header)
    rows = _call(c, "GET", path, missing=missing)
    emit(out, o, [], (key, "configure", "write", "read"), rows)
    return Exit.OK


def clear_permissions(c: Client, o: argparse.Namespace, out: Out) -> int:
    _say(o, out, f'Clearing permissions for user "{o.username}" in vhost "{o.vhost}" ...')
    require_user_and_vhost(c, o.username, o.vhost)
    status, data = c.request("DELETE", f"/permissions/{q(o.vhost)}/{q(o.username)}")
    if status != 404:
        check(status, data)
    return Exit.OK


def import_definitions(c: Client, o: argparse.Namespace, out: Out) -> int:
    try:
        text = sys.stdin.read() if o.file == "-" else open(o.file, encoding="utf-8").read()  # noqa: SIM115
    except OSError:
        raise CtlError(
            f"Error (argument validation): Bad argument: File {o.file} does not exist", Exit.DATAERR
        ) from None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise CtlError(f"Failed to decode JSON definitions: {exc}", Exit.DATAERR) from None
    if not o.quiet:
        src = "standard input" if o.file == "-" else f'a file at "{o.file}"'
        out(f"Importing definitions in JSON from {src} ...")
    _call(c, "POST", "/definitions", doc)
    return Exit.OK


def export_definitions(c: Client, o: argparse.Namespace, out: Out) -> int:
    doc = c.get("/definitions")
    text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
    if o.file == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return Exit.OK
    _say(o, out, f'Exporting definitions in JSON to a file at "{o.file}" ...')
    with open(o.file, "w", encoding="utf-8") as fh:
        fh.write(text)
    return Exit.OK


def set_policy(c: Client, o: argparse.Namespace, out: Out) -> int:
    _say(
        o,
        out,
        f'Setting policy "{o.name}" for pattern "{o.pattern}" to "{o.definition}" '
        f'with priority "{o.priority}" for vhost "{o.vhost}" ...',
    )
    try:
        definition = json.loads(o.definition)
    except ValueError:
        raise CtlError(f"JSON decoding error: {o.definition}", Exit.DATAERR) from None
    body = {"pattern": o.pattern, "definition": definition, "priority": o.priority, "apply-to": o.apply_to}
    _call(c, "PUT", f"/policies/{q(o.vhost)}/{q(o.name)}", body)
    return Exit.OK


def clear_policy(c: Client, o: argparse.Namespace, out: Out) -> int:
    _say(o, out, f'Clearing policy "{o.name}" on vhost "{o.vhost}" ...')
    status, _ = c.request("GET", f"/policies/{q(o.vhost)}/{q(o.name)}")
    if status == 404:
        raise CtlError("Parameter does not exist", Exit.UNAVAILABLE)
    _call(c, "DELETE", f"/policies/{q(o.vhost)}/{q(o.name)}")
    return Exit.OK


# hashbroker-only: a node joins the emulated cluster (sharded exchanges get its shards), or leaves it
# (its shard queues stay)
add_node = _one_call('Adding node "{node}" to the emulated cluster ...', "POST", "/hashbroker/nodes/{node}")
remove_node = _one_call(
    'Removing node "{node}" from the emulated cluster ...', "DELETE", "/hashbroker/nodes/{node}"
)


def list_nodes(c: Client, o: argparse.Namespace, out: Out) -> int:
    """hashbroker-only: the emulated cluster's running nodes (local node marked)."""
    data = c.get("/hashbroker/nodes")
    for node in data["nodes"]:
        out(f"{node}\t(local)" if node == data["local"] else node)
    return Exit.OK
