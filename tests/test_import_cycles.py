"""No import cycle in the package: every module's imports at module level (those under
``if TYPE_CHECKING:`` too) form a graph without a cycle. An import inside a function is
left out: it runs after both modules are loaded."""

from __future__ import annotations

import ast
from pathlib import Path

import ledger_stream

ROOT = Path(ledger_stream.__file__).parent


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = ["ledger_stream", *path.relative_to(ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _top_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If | ast.Try):  # TYPE_CHECKING blocks, optional imports
            pending.extend([*node.body, *node.orelse,
                            *(s for h in getattr(node, "handlers", []) for s in h.body)])
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _top_level_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                                    + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in node.names]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of ``graph``, or []."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return []


def test_the_package_has_no_import_cycle() -> None:
    cycle = _cycle(_graph())
    assert not cycle, "import cycle: " + " -> ".join(cycle)


def test_the_check_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) == []
