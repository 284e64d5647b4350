"""docs/running.md's settings table has a row, with its meaning, for every setting (that the table
is current: tests/unit/test_generated_docs.py)."""

from __future__ import annotations

import runpy
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_setting_has_a_row_and_a_meaning() -> None:
    generator = runpy.run_path(str(REPO / "tools" / "gen_settings_doc.py"))
    rows = [line for line in generator["table"]().splitlines()[2:]]
    names = [row.split("`")[1] for row in rows]
    from broker.runtime.settings import Settings

    assert names == list(Settings.model_fields)
    assert all(not row.endswith("|  |") for row in rows), "a setting without a docstring"
