"""Broker configuration: defaults < config file (TOML/JSON) < HASHBROKER_* environment < explicit overrides.

Every source is validated by pydantic's validator (pydantic_core) with the schema pydantic would
build for this model, so values are coerced and refused with pydantic's own messages; the schema is
built here from the annotations rather than by `pydantic.BaseModel`, whose import (its schema
generator, and the plugin loader's importlib.metadata) cost the idle broker ~5.8 MiB of resident
memory and over a quarter of its start-up CPU time (the idle-RSS and time-to-serve targets);
`tests/unit/test_settings_schema.py` checks the schema against pydantic's. The environment is
read here too, with pydantic-settings' rules: `HASHBROKER_<FIELD>` matched case-insensitively,
list fields given as JSON, other `HASHBROKER_*` variables ignored.
"""

from __future__ import annotations

import json
import os
import re
import types
from collections.abc import Callable, Container, Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, Union, get_args, get_origin, get_type_hints

from pydantic_core import CoreConfig, SchemaValidator, ValidationError
from pydantic_core import core_schema as cs

from broker.entities.cluster import validate_node_name

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
Verify = Literal["verify_peer", "verify_none"]
TlsVersion = Literal["tlsv1", "tlsv1.1", "tlsv1.2", "tlsv1.3"]

ENV_PREFIX = "HASHBROKER_"

Check = Callable[[Any], Any]


class FieldInfo:
    """One setting as `Settings.model_fields` describes it (pydantic's names: `annotation`,
    `get_default`), with its bounds and the checks run before and after its type's validation."""

    def __init__(
        self, default: Any = None, default_factory: Callable[[], Any] | None = None, **bounds: float
    ):
        self.annotation: Any = None
        self.default = default
        self.default_factory = default_factory
        self.bounds = bounds
        self.before: list[Check] = []
        self.after: list[Check] = []
        self.description: str | None = None
        """Its meaning, for a field declared without a docstring of its own (a `SameOptions` copy)."""

    def get_default(self, *, call_default_factory: bool = False) -> Any:
        if self.default_factory is not None:
            return self.default_factory() if call_default_factory else None
        return self.default

    def core_schema(self) -> cs.CoreSchema:
        """pydantic's schema for this field: the type's (bounds on the number, under `| None`),
        wrapped in the before and after checks, then the default."""
        schema = type_schema(self.annotation, self.bounds)
        for check in self.before:
            schema = cs.no_info_before_validator_function(check, schema)
        for check in self.after:
            schema = cs.no_info_after_validator_function(check, schema)
        if self.default_factory is not None:
            return cs.with_default_schema(schema, default_factory=self.default_factory)
        return cs.with_default_schema(schema, default=self.default)


def Field(default: Any = None, *, default_factory: Callable[[], Any] | None = None, **bounds: float) -> Any:
    """A setting's default and numeric bounds (`ge`, `le`, `gt`), as pydantic's `Field` takes them."""
    return FieldInfo(default, default_factory, **bounds)


def type_schema(annotation: Any, bounds: Mapping[str, float]) -> cs.CoreSchema:
    """The core schema pydantic generates for the annotation types settings use."""
    origin = get_origin(annotation)
    if origin is Literal:
        return cs.literal_schema(list(get_args(annotation)))
    if origin is list:
        return cs.list_schema(type_schema(get_args(annotation)[0], {}))
    if origin in (Union, types.UnionType):
        choices = [a for a in get_args(annotation) if a is not type(None)]
        if len(choices) == 1:
            return cs.nullable_schema(type_schema(choices[0], bounds))
        inner = cs.union_schema([type_schema(a, bounds) for a in choices])
        return cs.nullable_schema(inner) if len(choices) < len(get_args(annotation)) else inner
    scalar: dict[Any, Callable[..., cs.CoreSchema]] = {
        str: cs.str_schema,
        bool: cs.bool_schema,
        int: cs.int_schema,
        float: cs.float_schema,
    }
    return scalar[annotation](**bounds)


