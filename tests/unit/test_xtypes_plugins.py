"""The random, recent-history and JMS topic exchange plugins in the plugin switch: off by default
(RabbitMQ enables no plugin by itself, and hashbroker's default set is what it served before plugins
could be switched), unknown (503) while off, listed by `hashbroker plugins list`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from amqpwire.errors import AmqpError
from broker.cli.main import main
from broker.cli.plugins import listing
from broker.entities.exchange_types import get_type, type_names
from broker.runtime.settings import DEFAULT_PLUGINS, KNOWN_PLUGINS, Settings, enabled_plugins
from exchanges.compat import Compat

COMPAT = Compat.for_version("3.10.8")
NEW_TYPES = [
    ("x-random", "rabbitmq_random_exchange"),
    ("x-recent-history", "rabbitmq_recent_history_exchange"),
    ("x-jms-topic", "rabbitmq_jms_topic_exchange"),
]


@pytest.mark.parametrize(("type_name", "plugin"), NEW_TYPES)
def test_off_by_default_and_unknown_while_off(type_name: str, plugin: str) -> None:
    assert plugin in KNOWN_PLUGINS and plugin not in DEFAULT_PLUGINS
    default = enabled_plugins(Settings())
    with pytest.raises(AmqpError) as err:
        get_type(type_name, COMPAT, default)
    assert (err.value.reply_code, str(err.value.reply_text)) == (
        503,
        f"COMMAND_INVALID - unknown exchange type '{type_name}'",
    )
    assert type_name not in type_names(default)
    assert get_type(type_name, COMPAT, default | {plugin}).type_name == type_name
    assert type_name in type_names(default | {plugin})


def test_plugins_list_shows_them() -> None:
    table = listing(
        ["rabbitmq_jms_topic_exchange"],
        re.compile("exchange"),
        "rabbit@h",
        enabled_only=False,
        explicit_only=False,
    )
    assert "[E ] rabbitmq_jms_topic_exchange       3.10.8" in table.splitlines()
    assert "[  ] rabbitmq_random_exchange          3.10.8" in table.splitlines()
    assert "[  ] rabbitmq_recent_history_exchange  3.10.8" in table.splitlines()


def test_enabling_one_from_the_cli(tmp_path: Path) -> None:
    assert main(["plugins", "enable", "rabbitmq_random_exchange", "--data-dir", str(tmp_path)]) == 0
    assert "rabbitmq_random_exchange" in enabled_plugins(Settings(data_dir=str(tmp_path)))
