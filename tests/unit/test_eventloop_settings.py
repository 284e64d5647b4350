"""The loop and collector choices of `broker.runtime.eventloop` (what `hashbroker serve` runs on)."""

from __future__ import annotations

import asyncio
import gc
import sys

import pytest

from broker.runtime import eventloop


def test_asyncio_when_asked_or_without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HASHBROKER_LOOP", "asyncio")
    assert eventloop.loop_factory() == ("asyncio", None)
    monkeypatch.delenv("HASHBROKER_LOOP")
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if not installed: importing it fails
    assert eventloop.loop_factory() == ("asyncio", None)

    async def which() -> str:
        return eventloop.loop_name(asyncio.get_running_loop())

    assert eventloop.run(which()) == "asyncio"


def test_uvloop_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("uvloop", reason="uvloop is not installed (pip install 'hashbroker[uvloop]')")
    monkeypatch.delenv("HASHBROKER_LOOP", raising=False)
    name, factory = eventloop.loop_factory()
    assert name == "uvloop" and factory is not None

    async def which() -> str:
        return eventloop.loop_name(asyncio.get_running_loop())

    assert eventloop.run(which()) == "uvloop"


def test_settled_collector_freezes_start_up_and_collects_young_objects_less_often() -> None:
    before = gc.get_threshold()
    try:
        eventloop.settle_collector()
        assert gc.get_threshold() == (eventloop.GEN0_THRESHOLD, before[1], before[2])
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
