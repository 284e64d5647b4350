"""Writes the list of Prometheus families hashbroker leaves out, with their reasons, into
docs/policies-and-plugins.md from `broker.plugins.prometheus.OMITTED`.

The list sits between `<!-- prometheus-omitted -->` markers; `tests/unit/test_generated_docs.py`
fails when it is not what this script would write, so a family cannot be left out (or served
again) without the documentation following. Run: `python tools/gen_prometheus_doc.py` (`--check`
to compare only).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run_path (the unit test) adds nothing

from doc_block import replace_block, run

from broker.plugins.prometheus import OMITTED

DOC = Path(__file__).resolve().parents[1] / "docs" / "policies-and-plugins.md"
BLOCK = "prometheus-omitted"


def listing() -> str:
    """One bullet per reason, naming its families (in the order OMITTED gives them)."""
    by_reason: dict[str, list[str]] = {}
    for name, reason in OMITTED.items():
        by_reason.setdefault(reason, []).append(name)
    lines = [f"{len(OMITTED)} families of 3.10.8's three endpoints are left out on purpose:"]
    for reason, names in by_reason.items():
        shown = ", ".join(f"`{n}`" for n in names)
        lines.append(f"- {reason} ({len(names)}): {shown}")
    return "\n".join(lines)


def render(text: str) -> str:
    return replace_block(text, BLOCK, listing())


def main() -> int:
    return run(DOC, BLOCK, listing(), "tools/gen_prometheus_doc.py")


if __name__ == "__main__":
    sys.exit(main())
