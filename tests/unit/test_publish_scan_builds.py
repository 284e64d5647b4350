"""Both builds of broker/protocol/publish_scan.py (interpreted and mypyc-compiled) take the same publishes.

`broker.protocol.publish_scan` imported directly is always the interpreted module; the compiled twin
is `broker.protocol._publish_scan_native` (built by setup.py). The two are compared on runs of
publishes and on the same runs with octets changed at random (each must stop at the same frame
and take the same messages), and the twin rule is checked: a stale build is never used, and
HASHBROKER_PURE keeps the interpreted one. Under CI (CI=true) without HASHBROKER_PURE the compiled
build must be the one in use, so a compile that failed silently during install is caught.
"""

from __future__ import annotations

import importlib
import os
import random
import types
from pathlib import Path

import pytest
from pamqp import commands, frame, header
from pamqp.body import ContentBody

from broker.protocol import native
from broker.protocol import publish_scan as pure
from broker.protocol.assembler import CommandAssembler
from exchanges import native_twin


def _native() -> types.ModuleType | None:
    try:
        module = importlib.import_module(native.NATIVE_MODULE)
    except ImportError:
        return None
    current = native_twin.source_digest(str(pure.__file__))
    return module if getattr(module, "SOURCE_DIGEST", None) == current else None


NATIVE = _native()
BUILDS = [pytest.param(pure, id="python")] + (
    [pytest.param(NATIVE, id="mypyc")]
    if NATIVE is not None
    else [pytest.param(None, id="mypyc", marks=pytest.mark.skip(reason="no current compiled build"))]
)


def publish(channel: int, exchange: str, key: str, body: bytes, bits: int = 0, **props: object) -> bytes:
    method = commands.Basic.Publish(
        exchange=exchange, routing_key=key, mandatory=bool(bits & 1), immediate=bool(bits & 2)
    )
    return (
        frame.marshal(method, channel)
        + frame.marshal(header.ContentHeader(0, len(body), commands.Basic.Properties(**props)), channel)
        + (frame.marshal(ContentBody(body), channel) if body else b"")
    )


def sample_run() -> bytes:
    return b"".join(
        [
            publish(1, "", "q", b"x" * 16),
            publish(1, "amq.topic", "a.b.c", b"", bits=1),
            publish(2, "ex-1", "k\u00e9" + "k" * 252, b"y" * 300, content_type="text/plain", priority=3),
            publish(1, "", "", b"z", bits=3, headers={"a": 1}),
            publish(2, "", "q2", b"w" * 40),
        ]
    )


@pytest.mark.parametrize("build", BUILDS)
def test_a_run_of_publishes_is_taken_whole(build: types.ModuleType) -> None:
    data = sample_run()
    run = build.scan(data, 0, {1, 2}, {}, 131072, 1 << 27)
    assert [(channel, p[0], p[1][:3], p[2], p[3], p[5]) for _, channel, p in run] == [
        (1, "", "q", False, False, b"x" * 16),
        (1, "amq.topic", "a.b", True, False, b""),
        (2, "ex-1", "k\u00e9k", False, False, b"y" * 300),
        (1, "", "", True, True, b"z"),
        (2, "", "q2", False, False, b"w" * 40),
    ]
    assert run[-1][0] == len(data)
    # the property bytes are the content header's, as received
    assert run[2][2][4] == commands.Basic.Properties(content_type="text/plain", priority=3).marshal()


@pytest.mark.parametrize("build", BUILDS)
def test_the_scan_stops_where_the_shortcut_does_not_apply(build: types.ModuleType) -> None:
    data = sample_run()
    first = len(publish(1, "", "q", b"x" * 16))
    assert build.scan(data, 0, {2}, {}, 131072, 1 << 27) == []  # channel 1 not open
    assert build.scan(data, 0, {1, 2}, {1: object()}, 131072, 1 << 27) == []  # content pending
    second = first + len(publish(1, "amq.topic", "a.b.c", b"", bits=1))
    assert [r[0] for r in build.scan(data, 0, {1, 2}, {}, 131072, 16)] == [first, second]  # 300 > 16
    assert build.scan(data, 0, {1, 2}, {}, 12, 1 << 27) == []  # a header frame above frame_max
    assert build.scan(data[: first - 1], 0, {1}, {}, 131072, 1 << 27) == []  # body not all here
    heartbeat = b"\x08\x00\x00\x00\x00\x00\x00\xce"
    assert len(build.scan(data[:first] + heartbeat + data[first:], 0, {1, 2}, {}, 0, 1 << 27)) == 1


def test_both_builds_agree_on_damaged_runs() -> None:
    if NATIVE is None:
        pytest.skip("no current compiled build")
    rng = random.Random(25)
    data = sample_run()
    for _ in range(3000):
        damaged = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            damaged[rng.randrange(len(damaged))] = rng.choice((0, 1, 2, 3, 0xCE, rng.randrange(256)))
        cut = bytes(damaged[: rng.randint(0, len(damaged))])
        args = (cut, 0, {1, 2}, {}, rng.choice((0, 131072, 100)), 1 << 27)
        assert NATIVE.scan(*args) == pure.scan(*args), cut


@pytest.mark.parametrize("fast", [True, False])
def test_the_assembler_yields_the_same_publishes_either_way(fast: bool) -> None:
    """With the scan (fast) and frame by frame, the same commands in the same order."""
    a = CommandAssembler()
    a.fast = fast
    a.receive_data(b"AMQP\x00\x00\x09\x01")
    list(a.events())
    a.opened(131072, 2047)
    a.channels.update({1, 2})
    data = sample_run()
    a.receive_data(data)
    events = list(a.events())
    assert [(ch, p[:2]) for ch, p in events] == [
        (1, ("", "q")),
        (1, ("amq.topic", "a.b.c")),
        (2, ("ex-1", "k\u00e9" + "k" * 252)),
        (1, ("", "")),
        (2, ("", "q2")),
    ]
    assert a.frames_in == 14


def test_compiled_build_is_active_under_ci() -> None:
    """CI installs with `pip install -e .[dev,spark]`, which must compile the scanner."""
    if os.environ.get("CI") != "true" or native_twin.pure_requested():
        pytest.skip("only under CI=true without HASHBROKER_PURE")
    assert native.IMPLEMENTATION == "mypyc", native.REASON


def test_only_a_twin_built_from_this_source_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A twin stamped with another digest is ignored, one stamped with this source's is taken, and
    HASHBROKER_PURE wins over both."""
    monkeypatch.delenv("HASHBROKER_PURE", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    current = native_twin.source_digest(str(pure.__file__))
    for name, digest, expected in (("stale_twin", "0" * 64, "python"), ("fresh_twin", current, "mypyc")):
        (tmp_path / f"{name}.py").write_text(f"SOURCE_DIGEST = {digest!r}\n")
        module, implementation, reason = native_twin.choose(pure, name, "publish scanner")
        assert implementation == expected, reason
        assert (module is pure) == (expected == "python")
    assert "built from another publish_scan.py" in native_twin.choose(pure, "stale_twin", "scanner")[2]
    assert "no compiled scanner" in native_twin.choose(pure, "absent_twin", "scanner")[2]
    monkeypatch.setenv("HASHBROKER_PURE", "1")
    assert native_twin.choose(pure, "fresh_twin", "scanner")[1] == "python"