class SameOptions:
    """Settings declared once and taken again under another prefix: `<prefix><option>` gets the type,
    default and bounds of `<source><option>` for each of `options` (checks are named per field).

    Assigned in a model's body as a ClassVar, the copies take its place in the field order."""

    def __init__(self, prefix: str, source: str, options: Iterable[str], rabbitmq_key: str) -> None:
        self.prefix = prefix
        self.source = source
        self.options = tuple(options)
        self.rabbitmq_key = rabbitmq_key

    def copies(self, fields: Mapping[str, FieldInfo]) -> dict[str, FieldInfo]:
        out: dict[str, FieldInfo] = {}
        for option in self.options:
            original = fields[self.source + option]
            copy = FieldInfo(original.default, original.default_factory, **original.bounds)
            copy.annotation = original.annotation
            copy.description = f"{self.rabbitmq_key}.{option} (as {self.source}{option})."
            out[self.prefix + option] = copy
        return out


def checks(*names: str, mode: Literal["before", "after"] = "after") -> Callable[[Check], Check]:
    """Marks a function as a check of the named settings, run before or after their type's
    validation (pydantic's `field_validator`); a ValueError it raises is pydantic's value_error."""

    def mark(check: Check) -> Check:
        check.__dict__.setdefault("checks", []).append((names, mode))
        return check

    return mark


class Model:
    """A pydantic-like model: the class's annotated fields are validated together by one
    `SchemaValidator` (unknown names refused), `model_check` then sees the validated values."""

    model_fields: ClassVar[dict[str, FieldInfo]]
    """Every field's FieldInfo, in the order declared."""
    __validator__: ClassVar[SchemaValidator]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        hints = get_type_hints(cls)
        fields: dict[str, FieldInfo] = {}
        for name, annotation in hints.items():
            declared = cls.__dict__.get(name)
            if get_origin(annotation) is ClassVar:
                if isinstance(declared, SameOptions):
                    fields.update(declared.copies(fields))
                continue
            info = declared if isinstance(declared, FieldInfo) else FieldInfo(declared)
            info.annotation = annotation
            fields[name] = info
            if name in cls.__dict__:
                delattr(cls, name)  # as in pydantic, a field is an instance attribute only
        for member in list(cls.__dict__.values()):
            check = member.__func__ if isinstance(member, staticmethod) else member
            for names, mode in getattr(check, "checks", ()):
                for name in names:
                    (fields[name].before if mode == "before" else fields[name].after).append(check)
        cls.model_fields = fields
        schema = cs.model_fields_schema(
            {name: cs.model_field(info.core_schema()) for name, info in fields.items()},
            model_name=cls.__name__,
        )
        cls.__validator__ = SchemaValidator(
            cs.no_info_after_validator_function(cls._model_check, schema),
            CoreConfig(title=cls.__name__, extra_fields_behavior="forbid"),
        )

    @classmethod
    def _model_check(cls, validated: tuple[dict[str, Any], Any, set[str]]) -> Any:
        cls.model_check(validated[0])
        return validated

    @classmethod
    def model_check(cls, values: Mapping[str, Any]) -> None:
        """A rule across fields (pydantic's `model_validator(mode="after")`): raise ValueError."""

    def __init__(self, **data: Any) -> None:
        values, _, _ = self.__validator__.validate_python(data)
        self.__dict__.update(values)

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> Any:
        """A shallow copy with `update` applied unvalidated, as pydantic's `model_copy`."""
        copied = object.__new__(type(self))
        copied.__dict__.update(self.__dict__, **(update or {}))
        return copied

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.__dict__ == self.__dict__

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.model_fields)
        return f"{type(self).__name__}({shown})"


TLS_OPTIONS: tuple[str, ...] = (
    "cacertfile",
    "certfile",
    "keyfile",
    "password",
    "verify",
    "fail_if_no_peer_cert",
    "depth",
    "versions",
)
"""A TLS listener's options, as RabbitMQ's ssl_options and management.ssl both name them."""


