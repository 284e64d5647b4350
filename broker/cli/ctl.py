"""`hashbroker ctl`: rabbitmqctl's verbs and output, against a running broker's management API.

    hashbroker ctl list_queues name messages consumers
    hashbroker ctl --url http://127.0.0.1:15673 export_definitions -

The API is found at `--url` (or `$HASHBROKER_MANAGEMENT_URL`, default http://127.0.0.1:15672) with
`--user/--password` (default guest/guest). `VERBS` below is the whole command surface: each verb's
help, the function that runs it (`broker.cli.ctl_verbs`) and its positional arguments and options, as
data; the output format is rabbitmqctl 3.10.8's (`broker.cli.ctl_output`).

Wiring into `hashbroker` (broker/cli/main.py): `add_parser(sub)`; the subparser sets `func=main`.
It also runs alone: `python -m broker.cli.ctl list_queues`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from broker.cli import ctl_verbs as v
from broker.cli.ctl_http import DEFAULT_URL, Client, CtlError
from broker.cli.status import (
    CTL_HELP,
    EX_DATAERR,
    EX_NOUSER,
    EX_OK,
    EX_SOFTWARE,
    EX_UNAVAILABLE,
    EX_USAGE,
)

__all__ = [
    "EX_DATAERR",
    "EX_NOUSER",
    "EX_OK",
    "EX_SOFTWARE",
    "EX_UNAVAILABLE",
    "EX_USAGE",
    "VERBS",
    "CtlError",
    "Verb",
    "add_parser",
    "main",
    "run",
]

Run = Callable[[Client, argparse.Namespace, Callable[[str], None]], int]


@dataclass(frozen=True)
class Arg:
    """One `add_argument` call: names (a positional's name or an option's flags) and its keywords."""

    names: tuple[str, ...]
    options: tuple[tuple[str, Any], ...] = ()


def arg(*names: str, **options: Any) -> Arg:
    return Arg(names, tuple(options.items()))


@dataclass(frozen=True)
class Verb:
    help: str
    run: Run
    args: tuple[Arg, ...] = ()


COLUMNS = arg("columns", nargs="*", help="info items to show")
USERNAME = arg("username")
PASSWORD = arg("password_arg", metavar="password")
VHOST_NAME = arg("name")
POLICY_NAME = arg("name")
NODE = arg("node", help="node name, e.g. rabbit@d")
FILE = arg("file", help="path, or '-'")

VERBS: dict[str, Verb] = {
    "list_queues": Verb("list queues and their properties (columns: name messages consumers ...)",
                        v.list_queues, (COLUMNS,)),
    "list_exchanges": Verb("list exchanges (columns: name type durable ...)", v.list_exchanges, (COLUMNS,)),
    "list_bindings": Verb("list bindings", v.list_bindings, (COLUMNS,)),
    "list_connections": Verb("list client connections", v.list_connections, (COLUMNS,)),
    "list_consumers": Verb("list consumers", v.list_consumers, (COLUMNS,)),
    "list_policies": Verb("list policies of a vhost", v.list_policies),
    "purge_queue": Verb("remove every ready message from a queue", v.purge_queue, (arg("queue"),)),
    "delete_queue": Verb("delete a queue", v.delete_queue, (
        arg("queue"),
        arg("--if-unused", "-u", action="store_true", dest="if_unused"),
        arg("--if-empty", "-e", action="store_true", dest="if_empty"),
    )),
    "add_user": Verb("create a user", v.add_user, (USERNAME, PASSWORD)),
    "delete_user": Verb("delete a user (and its permissions)", v.delete_user, (USERNAME,)),
    "change_password": Verb("change a user's password", v.change_password, (USERNAME, PASSWORD)),
    "set_user_tags": Verb("replace a user's tags (administrator, management, ...; none clears them)",
                          v.set_user_tags, (USERNAME, arg("tags", nargs="*", metavar="tag"))),
    "list_users": Verb("list users and their tags", v.list_users),
    "set_permissions": Verb("set a user's permissions in a vhost", v.set_permissions,
                            (USERNAME, arg("conf"), arg("write"), arg("read"))),
    "clear_permissions": Verb("remove a user's permissions in a vhost", v.clear_permissions, (USERNAME,)),
    "list_permissions": Verb("list the permissions of a vhost", v.list_permissions),
    "list_user_permissions": Verb("list a user's permissions", v.list_user_permissions, (USERNAME,)),
    "add_vhost": Verb("create a vhost", v.add_vhost, (VHOST_NAME,)),
    "delete_vhost": Verb("delete a vhost (closes its connections)", v.delete_vhost, (VHOST_NAME,)),
    "trace_on": Verb("copy every publish and delivery in a vhost to amq.rabbitmq.trace", v.trace_on),
    "trace_off": Verb("stop tracing a vhost", v.trace_off),
    "list_vhosts": Verb("list vhosts (columns: name description tags tracing)", v.list_vhosts, (COLUMNS,)),
    "import_definitions": Verb("import a definitions file (JSON; '-' for stdin)", v.import_definitions,
                               (FILE,)),
    "export_definitions": Verb("export definitions to a file ('-' for stdout)", v.export_definitions,
                               (FILE,)),
    "set_policy": Verb("set a policy (applied to matching exchanges and queues)", v.set_policy, (
        POLICY_NAME,
        arg("pattern"),
        arg("definition", help="JSON object, e.g. '{\"max-length\":100}'"),
        arg("--apply-to", default="all", choices=["all", "queues", "exchanges"]),
        arg("--priority", type=int, default=0),
    )),
    "clear_policy": Verb("remove a policy", v.clear_policy, (POLICY_NAME,)),
    "add_node": Verb("add a node to the emulated cluster (hashbroker only)", v.add_node, (NODE,)),
    "remove_node": Verb("remove a node from the emulated cluster (hashbroker only)", v.remove_node, (NODE,)),
    "list_nodes": Verb("list the emulated cluster's nodes (hashbroker only)", v.list_nodes),
}  # fmt: skip

#: Options every verb takes, before or after the verb (as rabbitmqctl takes them anywhere).
DEFAULTS: dict[str, Any] = {
    "quiet": False,
    "formatter": "table",
    "no_table_headers": False,
    "vhost": "/",
    "timeout": 60.0,
}


def _common() -> argparse.ArgumentParser:
    """Options accepted before or after the verb.

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
    for name, verb in VERBS.items():
        p = verbs.add_parser(name, parents=[common], help=verb.help)
        p.set_defaults(ctl_func=verb.run)
        for a in verb.args:
            p.add_argument(*a.names, **dict(a.options))
    ctl.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Run the parsed `ctl` verb; prints rabbitmqctl-style errors to stderr and returns an exit code."""
    opts = argparse.Namespace(**vars(args))
    defaults = {
        "url": os.environ.get("HASHBROKER_MANAGEMENT_URL", DEFAULT_URL),
        "user": os.environ.get("HASHBROKER_MANAGEMENT_USER", "guest"),
        "password": os.environ.get("HASHBROKER_MANAGEMENT_PASSWORD", "guest"),
        **DEFAULTS,
    }
    for k, value in defaults.items():
        if not hasattr(opts, k):
            setattr(opts, k, value)
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
    """Parse `argv` as `hashbroker ctl ARGS` would and run it (used by `python -m broker.cli.ctl`)."""
    parser = argparse.ArgumentParser(prog="hashbroker")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["ctl", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(run())
