"""The Dockerfile and docker-compose.yml agree with the CLI (Docker itself cannot run here).

docker-compose.yml is parsed with PyYAML when installed, else with a minimal parser for the YAML
subset the file uses (block mappings, block lists, flow lists of strings, comments) so the test needs
no new dependency. The hashbroker command must use only flags that `hashbroker serve --help` lists,
its container port must be the one it listens on, and the two services must not share host ports.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
DOCKERFILE = REPO / "Dockerfile"


def _scalar(text: str) -> Any:
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        return json.loads(text)  # the file's flow lists are lists of double-quoted strings
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def mini_yaml(source: str) -> Any:
    """Parse the block-style YAML subset used by docker-compose.yml (not a general YAML parser)."""
    lines = []
    for raw in source.splitlines():
        stripped = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if stripped.strip():
            lines.append((len(stripped) - len(stripped.lstrip()), stripped.strip()))

    def block(i: int, indent: int) -> tuple[Any, int]:
        if lines[i][1].startswith("- "):
            items: list[Any] = []
            while i < len(lines) and lines[i][0] == indent and lines[i][1].startswith("- "):
                items.append(_scalar(lines[i][1][2:]))
                i += 1
            return items, i
        mapping: dict[str, Any] = {}
        while i < len(lines) and lines[i][0] == indent:
            key, _, rest = lines[i][1].partition(":")
            i += 1
            if rest.strip():
                mapping[key.strip()] = _scalar(rest)
            elif i < len(lines) and lines[i][0] > indent:
                mapping[key.strip()], i = block(i, lines[i][0])
            else:
                mapping[key.strip()] = None
        return mapping, i

    value, end = block(0, lines[0][0])
    assert end == len(lines), f"unparsed line: {lines[end]}"
    return value


def load_compose() -> dict[str, Any]:
    text = COMPOSE.read_text()
    try:
        import yaml  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        data: dict[str, Any] = mini_yaml(text)
        return data
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def as_argv(command: Any) -> list[str]:
    return list(command) if isinstance(command, list) else shlex.split(str(command))


def serve_help() -> str:
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from broker.cli.main import main; sys.exit(main())",
            "serve",
            "--help",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    if proc.returncode != 0 and "No module named" in proc.stderr:
        pytest.skip(f"broker.cli.main not importable yet: {proc.stderr.strip()[-200:]}")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def host_ports(service: dict[str, Any]) -> list[tuple[int, int]]:
    out = []
    for mapping in service.get("ports", []):
        host, _, container = str(mapping).rpartition(":")
        out.append((int(host.split(":")[-1]), int(container)))
    return out


def test_compose_parses_with_both_services() -> None:
    data = load_compose()
    assert set(data["services"]) >= {"hashbroker", "rabbitmq"}
    assert data["services"]["rabbitmq"]["image"] == "rabbitmq:3.10.8-management"


def test_minimal_parser_agrees_with_pyyaml_when_available() -> None:
    yaml = pytest.importorskip("yaml", reason="PyYAML not installed: the minimal parser is used alone")
    assert mini_yaml(COMPOSE.read_text()) == yaml.safe_load(COMPOSE.read_text())


def test_hashbroker_command_uses_cli_flags_and_matching_port() -> None:
    service = load_compose()["services"]["hashbroker"]
    argv = as_argv(service["command"])
    assert argv[:2] == ["hashbroker", "serve"]
    help_text = serve_help()
    for flag in (a.split("=")[0] for a in argv[2:] if a.startswith("--")):
        assert flag in help_text, f"{flag} is not an option of `hashbroker serve` ({help_text})"
    listen_port = int(argv[argv.index("--port") + 1])
    management_port = int(argv[argv.index("--management-port") + 1])
    assert argv[argv.index("--host") + 1] == "0.0.0.0"  # reachable from outside the container
    assert [c for _h, c in host_ports(service)] == [listen_port, management_port]
    volume = service["volumes"][0].split(":")
    assert volume[1] == dockerfile_env()["HASHBROKER_DATA_DIR"]  # the data dir is the volume
    assert volume[0] in load_compose()["volumes"]


def test_rabbitmq_enables_both_plugins_and_ports_differ() -> None:
    services = load_compose()["services"]
    command = " ".join(as_argv(services["rabbitmq"]["command"]))
    assert "rabbitmq_consistent_hash_exchange" in command and "rabbitmq_sharding" in command
    hb = {h for h, _c in host_ports(services["hashbroker"])}
    rmq = {h for h, _c in host_ports(services["rabbitmq"])}
    assert hb and rmq and not hb & rmq, (hb, rmq)
    assert any(c == 5672 for _h, c in host_ports(services["rabbitmq"]))  # its container port


def dockerfile_env() -> dict[str, str]:
    """The run stage's ENV variables (`ENV K=V K=V \\` continued lines)."""
    text = DOCKERFILE.read_text().split("\nFROM python:3.11-slim", 1)[1]
    block = re.search(r"^ENV ((?:.*\\\n)*.*)$", text, re.M)
    assert block, "the run stage sets no ENV"
    return dict(pair.split("=", 1) for pair in block.group(1).replace("\\\n", " ").split())


