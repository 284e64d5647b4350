"""Each generated block of the docs is what its tools/ generator writes today: a setting, or a
Prometheus family left out, cannot change without its documentation following."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("generator", "doc"),
    [("gen_settings_doc.py", "running.md"), ("gen_prometheus_doc.py", "policies-and-plugins.md")],
)
def test_the_generated_block_is_current(generator: str, doc: str) -> None:
    render = runpy.run_path(str(REPO / "tools" / generator))["render"]
    current = (REPO / "docs" / doc).read_text(encoding="utf-8")
    assert render(current) == current, f"run: python tools/{generator}"


def test_every_omitted_prometheus_family_has_a_reason() -> None:
    from broker.plugins.prometheus import OMITTED

    assert OMITTED and all(reason.strip() for reason in OMITTED.values())
