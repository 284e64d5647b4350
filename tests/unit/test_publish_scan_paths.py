"""The two scans in broker/protocol/publish_scan.py take the same publishes, and each build runs its own.

The module holds an octet-by-octet scan (cheapest once mypyc compiled it) and a struct-based one
(cheapest interpreted), and `scan` is the one that suits how the module runs. Both are run here
interpreted, on the runs of test_publish_scan_builds and on the same runs damaged at random, so
the struct scan is checked against the octet one even where no compiled build exists.
"""

from __future__ import annotations

import random

import pytest

from broker.protocol import publish_scan as pure
from tests.unit.test_publish_scan_builds import NATIVE, publish, sample_run


def test_each_build_runs_the_scan_that_suits_it() -> None:
    assert pure.COMPILED is False
    assert pure.scan is pure._scan_struct
    if NATIVE is None:
        pytest.skip("no current compiled build")
    assert NATIVE.COMPILED is True
    assert NATIVE.scan is NATIVE._scan_octets


@pytest.mark.parametrize("limit", [0, 131072, 100, 12])
@pytest.mark.parametrize("max_size", [1 << 27, 16, 0])
def test_both_scans_agree_on_whole_runs(limit: int, max_size: int) -> None:
    data = sample_run() + publish(1, "", "q", b"") + b"\x08\x00\x00\x00\x00\x00\x00\xce"
    for pos in range(len(data)):
        for channels in ({1, 2}, {1}, {2}):
            args = (data, pos, channels, {}, limit, max_size)
            assert pure._scan_struct(*args) == pure._scan_octets(*args), (pos, channels)
    assert pure._scan_struct(data, 0, {1, 2}, {2: object()}, 0, 1 << 27) == pure._scan_octets(
        data, 0, {1, 2}, {2: object()}, 0, 1 << 27
    )


def test_both_scans_agree_on_damaged_runs() -> None:
    rng = random.Random(2025)
    data = sample_run()
    taken = 0
    for _ in range(4000):
        damaged = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            damaged[rng.randrange(len(damaged))] = rng.choice((0, 1, 2, 3, 0xCE, 60, 40, rng.randrange(256)))
        cut = bytes(damaged[: rng.randint(0, len(damaged))])
        args = (cut, 0, {1, 2}, {}, rng.choice((0, 131072, 100)), 1 << 27)
        octets = pure._scan_octets(*args)
        assert pure._scan_struct(*args) == octets, cut
        taken += len(octets)
    assert taken > 1000  # the damage leaves whole publishes to take, not only stops
