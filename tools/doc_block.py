"""The one way the doc generators in tools/ rewrite a generated block of a Markdown file.

A block sits between `<!-- NAME -->` and `<!-- /NAME -->`; a generator builds its content and
calls `run`, which writes the file, or with `--check` only says whether it is current. The unit
tests call each generator's `render` and compare with the file as committed.
"""

from __future__ import annotations

import sys
from pathlib import Path


def replace_block(text: str, name: str, content: str) -> str:
    """`text` with the block `name` holding `content` (the markers kept)."""
    begin, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{content}\n{end}{tail}"


def run(doc: Path, name: str, content: str, script: str) -> int:
    """Write the block into `doc`; with `--check` on the command line, exit 1 if it is stale."""
    current = doc.read_text(encoding="utf-8")
    wanted = replace_block(current, name, content)
    if "--check" in sys.argv:
        if current != wanted:
            print(f"{doc} is out of date: run python {script}", file=sys.stderr)
            return 1
        return 0
    doc.write_text(wanted, encoding="utf-8")
    return 0
