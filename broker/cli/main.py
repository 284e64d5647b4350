"""`hashbroker` command line: `serve` runs the broker, `demo` shows consistent-hash routing,
`plugins` lists and switches the emulated RabbitMQ plugins.

argparse subcommands; `ctl` registers its verbs through `broker.cli.ctl.add_parser`.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import logging
import re
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

from broker.cli.status import CTL_HELP, EX_CONFIG, EX_USAGE, PLUGINS_HELP

log = logging.getLogger("hashbroker.server")

DESCRIPTION = (
    "hashbroker: an AMQP 0-9-1 broker that behaves as RabbitMQ 3.10.8 does, hash exchanges included."
)


class OneLineErrors(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exits EX_USAGE (64), as sysexits.h says."""

    def error(self, message: str) -> NoReturn:
        self.exit(EX_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `hashbroker` parser; `command` (argv's first word, when known) lets `serve` and `demo`
    skip building the parsers of `plugins` and of ctl's ~30 verbs and importing their modules,
    which they never use (they are listed by their help line only)."""
    parser = OneLineErrors(prog="hashbroker", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrors)
    serve = sub.add_parser("serve", help="run the AMQP 0-9-1 broker")
    serve.add_argument("--host", default=None, help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="listen port (default 5672; 0 = any free port)")
    serve.add_argument("--config", default=None, help="TOML or JSON settings file")
    serve.add_argument(
        "--management-port",
        type=int,
        default=None,
        help="RabbitMQ-style management HTTP API port (off by default; 0 = any free port)",
    )
    serve.add_argument(
        "--stream-port",
        type=int,
        default=None,
        help="RabbitMQ stream protocol port (off by default; RabbitMQ's is 5552; 0 = any free port)",
    )
    serve.add_argument(
        "--nodes",
        default=None,
        help="emulated cluster node names, comma-separated; the first is local (default rabbit@localhost)",
    )
    serve.add_argument(
        "--active-consumer-selection",
        default=None,
        choices=["first", "consistent-hash"],
        help="single-active-consumer selection: RabbitMQ's 'first' (default) or PIP-392 'consistent-hash'",
    )
    serve.add_argument("--log-level", default=None, choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"])
    serve.add_argument(
        "--data-dir",
        default=None,
        help="where durable exchanges, queues, bindings and persistent messages are kept "
        "(default: the per-user data directory; ':memory:' keeps nothing)",
    )
    serve.add_argument(
        "--store-sync",
        default=None,
        choices=["normal", "full"],
        help="normal (default): survives a killed broker; full: also fsyncs each commit (power loss)",
    )
    serve.add_argument(
        "--memory-high-watermark",
        default=None,
        help="block publishers above this resident memory: a fraction of RAM (default 0.4) "
        "or a size as RabbitMQ writes it (200MB, 512MiB, 2GB, bytes)",
    )
    serve.add_argument(
        "--plugins",
        default=None,
        help="enabled plugins, comma-separated or as RabbitMQ's enabled_plugins term "
        "(default: the data dir's enabled_plugins file, else hash, sharding, delayed-message, "
        "management, stream and stream management)",
    )
    serve.add_argument(
        "--enabled-plugins-file",
        default=None,
        help="a RabbitMQ enabled_plugins file ([rabbitmq_management,rabbitmq_sharding].) to read",
    )
    serve.add_argument(
        "--prometheus-port",
        type=int,
        default=None,
        help="port of /metrics when rabbitmq_prometheus is enabled (default 15692; 0 = any free port)",
    )
    serve.add_argument(
        "--disk-free-limit",
        default=None,
        help="block publishers when the data dir's filesystem has less free space (default 50MB)",
    )
    for flag, help_text in TLS_FLAGS.items():
        choices = ["verify_peer", "verify_none"] if flag.endswith("-verify") else None
        if flag.endswith("fail-if-no-peer-cert"):
            choices = ["true", "false"]
        if flag.endswith("-port"):
            serve.add_argument(flag, type=int, default=None, help=help_text)
        else:
            serve.add_argument(flag, default=None, choices=choices, help=help_text)
    serve.set_defaults(func=cmd_serve)
    demo = sub.add_parser(
        "demo", help="route 100,000 messages through x-consistent-hash and compare with RabbitMQ"
    )
    demo.add_argument("--messages", type=int, default=100_000, help=argparse.SUPPRESS)
    demo.add_argument(
        "--spark",
        action="store_true",
        help="run examples/spark_pipeline.py instead: Spark -> broker -> counts vs prediction",
    )
    demo.set_defaults(func=cmd_demo)
    if command in ("serve", "demo"):
        sub.add_parser("plugins", help=PLUGINS_HELP)
    else:
        from broker.cli import plugins

        plugins.add_parser(sub)
    if command in ("serve", "demo", "plugins"):
        sub.add_parser("ctl", help=CTL_HELP)
    else:
        from broker.cli import ctl

        ctl.add_parser(sub)
    return parser


TLS_FLAGS: dict[str, str] = {
    "--tls-port": "AMQPS listener port (RabbitMQ's listeners.ssl.default, 5671 there; off by default)",
    "--ssl-certfile": "the server certificate, PEM (ssl_options.certfile)",
    "--ssl-keyfile": "its private key, PEM (ssl_options.keyfile; the password: HASHBROKER_SSL_PASSWORD)",
    "--ssl-cacertfile": "CA bundle that client certificates are checked against (ssl_options.cacertfile)",
    "--ssl-verify": "verify_peer: ask clients for a certificate and check it (default verify_none)",
    "--ssl-fail-if-no-peer-cert": "true: with verify_peer, refuse clients without a certificate",
    "--ssl-versions": "TLS versions, comma-separated (tlsv1.3,tlsv1.2; default: Python's)",
    "--auth-mechanisms": "SASL mechanisms offered, comma-separated (default PLAIN,AMQPLAIN; EXTERNAL "
    "needs the rabbitmq_auth_mechanism_ssl plugin)",
    "--management-ssl-port": "HTTPS management port (management.ssl.port; off by default)",
    "--management-ssl-certfile": "the HTTPS listener's certificate (management.ssl.certfile)",
    "--management-ssl-keyfile": "its private key (management.ssl.keyfile)",
    "--management-ssl-cacertfile": "CA bundle for HTTPS client certificates (management.ssl.cacertfile)",
}
"""The TLS flags of `serve` (each a setting of the same name); the rest of RabbitMQ's ssl_options
(password, depth, management.ssl.verify ...) are set in the config file or the environment."""


def cmd_serve(args: argparse.Namespace) -> int:
    from broker.runtime.settings import Settings, SettingsError

    try:
        settings = Settings.load(
            args.config,
            host=args.host,
            port=args.port,
            log_level=args.log_level,
            management_port=args.management_port,
            stream_port=args.stream_port,
            data_dir=args.data_dir,
            store_sync=args.store_sync,
            nodes=args.nodes,
            active_consumer_selection=args.active_consumer_selection,
            memory_high_watermark=args.memory_high_watermark,
            disk_free_limit=args.disk_free_limit,
            plugins=args.plugins,
            enabled_plugins_file=args.enabled_plugins_file,
            prometheus_port=args.prometheus_port,
            **{f[2:].replace("-", "_"): getattr(args, f[2:].replace("-", "_")) for f in TLS_FLAGS},
        )
        if settings.data_dir is None:
            from broker.store import default_data_dir

            settings = settings.model_copy(update={"data_dir": str(default_data_dir())})
        from broker.runtime.settings import enabled_plugins

        enabled_plugins(settings)  # an unreadable or wrong enabled_plugins file stops here
    except SettingsError as exc:
        print(f"hashbroker: {exc}", file=sys.stderr)
        return EX_USAGE if exc.from_flag else EX_CONFIG
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from broker.server import SHUTDOWN_GRACE, Broker

    broker = Broker(settings)

    from broker.runtime import eventloop

    async def run() -> None:
        await broker.start()
        eventloop.settle_collector()
        log.info("event loop: %s", eventloop.loop_name(asyncio.get_running_loop()))
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):  # a graceful stop: clients read a 320 close
            loop.add_signal_handler(signum, stopping.set)
        try:
            await stopping.wait()
            log.info("hashbroker stopping (signal received)")
        finally:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
            await broker.stop(SHUTDOWN_GRACE)

    from broker.store import StoreError

    try:
        eventloop.run(run())
    except SettingsError as exc:  # a TLS file that cannot be loaded
        print(f"hashbroker: {exc}", file=sys.stderr)
        return EX_CONFIG
    except StoreError as exc:
        print(f"hashbroker: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"hashbroker: {listen_failure(exc, settings.host, settings.port)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    return 0


def listen_failure(exc: OSError, host: str, port: int) -> str:
    """One line naming the address that could not be bound: asyncio's bind error carries it (the
    AMQP or the management listener's), otherwise it was the AMQP one."""
    text = exc.strerror or str(exc)
    bound = re.search(r"address \('([^']*)', (\d+)\)", text)
    if bound is not None:
        host, port = bound.group(1), int(bound.group(2))
    reason = "address already in use" if exc.errno == errno.EADDRINUSE else text.rsplit(": ", 1)[-1]
    return f"cannot listen on {host}:{port}: {reason}"


def cmd_demo(args: argparse.Namespace) -> int:
    from broker.cli import demo

    return demo.run_spark_demo() if args.spark else demo.run_demo(args.messages)


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(words[0] if words else None)
    args = parser.parse_args(words)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
