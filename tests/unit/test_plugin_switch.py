"""The plugin switch: which plugins a setting enables, the exchange types a disabled plugin takes
away (refused as unknown, as a node without the plugin does), and `hashbroker plugins`."""

from __future__ import annotations

from pathlib import Path

import pytest

from amqpwire.errors import AmqpError
from broker.cli.main import main
from broker.entities.exchange_types import get_type, type_names
from broker.runtime.settings import (
    DEFAULT_PLUGINS,
    Settings,
    SettingsError,
    enabled_plugins,
    parse_plugins,
    prometheus_port,
)
from exchanges.compat import Compat

COMPAT = Compat.for_version("3.10.8")


@pytest.mark.parametrize(
    "text",
    [
        "[rabbitmq_management,rabbitmq_sharding].",
        "[rabbitmq_management,\n rabbitmq_sharding].\n",
        "['rabbitmq_management', 'rabbitmq_sharding'].",
        "rabbitmq_management,rabbitmq_sharding",
        '["rabbitmq_management", "rabbitmq_sharding"]',
    ],
)
def test_plugin_list_forms(text: str) -> None:
    assert Settings.load(plugins=text).plugins == ["rabbitmq_management", "rabbitmq_sharding"]


def test_empty_list_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_plugins("[].") == []
    monkeypatch.setenv("HASHBROKER_PLUGINS", "rabbitmq_prometheus")
    s = Settings.load()
    assert s.plugins == ["rabbitmq_prometheus"]
    assert "rabbitmq_sharding" not in enabled_plugins(s)
    assert prometheus_port(s) == 15692
    assert prometheus_port(Settings.load(prometheus_port=0)) == 0


def test_unknown_plugin_is_refused() -> None:
    with pytest.raises(SettingsError, match="--plugins rabbitmq_nope: unknown plugin 'rabbitmq_nope'"):
        Settings.load(plugins="rabbitmq_nope")


def test_defaults_then_data_dir_file_then_explicit_file(tmp_path: Path) -> None:
    s = Settings(data_dir=str(tmp_path))
    assert enabled_plugins(s) >= set(DEFAULT_PLUGINS)
    assert prometheus_port(s) is None  # off unless enabled: no 15692 listener
    (tmp_path / "enabled_plugins").write_text("[rabbitmq_prometheus].\n")
    assert enabled_plugins(s) == {"rabbitmq_prometheus", "rabbitmq_management_agent", "rabbitmq_web_dispatch"}
    other = tmp_path / "other"
    other.write_text("[rabbitmq_sharding].")
    assert enabled_plugins(Settings(data_dir=str(tmp_path), enabled_plugins_file=str(other))) == {
        "rabbitmq_sharding"
    }
    assert enabled_plugins(Settings(data_dir=str(tmp_path), plugins=[])) == frozenset()


@pytest.mark.parametrize(
    ("type_name", "plugin"),
    [
        ("x-modulus-hash", "rabbitmq_sharding"),
        ("x-consistent-hash", "rabbitmq_consistent_hash_exchange"),
        ("x-delayed-message", "rabbitmq_delayed_message_exchange"),
    ],
)
def test_a_disabled_plugins_type_is_unknown(type_name: str, plugin: str) -> None:
    others = set(DEFAULT_PLUGINS) - {plugin}
    with pytest.raises(AmqpError) as err:
        get_type(type_name, COMPAT, others)
    # the text RabbitMQ 3.10.8 gives a type no enabled plugin registers (observed: 503, as for
    # "x-random-nope" on the live node)
    assert (err.value.reply_code, str(err.value.reply_text)) == (
        503,
        f"COMMAND_INVALID - unknown exchange type '{type_name}'",
    )
    assert get_type(type_name, COMPAT, others | {plugin}).type_name == type_name
    assert get_type(type_name, COMPAT).type_name == type_name  # no plugin set given: all on
    assert type_name not in type_names(others)
    assert get_type("direct", COMPAT, frozenset()).type_name == "direct"


def test_plugins_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "enable", "rabbitmq_prometheus", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Enabling plugins on node rabbit@localhost:\nrabbitmq_prometheus\n")
    assert out.endswith("Offline change; changes will take effect at broker restart.\n")
    assert "  rabbitmq_prometheus\n" in out
    text = (tmp_path / "enabled_plugins").read_text()
    assert parse_plugins(text) == sorted([*DEFAULT_PLUGINS, "rabbitmq_prometheus"])
    assert main(["plugins", "disable", "rabbitmq_sharding", "--data-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["plugins", "list", "--data-dir", str(tmp_path)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
    assert "[  ] rabbitmq_sharding                 3.10.8" in rows
    assert "[E ] rabbitmq_prometheus               3.10.8" in rows
    assert "[e ] rabbitmq_web_dispatch             3.10.8" in rows
    assert main(["plugins", "disable", "rabbitmq_sharding", "--data-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.endswith("Plugin configuration unchanged.\n")
    assert main(["plugins", "enable", "rabbitmq_nope", "--data-dir", str(tmp_path)]) == 70
    assert capsys.readouterr().err == "Error:\n{:plugins_not_found, [:rabbitmq_nope]}\n"
    s = Settings(data_dir=str(tmp_path))
    assert "rabbitmq_sharding" not in enabled_plugins(s)
    assert prometheus_port(s) == 15692


def test_serve_refuses_a_wrong_enabled_plugins_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "enabled_plugins").write_text("[rabbitmq_nope].\n")
    assert main(["serve", "--port", "0", "--data-dir", str(tmp_path)]) == 78  # EX_CONFIG, before listening
    assert "unknown plugin 'rabbitmq_nope'" in capsys.readouterr().err
