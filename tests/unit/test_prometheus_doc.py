"""docs/policies-and-plugins.md lists exactly the Prometheus families hashbroker leaves out."""

from __future__ import annotations

import runpy
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_omitted_families_list_is_current() -> None:
    generator = runpy.run_path(str(REPO / "tools" / "gen_prometheus_doc.py"))
    doc = REPO / "docs" / "policies-and-plugins.md"
    current = doc.read_text(encoding="utf-8")
    assert generator["render"](current) == current, "run: python tools/gen_prometheus_doc.py"


def test_every_omitted_family_has_a_reason() -> None:
    from broker.plugins.prometheus import OMITTED

    assert OMITTED and all(reason.strip() for reason in OMITTED.values())
