"""HASHBROKER_NODES takes the same comma-separated list as `--nodes` (or a JSON list)."""

from __future__ import annotations

import pytest

from broker.runtime.settings import Settings, SettingsError


@pytest.mark.parametrize(
    ("env", "nodes"),
    [
        ("rabbit@a,rabbit@b,rabbit@c", ["rabbit@a", "rabbit@b", "rabbit@c"]),
        (" rabbit@a , rabbit@b ,", ["rabbit@a", "rabbit@b"]),
        ("rabbit@solo", ["rabbit@solo"]),
        ('["rabbit@a", "rabbit@b"]', ["rabbit@a", "rabbit@b"]),
    ],
)
def test_nodes_from_environment(monkeypatch: pytest.MonkeyPatch, env: str, nodes: list[str]) -> None:
    monkeypatch.setenv("HASHBROKER_NODES", env)
    assert Settings.load().nodes == nodes


def test_nodes_default_and_explicit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HASHBROKER_NODES", raising=False)
    assert Settings.load().nodes == ["rabbit@localhost"]
    monkeypatch.setenv("HASHBROKER_NODES", "rabbit@env")
    assert Settings.load(nodes=["rabbit@flag"]).nodes == ["rabbit@flag"]  # the flag beats the env


def test_nodes_empty_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HASHBROKER_NODES", " , ")
    with pytest.raises(SettingsError):
        Settings.load()


def test_nodes_reach_the_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    from broker.embedded import BrokerThread

    monkeypatch.setenv("HASHBROKER_NODES", "rabbit@x,rabbit@y")
    with BrokerThread(port=0) as bt:
        assert bt.broker.policies.cluster.nodes == ["rabbit@x", "rabbit@y"]
