"""Settings from HASHBROKER_* variables follow pydantic-settings' rules (which they replaced):
field names case-insensitively, list fields as JSON, unrelated variables ignored, bad values refused."""

from __future__ import annotations

import pytest

from broker.runtime.settings import Settings, SettingsError, environment_values


def test_environment_values_are_validated_and_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HASHBROKER_PORT", "5680")
    monkeypatch.setenv("hashbroker_heartbeat", "9")
    monkeypatch.setenv("HASHBROKER_LOOPBACK_USERS", '["guest", "ops"]')
    monkeypatch.setenv("HASHBROKER_MANAGEMENT_PORT", "15680")
    s = Settings.load()
    assert (s.port, s.heartbeat, s.loopback_users, s.management_port) == (5680, 9, ["guest", "ops"], 15680)


def test_unrelated_prefixed_variables_are_ignored() -> None:
    env = {"HASHBROKER_CRASH_SEED": "5", "HASHBROKER_FRAME_MAX": "8192", "PORT": "1"}
    assert environment_values(env) == {"frame_max": "8192"}


def test_bad_environment_value_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HASHBROKER_PORT", "70000")
    with pytest.raises(SettingsError, match=r"HASHBROKER_PORT=70000: .* 65535"):
        Settings.load()
    monkeypatch.setenv("HASHBROKER_PORT", "5672")
    monkeypatch.setenv("HASHBROKER_LOOPBACK_USERS", "guest")
    with pytest.raises(ValueError, match="HASHBROKER_LOOPBACK_USERS must be a JSON list"):
        Settings.load()


def test_flags_beat_environment_beats_file(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "hb.toml"
    cfg.write_text('[hashbroker]\nport = 1111\nheartbeat = 5\nlog-level = "DEBUG"\n')
    monkeypatch.setenv("HASHBROKER_HEARTBEAT", "7")
    monkeypatch.setenv("HASHBROKER_PORT", "3333")
    s = Settings.load(cfg, port=2222)
    assert (s.port, s.heartbeat, s.log_level) == (2222, 7, "DEBUG")


def test_resource_limits_from_flags_environment_and_file(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from broker.cli.main import build_parser

    cfg = tmp_path / "hb.toml"
    cfg.write_text('[hashbroker]\nmemory-high-watermark = 0.3\ndisk-free-limit = "2GB"\n')
    s = Settings.load(cfg)
    assert (s.memory_high_watermark, s.disk_free_limit) == (0.3, "2GB")
    monkeypatch.setenv("HASHBROKER_MEMORY_HIGH_WATERMARK", "512MiB")
    monkeypatch.setenv("HASHBROKER_DISK_FREE_LIMIT", "1.0")
    s = Settings.load(cfg)
    assert (s.memory_high_watermark, s.disk_free_limit) == ("512MiB", 1.0)
    args = build_parser("serve").parse_args(
        ["serve", "--memory-high-watermark", "200MB", "--disk-free-limit", "1GiB"]
    )
    s = Settings.load(
        cfg, memory_high_watermark=args.memory_high_watermark, disk_free_limit=args.disk_free_limit
    )
    assert (s.memory_high_watermark, s.disk_free_limit) == ("200MB", "1GiB")
    monkeypatch.setenv("HASHBROKER_MEMORY_HIGH_WATERMARK", "200 MB")
    with pytest.raises(SettingsError, match="is not a size"):
        Settings.load()
