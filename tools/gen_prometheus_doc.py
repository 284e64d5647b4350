"""Writes the list of Prometheus families hashbroker leaves out, with their reasons, into
docs/policies-and-plugins.md from `broker.plugins.prometheus.OMITTED`.

The list sits between `<!-- prometheus-omitted -->` markers; `tests/unit/test_prometheus_doc.py`
fails when it is not what this script would write, so a family cannot be left out (or served
again) without the documentation following. Run: `python tools/gen_prometheus_doc.py` (`--check`
to compare only).
"""

from __future__ import annotations

import sys
from pathlib import Path

from broker.plugins.prometheus import OMITTED

DOC = Path(__file__).resolve().parents[1] / "docs" / "policies-and-plugins.md"
BEGIN, END = "<!-- prometheus-omitted -->", "<!-- /prometheus-omitted -->"


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
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{listing()}\n{END}{tail}"


def main() -> int:
    current = DOC.read_text(encoding="utf-8")
    wanted = render(current)
    if "--check" in sys.argv:
        if current != wanted:
            print(f"{DOC} is out of date: run python tools/gen_prometheus_doc.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