def test_dockerfile_matches_compose_and_cli() -> None:
    text = DOCKERFILE.read_text()
    # a build stage with a compiler (mypyc compiles the hash core), a slim run stage
    assert re.search(r"^FROM python:3\.11 AS build\s*$", text, re.M)
    assert re.search(r"^FROM python:3\.11-slim\s*$", text, re.M)
    assert re.search(r"^RUN pip wheel --no-deps --wheel-dir /wheels \.", text, re.M)
    assert "hash_implementation() == 'mypyc'" in text  # the image refuses to build without it
    assert "compileall" in text and "PYTHONDONTWRITEBYTECODE" not in text  # starts from bytecode
    cmd = re.search(r"^CMD (\[.*\])\s*$", text, re.M)
    assert cmd, "Dockerfile needs an exec-form CMD"
    argv = json.loads(cmd.group(1))
    assert argv == as_argv(load_compose()["services"]["hashbroker"]["command"])
    exposed = re.search(r"^EXPOSE (.*)$", text, re.M)
    assert exposed
    ports = {argv[argv.index("--port") + 1], argv[argv.index("--management-port") + 1]}
    assert set(exposed.group(1).split()) == ports
    assert re.search(r"^VOLUME /var/lib/hashbroker\s*$", text, re.M)
    assert re.search(r"^HEALTHCHECK ", text, re.M)
    for path in re.findall(r"^COPY (?!--)(\S+)", text, re.M):
        assert (REPO / path).exists(), f"Dockerfile copies {path}, which is not in the repository"


def test_dockerfile_environment_is_valid_settings() -> None:
    """The image's HASHBROKER_* variables parse as the broker's settings, and let guest in from
    outside the container as RabbitMQ's official image does (loopback_users.guest = false)."""
    from broker.runtime.settings import Settings, environment_values

    env = dockerfile_env()
    settings = Settings(**environment_values(env))
    assert settings.loopback_users == []
    assert settings.data_dir == "/var/lib/hashbroker"


def test_no_published_port_collides_with_a_local_rabbitmq() -> None:
    """Both services start beside a RabbitMQ already running on the host (AMQP, management, stream,
    Prometheus ports)."""
    services = load_compose()["services"]
    published = {h for name in ("hashbroker", "rabbitmq") for h, _c in host_ports(services[name])}
    assert not published & {5672, 15672, 5552, 15692}, published


def test_the_build_context_leaves_out_the_virtualenv_and_built_extensions() -> None:
    ignored = {line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()}
    assert {".venv/", ".git/", "**/*.so", "tests/"} <= ignored
