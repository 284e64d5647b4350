"""`hashbroker plugins list|enable|disable`: rabbitmq-plugins' offline mode for hashbroker.

It edits the enabled_plugins file (the data dir's, or `--enabled-plugins-file`) as
`rabbitmq-plugins --offline` does: a broker reads it when it starts, so a change takes effect at the
next start. The output is rabbitmq-plugins' (3.10.8), listing the plugins hashbroker emulates.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from broker.cli.status import EX_CONFIG, EX_SOFTWARE, EX_USAGE, PLUGINS_HELP

PLUGIN_VERSION = "3.10.8"


def add_parser(sub: Any) -> None:
    plugins = sub.add_parser("plugins", help=PLUGINS_HELP)
    verbs = plugins.add_subparsers(dest="plugins_verb", required=True, parser_class=type(plugins))
    for verb, help_text in (
        ("list", "list the plugins hashbroker emulates, marked [E] enabled or [e] implicitly enabled"),
        ("enable", "enable plugins (with the plugins they need)"),
        ("disable", "disable plugins"),
    ):
        p = verbs.add_parser(verb, help=help_text)
        if verb == "list":
            p.add_argument("pattern", nargs="?", default=".*", help="a regular expression on plugin names")
            p.add_argument("-e", "--enabled", action="store_true", help="only enabled plugins")
            p.add_argument("-E", "--explicit", action="store_true", help="only explicitly enabled plugins")
        else:
            p.add_argument("names", nargs="+", metavar="plugin", help="plugin names")
        p.add_argument("--data-dir", default=None, help="the broker's data dir (its enabled_plugins file)")
        p.add_argument("--enabled-plugins-file", default=None, help="edit this enabled_plugins file instead")
        p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from broker.runtime import settings as cfg

    try:
        settings = cfg.Settings.load(data_dir=args.data_dir, enabled_plugins_file=args.enabled_plugins_file)
        if settings.data_dir is None and settings.enabled_plugins_file is None:
            from broker.store import default_data_dir

            settings = settings.model_copy(update={"data_dir": str(default_data_dir())})
        explicit = explicit_plugins(settings)
    except cfg.SettingsError as exc:
        print(f"hashbroker: {exc}", file=sys.stderr)
        return EX_CONFIG
    node = settings.nodes[0]
    if args.plugins_verb == "list":
        try:
            pattern = re.compile(args.pattern)
        except re.error as exc:
            print(f"hashbroker: invalid pattern {args.pattern!r}: {exc}", file=sys.stderr)
            return EX_USAGE
        print(
            listing(explicit, pattern, node, enabled_only=args.enabled, explicit_only=args.explicit), end=""
        )
        return 0
    unknown = [n for n in args.names if n not in cfg.KNOWN_PLUGINS]
    verb = "Enabling" if args.plugins_verb == "enable" else "Disabling"
    print(f"{verb} plugins on node {node}:")
    print("\n".join(args.names))
    if unknown:
        print("Error:\n{:plugins_not_found, [" + ", ".join(f":{n}" for n in unknown) + "]}", file=sys.stderr)
        return EX_SOFTWARE
    if args.plugins_verb == "enable":
        wanted = set(explicit) | set(args.names)
    else:
        # as rabbitmq-plugins disable: the plugins that need a disabled one go too
        wanted = {n for n in explicit if not cfg.with_dependencies([n]) & set(args.names)}
    print("The following plugins have been configured:")
    for name in sorted(cfg.with_dependencies(wanted)):
        print(f"  {name}")
    if wanted == set(explicit):
        print(f"Applying plugin configuration to {node}...")
        print("Plugin configuration unchanged.")
        return 0
    path = plugins_file(settings)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(cfg.format_plugins(wanted), encoding="utf-8")
    except OSError as exc:
        print(f"hashbroker: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print("Offline change; changes will take effect at broker restart.")
    if settings.plugins is not None:
        print(
            "hashbroker: note: the plugins setting (--plugins or HASHBROKER_PLUGINS) takes precedence "
            f"over {path}",
            file=sys.stderr,
        )
    return 0


def plugins_file(settings: object) -> Path:
    """The enabled_plugins file these settings name: the explicit one, else the data dir's."""
    from broker.runtime.settings import ENABLED_PLUGINS_FILE, Settings

    assert isinstance(settings, Settings)
    if settings.enabled_plugins_file is not None:
        return Path(settings.enabled_plugins_file)
    return Path(str(settings.data_dir)) / ENABLED_PLUGINS_FILE


def explicit_plugins(settings: object) -> list[str]:
    """The explicitly enabled plugins: the file's when it exists, else the setting or defaults."""
    from broker.runtime.settings import DEFAULT_PLUGINS, Settings, read_enabled_plugins

    assert isinstance(settings, Settings)
    if settings.plugins is not None:
        return list(settings.plugins)
    path = plugins_file(settings)
    if path.exists():
        return read_enabled_plugins(path)
    return list(DEFAULT_PLUGINS)


def listing(
    explicit: list[str], pattern: re.Pattern[str], node: str, *, enabled_only: bool, explicit_only: bool
) -> str:
    """rabbitmq-plugins list's table, in its offline form (the node's status is not asked)."""
    from broker.runtime.settings import KNOWN_PLUGINS, with_dependencies

    implicit = with_dependencies(explicit)
    width = max(len(n) for n in KNOWN_PLUGINS)
    lines = [
        f'Listing plugins with pattern "{pattern.pattern}" ...',
        " Configured: E = explicitly enabled; e = implicitly enabled",
        f" | Status: not checked (offline: what {node} enables at its next start)",
        " |/",
    ]
    for name in sorted(KNOWN_PLUGINS):
        if not pattern.search(name):
            continue
        mark = "E" if name in explicit else "e" if name in implicit else " "
        if (enabled_only and mark == " ") or (explicit_only and mark != "E"):
            continue
        lines.append(f"[{mark} ] {name.ljust(width)} {PLUGIN_VERSION}")
    return "\n".join(lines) + "\n"
