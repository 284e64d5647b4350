"""The code's shape, checked: the layer contracts (import-linter) and no import cycle.

The contract lives in pyproject.toml ([tool.importlinter]); `lint-imports` checks it here and in CI.
Imports inside functions count; imports under `if TYPE_CHECKING:` do not.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("amqpwire", "exchanges", "broker", "spark_bridge")
ALLOWED_CYCLES: frozenset[frozenset[str]] = frozenset()


def product_modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            name = ".".join(path.relative_to(REPO).with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    return modules


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the product modules it imports (anywhere but TYPE_CHECKING blocks).

    A package importing its own submodules (a facade) is not counted: that alone is no cycle.
    """

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets: set[str] = set()
        pending: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"))]
        while pending:
            node = pending.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and _is_type_checking(child):
                    pending.extend(child.orelse)
                    continue
                if isinstance(child, ast.Import):
                    targets.update(t for a in child.names if (t := resolve(a.name)))
                elif isinstance(child, ast.ImportFrom):
                    base = child.module or ""
                    if child.level:
                        parts = package.split(".")
                        parts = parts[: len(parts) - (child.level - 1)]
                        base = ".".join([*parts, base] if base else parts)
                    for alias in child.names:
                        target = resolve(f"{base}.{alias.name}") or resolve(base)
                        if target:
                            targets.add(target)
                pending.append(child)
        graph[module] = {t for t in targets if t != module and not t.startswith(module + ".")}
    return graph


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: set[frozenset[str]] = set()
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            if children:
                child = children.pop()
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, sorted(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.add(frozenset(component))
    return found


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"f"}, "f": {"e"}, "g": set()}
    assert cycles(graph) == {frozenset("abc"), frozenset("ef")}


def test_no_import_cycle_beyond_the_allow_list() -> None:
    found = cycles(import_graph(product_modules()))
    assert not found - ALLOWED_CYCLES, f"new import cycles: {sorted(map(sorted, found - ALLOWED_CYCLES))}"
    fixed = ALLOWED_CYCLES - found
    assert not fixed, f"these cycles are gone: remove them from ALLOWED_CYCLES: {sorted(map(sorted, fixed))}"


def lint_imports_command() -> list[str]:
    """`lint-imports` of this interpreter's environment (a dev dependency: pip install -e '.[dev]')."""
    beside = Path(sys.executable).with_name("lint-imports")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("lint-imports")
    if found:
        return [found]
    return [
        sys.executable,
        "-c",
        "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())",
    ]


def test_layer_contract_holds() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [*lint_imports_command(), "--no-cache"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "No module named 'importlinter'" not in result.stderr, (
        "import-linter is a dev dependency: pip install -e '.[dev]'"
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_the_session_reaches_the_server_only_through_its_ports() -> None:
    """Nothing in broker/session names the Broker or reads a `.store` attribute: what the session
    needs from above is in broker/session/ports.py, what the store keeps through the entities'
    persistence or the ports' MessageLedger."""
    offenders: list[str] = []
    for path in sorted((REPO / "broker" / "session").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id == "Broker":
                offenders.append(f"{path.name}:{node.lineno} names Broker")
            elif isinstance(node, ast.ImportFrom) and node.module == "broker.server":
                offenders.append(f"{path.name}:{node.lineno} imports broker.server")
            elif isinstance(node, ast.Attribute) and node.attr == "store":
                offenders.append(f"{path.name}:{node.lineno} reads .store")
    assert not offenders, offenders


def test_the_channel_composes_its_parts_instead_of_inheriting_them() -> None:
    """The channel owns its parts (unacked, confirms, transaction, limiter, consumers): no mixin
    chain, and nothing in broker/session reaches into another class's private members."""
    from broker.session.channel import Channel

    assert Channel.__bases__ == (object,)
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", "SLF001", "broker/session"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout[-2000:]
