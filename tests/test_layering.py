"""Imports run one way (docs/ARCHITECTURE.md, "Import direction"): every import of utils/ and solutions/
read with ast, those inside functions included.

Rooms: the library (utils/*.py, utils/kernelbench/), utils/report/, utils/chapters/ and solutions/.
- The library imports nothing from report, chapters or solutions.
- report imports the library only (and itself); solutions import the library only (and themselves).
- chapters may import all of them.
- No cycle between modules, of any length.
- No project import hides inside a function: one there says why on its line or the line above (a comment),
  e.g. an import made for its side effect only where it is needed.
Each failure names the module, the line and the arrow.
"""
from __future__ import annotations

import ast
from pathlib import Path

from utils import REPO

ROOMS_ALLOWED = {  # room -> the rooms it may import
    "library": {"library"},
    "report": {"library", "report"},
    "solutions": {"library", "solutions"},
    "chapters": {"library", "report", "solutions", "chapters"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    paths = [*(REPO / "utils").rglob("*.py"), *(REPO / "solutions").glob("*.py")]
    return {_module_name(p): p for p in paths if "__pycache__" not in p.parts}


def room(module: str) -> str:
    if module == "solutions" or module.startswith("solutions."):
        return "solutions"
    if module == "utils.chapters" or module.startswith("utils.chapters."):
        return "chapters"
    if module == "utils.report" or module.startswith("utils.report."):
        return "report"
    return "library"


def _imports(module: str, path: Path, known: set[str]) -> list[tuple[str, int, bool, str]]:
    """(imported module, line, inside a function, the line's text) for every project import of a module."""
    source = path.read_text()
    lines = source.splitlines()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            targets: list[str] = []
            if isinstance(child, ast.Import):
                targets = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                # `from utils import ops` imports the module utils.ops; `from utils import REPO` the package
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in child.names]
            for target in dict.fromkeys(targets):
                if target.split(".")[0] in ("utils", "solutions"):
                    found.append((target, child.lineno, in_function, lines[child.lineno - 1]))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(source), False)
    return found


def _graph() -> tuple[dict[str, set[str]], dict[str, list[tuple[str, int, bool, str]]]]:
    modules = _modules()
    known = set(modules)
    imports = {m: _imports(m, p, known) for m, p in modules.items()}
    graph = {m: {t for t, *_ in found if t in known and t != m} for m, found in imports.items()}
    return graph, imports


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def _a_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One closed path through a strongly connected component, to name the arrows."""
    members = set(component)
    path = [component[0]]
    while True:
        nxt = sorted(graph[path[-1]] & members)
        step = next((m for m in nxt if m in path), nxt[0])
        if step in path:
            return path[path.index(step):] + [step]
        path.append(step)


def test_the_rooms_import_one_way():
    _, imports = _graph()
    upward = [f"{m}:{line}: {room(m)} imports {t} ({room(t)})   {text.strip()}"
              for m, found in sorted(imports.items()) for t, line, _, text in found
              if room(t) not in ROOMS_ALLOWED[room(m)]]
    assert not upward, "imports against the direction (library <- report, solutions <- chapters):\n  " + "\n  ".join(upward)


def test_no_module_cycle():
    graph, _ = _graph()
    cycles = [" -> ".join(_a_cycle(graph, c)) + f"   (all of: {', '.join(c)})" for c in _cycles(graph)]
    assert not cycles, "import cycles:\n  " + "\n  ".join(cycles)


def test_no_import_hides_in_a_function():
    _, imports = _graph()
    modules = _modules()
    hidden = []
    for m, found in sorted(imports.items()):
        lines = modules[m].read_text().splitlines()
        for t, line, in_function, text in found:
            if not in_function:
                continue
            above = lines[line - 2].strip() if line >= 2 else ""
            if "#" not in text and not above.startswith("#"):
                hidden.append(f"{m}:{line}: {text.strip()}")
    assert not hidden, ("imports inside functions without a comment saying why (move them to the top of the "
                        "module):\n  " + "\n  ".join(hidden))


def test_the_test_sees_an_upward_arrow_and_a_cycle(tmp_path):
    """The checks themselves: a library module importing a chapter is upward, and a two-module loop is a cycle."""
    assert "chapters" not in ROOMS_ALLOWED[room("utils.results")]
    assert room("utils.chapters.session") == "chapters" and room("utils.report.readme") == "report"
    assert room("solutions.p094_gemm_biasadd_hardtanh_mish_groupnorm") == "solutions"
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _a_cycle(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]
    module = tmp_path / "m.py"
    module.write_text("from utils import env\n\ndef f():\n    from utils import results\n    import utils.ops  # for its side effect\n")
    found = _imports("utils.m", module, {"utils.env", "utils.results", "utils.ops"})
    assert [(t, line, inside) for t, line, inside, _ in found] == [
        ("utils.env", 1, False), ("utils.results", 4, True), ("utils.ops", 5, True)]


def test_a_module_over_600_lines_says_why_in_its_first_lines():
    long = {}
    for path in sorted((REPO / "utils").rglob("*.py")):
        lines = path.read_text().splitlines()
        if len(lines) > 600 and not any("Over 600 lines" in line for line in lines[:8]):
            long[str(path.relative_to(REPO))] = len(lines)
    assert not long, f"modules over ~600 lines that do not say why in their first lines (or split them): {long}"
