"""Writes the settings table of docs/running.md from the settings model and the `serve` parser.

The table sits between `<!-- settings-table -->` markers; `tests/unit/test_generated_docs.py` fails
when it is not what this script would write, so a setting cannot be added, renamed or re-defaulted
without its documentation following. Run: `python tools/gen_settings_doc.py` (`--check` to compare only).
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import io
import re
import sys
from pathlib import Path
from typing import Literal, get_args, get_origin

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run_path (the unit test) adds nothing

from doc_block import replace_block, run

from broker.cli.main import build_parser
from broker.runtime import settings as settings_module
from broker.runtime.settings import ENV_PREFIX, Settings

DOC = Path(__file__).resolve().parents[1] / "docs" / "running.md"
BLOCK = "settings-table"


def attribute_docstrings() -> dict[str, str]:
    """Each field's docstring (the string literal right under it in the class body), one line."""
    tree = ast.parse(inspect.getsource(settings_module))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Settings")
    docs: dict[str, str] = {}
    for prev, node in zip(cls.body, cls.body[1:], strict=False):
        if (
            isinstance(prev, ast.AnnAssign)
            and isinstance(prev.target, ast.Name)
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            docs[prev.target.id] = " ".join(node.value.value.split())
    return docs


def serve_flags() -> set[str]:
    """The flags `hashbroker serve --help` lists."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        build_parser("serve").parse_args(["serve", "--help"])
    return set(re.findall(r"--[a-z][a-z-]*", out.getvalue()))


def type_text(annotation: object) -> str:
    """A field's type as a reader wants it: the allowed values of a Literal, else the type's name."""
    if get_origin(annotation) is Literal:
        return " / ".join(f'"{v}"' for v in get_args(annotation))
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


def default_text(name: str) -> str:
    field = Settings.model_fields[name]
    value = field.get_default(call_default_factory=True)
    return "none" if value is None else f"`{value!r}`".replace("|", "\\|")


def table() -> str:
    docs = attribute_docstrings()
    flags = serve_flags()
    rows = ["| setting | default | environment | `serve` flag | meaning |", "|---|---|---|---|---|"]
    for name, field in Settings.model_fields.items():
        kind = type_text(field.annotation)
        meaning = docs.get(name) or field.description or ""
        wanted = "--" + name.replace("_", "-")
        flag = f"`{wanted}`" if wanted in flags else ""
        env = f"`{ENV_PREFIX}{name.upper()}`"
        kind = kind.replace("|", "\\|")
        rows.append(f"| `{name}` ({kind}) | {default_text(name)} | {env} | {flag} | {meaning} |")
    return "\n".join(rows)


def render(text: str) -> str:
    return replace_block(text, BLOCK, table())


def main() -> int:
    return run(DOC, BLOCK, table(), "tools/gen_settings_doc.py")


if __name__ == "__main__":
    sys.exit(main())
