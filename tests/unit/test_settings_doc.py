"""docs/running.md's settings table is what tools/gen_settings_doc.py writes from the settings model."""

from __future__ import annotations

import runpy
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_settings_table_is_current() -> None:
    generator = runpy.run_path(str(REPO / "tools" / "gen_settings_doc.py"))
    doc = REPO / "docs" / "running.md"
    current = doc.read_text(encoding="utf-8")
    assert generator["render"](current) == current, "run: python tools/gen_settings_doc.py"


def test_every_setting_has_a_row_and_a_meaning() -> None:
    generator = runpy.run_path(str(REPO / "tools" / "gen_settings_doc.py"))
    rows = [line for line in generator["table"]().splitlines()[2:]]
    names = [row.split("`")[1] for row in rows]
    from broker.runtime.settings import Settings

    assert names == list(Settings.model_fields)
    assert all(not row.endswith("|  |") for row in rows), "a setting without a docstring"
