"""rabbitmq-plugins disable takes the plugins that need a disabled one with it: disabling the
management plugin drops rabbitmq_stream_management, which cannot run without it."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.cli.main import main
from broker.runtime.settings import DEFAULT_PLUGINS, Settings, enabled_plugins, parse_plugins


def test_disable_drops_the_plugins_that_need_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "rabbitmq_stream_management" in DEFAULT_PLUGINS
    assert main(["plugins", "disable", "rabbitmq_management", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "  rabbitmq_stream_management\n" not in out
    written = parse_plugins((tmp_path / "enabled_plugins").read_text())
    assert written == sorted(set(DEFAULT_PLUGINS) - {"rabbitmq_management", "rabbitmq_stream_management"})
    on = enabled_plugins(Settings(data_dir=str(tmp_path)))
    assert "rabbitmq_management" not in on and "rabbitmq_stream" in on
    assert main(["plugins", "enable", "rabbitmq_stream_management", "--data-dir", str(tmp_path)]) == 0
    on = enabled_plugins(Settings(data_dir=str(tmp_path)))
    assert {"rabbitmq_management", "rabbitmq_management_agent", "rabbitmq_web_dispatch"} <= on