class SettingsError(ValueError):
    """A setting refused, as one line naming where it came from, the value and what is allowed.

    `from_flag`: the value came from the command line (else a config file or the environment).
    """

    def __init__(self, line: str, *, from_flag: bool = False) -> None:
        super().__init__(line)
        self.from_flag = from_flag


class Settings(Model):
    """Everything `hashbroker serve`, `Broker` and `BrokerThread` can be told.

    Limits mirror RabbitMQ's defaults so clients negotiate the same values against either broker.
    """

    host: str = "127.0.0.1"
    """Address the AMQP listener binds (RabbitMQ: listeners.tcp)."""
    port: int = Field(default=5672, ge=0, le=65535)
    """AMQP port; 0 = any free port (the bound one is in `Broker.port` / `BrokerThread.url`)."""
    default_user: str = "guest"
    """The user created on a first start (RabbitMQ's default_user), tagged administrator."""
    default_pass: str = "guest"
    """Its password (RabbitMQ's default_pass)."""
    default_vhost: str = "/"
    """The vhost created on a first start, where the default user gets full permissions."""
    loopback_users: list[str] = Field(default_factory=lambda: ["guest"])
    """Users who may log in only from a loopback address (RabbitMQ's loopback_users); [] lifts it."""
    heartbeat: int = Field(default=60, ge=0, le=65535)
    """Heartbeat interval in seconds proposed in connection.tune; 0 = none."""
    frame_max: int = Field(default=131072, ge=4096)
    """Largest frame proposed in connection.tune."""
    channel_max: int = Field(default=2047, ge=0, le=65535)
    """Most channels per connection proposed in connection.tune."""
    handshake_timeout: float = Field(default=10.0, gt=0)
    """Seconds a connection may take to reach connection.open (RabbitMQ's handshake_timeout)."""
    silent_close_delay: float = Field(default=3.0, ge=0)
    """Seconds a connection refused at login, failed in its handshake or closed for a fatal frame
    error is kept, unread, before its socket is reset (RabbitMQ's ?SILENT_CLOSE_DELAY)."""
    max_message_size: int = Field(default=134217728, ge=1, le=536870912)
    """Largest message body accepted (RabbitMQ's max_message_size: default 128 MiB, at most 512 MiB);
    a larger one is refused as soon as its content header declares the size."""
    rabbitmq_compat_version: str = "3.10.8"
    """The RabbitMQ version whose routing and reply codes to reproduce ("3.10.8", "3.13.0", "4.3.0")."""
    management_port: int | None = Field(default=None, ge=0, le=65535)
    """RabbitMQ-style management HTTP API; None (default) = off, 0 = any free port."""
    stream_port: int | None = Field(default=None, ge=0, le=65535)
    """RabbitMQ's stream protocol (the rabbitmq_stream plugin, 5552 there); None (default) = off,
    0 = any free port."""
    stream_advertised_host: str | None = None
    """The host stream clients are told to connect to in metadata (RabbitMQ's
    stream.advertised_host); None = the machine's host name, as RabbitMQ does."""
    management_host: str | None = None
    """Address of the management listener; None = the AMQP `host`."""
    log_level: LogLevel = "INFO"
    """Python logging level of the broker's log."""
    data_dir: str | None = None
    """Where durable state is kept. None = keep nothing (":memory:") for `Broker`,
    `BrokerThread` and the pytest fixture; `hashbroker serve` uses the per-user default directory."""
    store_sync: Literal["normal", "full"] = "normal"
    """"normal" survives a killed broker; "full" also fsyncs every commit (power loss)."""
    # emulated cluster node names (the first is the local node) and PIP-392 selection
    nodes: list[str] = Field(default_factory=lambda: ["rabbit@localhost"])
    """HASHBROKER_NODES: "rabbit@a,rabbit@b" (as `--nodes`) or a JSON list."""
    active_consumer_selection: Literal["first", "consistent-hash"] = "first"
    """Which consumer a single-active-consumer queue picks: RabbitMQ's "first", or PIP-392's
    consistent-hash ring."""
    dead_letter_worker_publisher_confirm_timeout: float = Field(default=180.0, gt=0)
    """Seconds a quorum queue's at-least-once dead-letter worker waits before forwarding again the
    dead letters no queue took (RabbitMQ's setting of that name, 180000 ms by default)."""
    memory_high_watermark: float | str = 0.4
    """RabbitMQ's vm_memory_high_watermark: a fraction of RAM (0.4) or an absolute size ("200MB",
    "512MiB", bytes); above it the memory alarm blocks publishers."""
    disk_free_limit: float | str = "50MB"
    """RabbitMQ's disk_free_limit: a size ("50MB", "1GiB", bytes) or a fraction of RAM (1.0, as
    {mem_relative, 1.0}); less free space on the data dir's filesystem sets the disk alarm."""
    plugins: list[str] | None = None
    """The enabled plugins ("rabbitmq_sharding,rabbitmq_management", a JSON list or RabbitMQ's
    "[a,b]." form). None = the `enabled_plugins_file`, else the data dir's enabled_plugins file
    (which `hashbroker plugins enable` and `disable` edit), else the default set. A disabled plugin's
    exchange type is unknown (503) and its listener does not start."""
    enabled_plugins_file: str | None = None
    """A RabbitMQ enabled_plugins file (`[rabbitmq_management,rabbitmq_sharding].`) to read the
    enabled plugins from when `plugins` is not given."""
    prometheus_port: int | None = Field(default=None, ge=0, le=65535)
    """Port of the rabbitmq_prometheus endpoint (/metrics) when that plugin is enabled: None =
    15692, 0 = any free port."""
    tls_port: int | None = Field(default=None, ge=0, le=65535)
    """AMQPS listener (RabbitMQ's listeners.ssl.default, 5671 there); None (default) = off, 0 = any
    free port. Needs ssl_certfile."""
    ssl_cacertfile: str | None = None
    """CA bundle client certificates are verified against (ssl_options.cacertfile)."""
    ssl_certfile: str | None = None
    """The server's certificate, PEM (ssl_options.certfile)."""
    ssl_keyfile: str | None = None
    """Its private key, PEM (ssl_options.keyfile); None = in the certfile."""
    ssl_password: str | None = None
    """Password of an encrypted keyfile (ssl_options.password)."""
    ssl_verify: Verify = "verify_none"
    """verify_peer asks clients for a certificate and checks it (ssl_options.verify)."""
    ssl_fail_if_no_peer_cert: bool = False
    """With verify_peer, refuse a client that sends no certificate in the TLS handshake
    (ssl_options.fail_if_no_peer_cert)."""
    ssl_depth: int | None = Field(default=None, ge=0)
    """ssl_options.depth: accepted, but not enforced (Python's ssl module cannot set it)."""
    ssl_versions: list[TlsVersion] | None = None
    """TLS versions accepted (ssl_options.versions.N): "tlsv1.3,tlsv1.2"; None = Python's default."""
    ssl_handshake_timeout: float = Field(default=5.0, gt=0)
    """Seconds a TLS handshake may take (RabbitMQ's ssl_handshake_timeout)."""
    ssl_cert_login_from: Literal["distinguished_name", "common_name"] = "distinguished_name"
    """What names the EXTERNAL mechanism's user: the certificate subject's DN or its CN."""
    auth_mechanisms: list[str] = Field(default_factory=lambda: ["PLAIN", "AMQPLAIN"])
    """SASL mechanisms offered (auth_mechanisms.N); EXTERNAL also needs the
    rabbitmq_auth_mechanism_ssl plugin and is offered on the TLS listener only."""
    management_ssl_port: int | None = Field(default=None, ge=0, le=65535)
    """HTTPS management listener (management.ssl.port); None (default) = off, 0 = any free port.
    Needs management_ssl_certfile."""
    management_ssl_options: ClassVar[SameOptions] = SameOptions(
        "management_ssl_", "ssl_", TLS_OPTIONS, "management.ssl"
    )
    """management.ssl takes the options ssl_options takes: management_ssl_certfile and the rest."""

    @staticmethod
    @checks("ssl_versions", "management_ssl_versions", "auth_mechanisms", mode="before")
    def _split_list(value: Any) -> Any:
        """A JSON list or comma-separated words; TLS versions are case-insensitive."""
        value = split_words(value)
        if isinstance(value, list):
            return [v.lower() if isinstance(v, str) and v.lower().startswith("tlsv") else v for v in value]
        return value

    @classmethod
    def model_check(cls, values: Mapping[str, Any]) -> None:
        if values["tls_port"] is not None and not values["ssl_certfile"]:
            raise ValueError("tls_port needs ssl_certfile (and ssl_keyfile unless the key is in it)")
        if values["management_ssl_port"] is not None and not values["management_ssl_certfile"]:
            raise ValueError("management_ssl_port needs management_ssl_certfile")

    @staticmethod
    @checks("plugins", mode="before")
    def _split_plugins(value: Any) -> Any:
        """A JSON list, RabbitMQ's `[a,b].` term or comma-separated names."""
        return split_words(value, parse_plugins, term_ends_with_dot=True)

    @staticmethod
    @checks("plugins")
    def _known_plugins(value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        for name in value:
            if name not in KNOWN_PLUGINS:
                raise ValueError(f"unknown plugin {name!r} (known: {', '.join(sorted(KNOWN_PLUGINS))})")
        return sorted(set(value))

    @staticmethod
    @checks("memory_high_watermark", "disk_free_limit", mode="before")
    def _size_or_fraction(value: Any) -> Any:
        """A number is a fraction of RAM unless it is an integer > 1 (bytes); text is a size."""
        if isinstance(value, bool):
            raise ValueError("expected a fraction of RAM or a size such as 200MB")
        if isinstance(value, int) and value > 1:
            return str(value)
        if isinstance(value, (int, float)):
            if value < 0:
                raise ValueError("a fraction of RAM must not be negative")
            return float(value)
        text = str(value).strip()
        try:
            fraction = float(text)
        except ValueError:
            parse_size(text)  # raises with the accepted forms
            return text
        if "." not in text and fraction > 1:
            return text  # plain bytes
        if fraction < 0:
            raise ValueError("a fraction of RAM must not be negative")
        return fraction

    @staticmethod
    @checks("nodes", mode="before")
    def _split_nodes(value: Any) -> Any:
        """A string is a JSON list when it starts with "[", else comma-separated names (blanks dropped)."""
        return split_words(value)

    @staticmethod
    @checks("nodes")
    def _some_nodes(value: list[str]) -> list[str]:
        if not value:
            raise ValueError("at least one node name is needed (the first is the local node)")
        for name in value:
            validate_node_name(name)  # a ClusterError is a ValueError: pydantic reports it
        return value

    @classmethod
    def load(
        cls,
        config_file: str | Path | None = None,
        *,
        flags: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> Settings:
        """Build settings from an optional config file, the environment and `overrides`.

        `None` overrides are ignored so argparse defaults of None mean "not given". Any refusal is a
        `SettingsError` whose text names the source of the value: the flag (`--field-name`), the
        `HASHBROKER_*` variable or the config file.
        """
        given = {k: v for k, v in overrides.items() if v is not None}
        try:
            file_values = read_config_file(config_file) if config_file is not None else {}
        except (OSError, ValueError) as exc:
            raise SettingsError(f"config file {config_file}: {exc}") from None
        try:
            env_values = environment_values(os.environ)
        except ValueError as exc:
            raise SettingsError(str(exc)) from None
        try:
            return cls(**{**file_values, **env_values, **given})
        except ValidationError as exc:
            raise describe(exc, config_file, file_values, env_values, given) from None


EMULATED_PLUGINS: dict[str, str] = {
    "rabbitmq_consistent_hash_exchange": "the x-consistent-hash exchange type",
    "rabbitmq_sharding": "the x-modulus-hash exchange type and sharding policies",
    "rabbitmq_delayed_message_exchange": "the x-delayed-message exchange type",
    "rabbitmq_random_exchange": "the x-random exchange type",
    "rabbitmq_recent_history_exchange": "the x-recent-history exchange type",
    "rabbitmq_jms_topic_exchange": "the x-jms-topic exchange type (JMS selectors)",
    "rabbitmq_management": "the management HTTP API (on --management-port)",
    "rabbitmq_management_agent": "the statistics the management API shows",
    "rabbitmq_web_dispatch": "the HTTP listeners of the management and Prometheus plugins",
    "rabbitmq_prometheus": "Prometheus metrics on /metrics (on --prometheus-port, 15692)",
    "rabbitmq_stream": "the stream protocol listener (streams as a queue type are core)",
    "rabbitmq_stream_management": "the management API's /api/stream/ resources",
    "rabbitmq_auth_mechanism_ssl": "the EXTERNAL SASL mechanism: TLS client certificates name the user",
    "rabbitmq_event_exchange": "the broker's events published to amq.rabbitmq.event (off by default)",
}
"""The plugins hashbroker emulates, and what each switches on."""

KNOWN_PLUGINS: frozenset[str] = frozenset(EMULATED_PLUGINS)

DEFAULT_PLUGINS: tuple[str, ...] = (
    "rabbitmq_consistent_hash_exchange",
    "rabbitmq_delayed_message_exchange",
    "rabbitmq_management",
    "rabbitmq_sharding",
    "rabbitmq_stream",
    "rabbitmq_stream_management",
)
"""What a broker enables when told nothing: everything hashbroker served before plugins could be
switched off, Prometheus excepted (it opens a port of its own)."""

PLUGIN_DEPENDENCIES: dict[str, tuple[str, ...]] = {
    "rabbitmq_management": ("rabbitmq_management_agent", "rabbitmq_web_dispatch"),
    "rabbitmq_prometheus": ("rabbitmq_management_agent", "rabbitmq_web_dispatch"),
    "rabbitmq_stream_management": ("rabbitmq_management", "rabbitmq_stream"),
}
"""Plugins implicitly enabled by another (rabbitmq-plugins' "e" mark), as each plugin's DEPS name
them; what a dependency needs is enabled too."""

ENABLED_PLUGINS_FILE = "enabled_plugins"
"""Name of the file `hashbroker plugins` keeps in the data dir, as rabbitmq-plugins does."""


def parse_plugins(text: str) -> list[str]:
    """Plugin names from RabbitMQ's enabled_plugins term (`[a,b].`, also with quoted atoms and
    newlines) or a comma-separated list."""
    body = text.strip()
    if body.endswith("."):
        body = body[:-1].rstrip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1]
    elif body.startswith("["):
        raise ValueError(f"{text!r} is not a plugin list ([name,name]. or name,name)")
    names = [n.strip().strip("'") for n in body.split(",")]
    return [n for n in names if n]


def comma_words(text: str) -> list[str]:
    """Comma-separated words, blanks dropped."""
    return [w.strip() for w in text.split(",") if w.strip()]


def split_words(
    value: Any, words: Callable[[str], list[str]] = comma_words, *, term_ends_with_dot: bool = False
) -> Any:
    """A string setting that holds a list: a JSON list when it starts with "[", else `words` of it;
    any other value unchanged. With `term_ends_with_dot`, a text ending in "." (an Erlang term such
    as `[a,b].`) or that is not JSON goes to `words` instead."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("[") and not (term_ends_with_dot and text.endswith(".")):
        try:
            return json.loads(text)
        except ValueError:
            if not term_ends_with_dot:
                raise
    return words(text)


def format_plugins(names: Iterable[str]) -> str:
    """The enabled_plugins file's text for `names` (as rabbitmq-plugins writes it)."""
    return "[" + ",".join(sorted(set(names))) + "].\n"


def enabled_plugins(settings: Settings) -> frozenset[str]:
    """The plugins on for `settings`: those explicitly enabled and those they depend on."""
    return with_dependencies(explicit_plugins(settings))


def explicit_plugins(settings: Settings) -> list[str]:
    """The explicitly enabled plugins, in the order given (what RabbitMQ's enabled_plugins file
    lists): `plugins`, else `enabled_plugins_file`, else the data dir's enabled_plugins file, else
    the defaults."""
    if settings.plugins is not None:
        return list(dict.fromkeys(settings.plugins))
    path = settings.enabled_plugins_file
    if path is None and settings.data_dir not in (None, ":memory:"):
        candidate = Path(str(settings.data_dir)) / ENABLED_PLUGINS_FILE
        path = str(candidate) if candidate.exists() else None
    return read_enabled_plugins(path) if path is not None else list(DEFAULT_PLUGINS)


def with_dependencies(names: Iterable[str]) -> frozenset[str]:
    """`names` and every plugin they need, directly or through another."""
    out: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in out:
            out.add(name)
            todo.extend(PLUGIN_DEPENDENCIES.get(name, ()))
    return frozenset(out)


def read_enabled_plugins(path: str | Path) -> list[str]:
    """The names in an enabled_plugins file; an unknown name is refused (SettingsError)."""
    try:
        names = parse_plugins(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SettingsError(f"enabled_plugins file {path}: {exc}") from None
    unknown = [n for n in names if n not in KNOWN_PLUGINS]
    if unknown:
        raise SettingsError(f"enabled_plugins file {path}: unknown plugin {unknown[0]!r}")
    return names


def prometheus_port(settings: Settings, enabled: Container[str] | None = None) -> int | None:
    """The Prometheus endpoint's port, None when rabbitmq_prometheus is off (`enabled`: the
    enabled plugins when already known, else read from `settings`)."""
    if "rabbitmq_prometheus" not in (enabled_plugins(settings) if enabled is None else enabled):
        return None
    return 15692 if settings.prometheus_port is None else settings.prometheus_port


def describe(
    exc: ValidationError,
    config_file: str | Path | None,
    file_values: Mapping[str, Any],
    env_values: Mapping[str, Any],
    given: Mapping[str, Any],
) -> SettingsError:
    """The first refusal of `exc` as one line: where the value came from, the value, what is allowed."""
    error = exc.errors()[0]
    name = str(error["loc"][0]) if error["loc"] else ""
    message = str(error["msg"]).removeprefix("Value error, ")
    if not name:  # a rule across settings: its message starts with the setting it is about
        first = message.split(" ", 1)[0]
        if first in given:
            flag = "--" + first.replace("_", "-")
            return SettingsError(f"{flag} {_shown(given[first])}: {message}", from_flag=True)
        return SettingsError(message)
    if error["type"] == "extra_forbidden":
        import difflib  # only for this hint: an idle broker should not load it

        close = difflib.get_close_matches(name, list(Settings.model_fields), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        where = f"config file {config_file}" if name in file_values else "settings"
        return SettingsError(f"{where}: unknown setting {name!r}{hint}")
    if name in given:
        flag = "--" + name.replace("_", "-")
        return SettingsError(f"{flag} {_shown(given[name])}: {message}", from_flag=True)
    if name in env_values:
        return SettingsError(f"{ENV_PREFIX}{name.upper()}={_shown(env_values[name])}: {message}")
    if name in file_values:
        return SettingsError(f"config file {config_file}: {name} = {_shown(file_values[name])}: {message}")
    return SettingsError(f"{name}: {message}")


def _shown(value: Any) -> str:
    if isinstance(value, list):
        value = ",".join(map(str, value))
    text = str(value)
    return repr(text) if text == "" or " " in text else text


_SIZE = re.compile(
    r"^([0-9]+)(kB|KB|MB|GB|kb|mb|gb|Kb|Mb|Gb|kiB|KiB|MiB|GiB|kib|mib|gib|KIB|MIB|GIB|k|K|m|M|g|G)?$"
)
_UNITS = {
    **dict.fromkeys(("k", "kiB", "K", "KIB", "kib", "KiB"), 1024),
    **dict.fromkeys(("m", "MiB", "M", "MIB", "mib"), 1024**2),
    **dict.fromkeys(("g", "GiB", "G", "GIB", "gib"), 1024**3),
    **dict.fromkeys(("KB", "kB", "kb", "Kb"), 1000),
    **dict.fromkeys(("MB", "mb", "Mb"), 1000**2),
    **dict.fromkeys(("GB", "gb", "Gb"), 1000**3),
}


def parse_size(text: str) -> int:
    """Bytes in a size written as RabbitMQ's rabbit_resource_monitor_misc:parse_information_unit
    accepts it: digits and an optional unit, kB/MB/GB powers of 1000, k/M/G and kiB/MiB/GiB
    powers of 1024 (the unit spellings are its regex's, nothing more)."""
    m = _SIZE.match(text.strip())
    if m is None:
        raise ValueError(
            f"{text!r} is not a size (digits and an optional unit: kB, MB, GB, KiB, MiB, GiB, k, M, G)"
        )
    number, unit = m.groups()
    return int(number) * (_UNITS[unit] if unit else 1)


def resolve_limit(value: float | str, total_memory: int) -> int:
    """Bytes for a memory_high_watermark or disk_free_limit: a fraction scales `total_memory`."""
    if isinstance(value, float):
        return int(value * total_memory)
    return parse_size(value)


_JSON_FIELDS = frozenset({"loopback_users"})
"""List fields whose environment value is JSON (pydantic-settings' rule for complex types);
`nodes` has its own comma-or-JSON validator."""


def environment_values(environ: Mapping[str, str]) -> dict[str, Any]:
    """The `HASHBROKER_<FIELD>` variables that name a settings field (case-insensitive)."""
    fields = Settings.model_fields
    values: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.upper().startswith(ENV_PREFIX):
            continue
        field = name[len(ENV_PREFIX) :].lower()
        if field not in fields:
            continue
        if field in _JSON_FIELDS:
            try:
                values[field] = json.loads(raw)
            except ValueError as exc:
                raise ValueError(f"{name} must be a JSON list: {exc}") from None
        else:
            values[field] = raw
    return values


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Parse a TOML (by extension .toml) or JSON config file; a `[hashbroker]` table is unwrapped."""
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    if p.suffix.lower() == ".json":
        data = json.loads(text)
    else:
        import tomllib

        data = tomllib.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"config file {p} must contain a table/object")
    if isinstance(data.get("hashbroker"), dict):
        data = data["hashbroker"]
    return rabbitmq_keys({str(k).replace("-", "_"): v for k, v in data.items()})


RABBITMQ_KEYS: dict[str, str] = {
    "listeners.tcp.default": "port",
    "listeners.ssl.default": "tls_port",
    "management.tcp.port": "management_port",
    **{f"ssl_options.{k}": f"ssl_{k}" for k in TLS_OPTIONS},
    **{f"management.ssl.{k}": f"management_ssl_{k}" for k in ("port", *TLS_OPTIONS)},
}
"""rabbitmq.conf keys a config file may use, written dotted (`"ssl_options.verify" = ...`) or as
TOML tables (`[ssl_options]`); a numbered list (`auth_mechanisms.1`, `ssl_options.versions.1`)
becomes the list in its numbers' order."""


def rabbitmq_keys(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with rabbitmq.conf's keys (see RABBITMQ_KEYS) turned into settings fields."""
    flat: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and (prefix.split(".")[0] in _RABBITMQ_ROOTS or not prefix):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        else:
            flat[prefix] = value

    walk("", data)
    out: dict[str, Any] = {}
    numbered: dict[str, list[tuple[int, Any]]] = {}
    for key, value in flat.items():
        base, _, last = key.rpartition(".")
        if last.isdigit() and (base == "auth_mechanisms" or base in RABBITMQ_KEYS):
            numbered.setdefault(RABBITMQ_KEYS.get(base, base), []).append((int(last), value))
        else:
            out[RABBITMQ_KEYS.get(key, key)] = value
    for field, items in numbered.items():
        out[field] = [v for _, v in sorted(items, key=lambda item: item[0])]
    return out


_RABBITMQ_ROOTS = frozenset(k.split(".")[0] for k in RABBITMQ_KEYS) | {"auth_mechanisms"}
