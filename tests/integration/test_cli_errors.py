"""Bad settings and bad CLI input: one line naming the setting, its value and what is allowed; a
sysexits code (64 for the command line, 78 for a config file or the environment); no traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

HASHBROKER = [sys.executable, "-m", "broker.cli.main"]


def run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HASHBROKER_")}
    environ.update(env or {})
    return subprocess.run([*HASHBROKER, *args], capture_output=True, text=True, timeout=60, env=environ)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if " INFO " not in line]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("args", "env", "code", "names"),
    [
        (["--memory-high-watermark", "nonsense"], {}, 64, ["--memory-high-watermark", "nonsense", "MB"]),
        (["--port", "99999"], {}, 64, ["--port", "99999", "65535"]),
        (["--disk-free-limit", "-3"], {}, 64, ["--disk-free-limit", "-3", "negative"]),
        (["--nodes", "not a node"], {}, 64, ["--nodes", "not a node", "name@host"]),
        (["--management-port", "x"], {}, 64, ["--management-port", "'x'"]),
        ([], {"HASHBROKER_PORT": "abc"}, 78, ["HASHBROKER_PORT=abc", "integer"]),
        ([], {"HASHBROKER_NODES": ""}, 78, ["HASHBROKER_NODES", "at least one node"]),
        ([], {"HASHBROKER_STORE_SYNC": "sometimes"}, 78, ["HASHBROKER_STORE_SYNC=sometimes", "'normal'"]),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(
    args: list[str], env: dict[str, str], code: int, names: list[str]
) -> None:
    result = run(["serve", "--data-dir", ":memory:", *args], env)
    line = one_line(result)
    assert result.returncode == code, line
    for name in names:
        assert name in line


def test_a_typo_in_a_config_file_names_the_file_and_the_setting(tmp_path: Path) -> None:
    config = tmp_path / "hashbroker.toml"
    config.write_text("port = 5999\nmemory_hgh = 1\n")
    result = run(["serve", "--config", str(config)])
    line = one_line(result)
    assert result.returncode == 78
    assert str(config) in line and "'memory_hgh'" in line and "memory_high_watermark" in line


def test_an_unreadable_config_file_is_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("[x\n")
    for path in (broken, tmp_path / "missing.toml"):
        result = run(["serve", "--config", str(path)])
        assert str(path) in one_line(result) and result.returncode == 78


def test_a_taken_management_port_is_named() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run(["serve", "--port", "0", "--data-dir", ":memory:", "--management-port", str(port)])
    line = one_line(result)
    assert result.returncode == 1
    assert line == f"hashbroker: cannot listen on 127.0.0.1:{port}: address already in use"


def test_ctl_with_a_url_that_is_no_url_is_one_usage_error() -> None:
    result = run(["ctl", "--url", "notaurl", "list_queues"])
    assert "Traceback" not in result.stderr
    assert result.returncode == 64 and "--url notaurl" in result.stderr
