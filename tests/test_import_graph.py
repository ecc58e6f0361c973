"""The library's import graph: no cycle inside ``kernelbench``, and no import of the shells around it.

The graph is built from the source (the AST of every module), not by importing anything, so a cycle
that today only bites in one import order is still found. Every import counts wherever it is written:
at the top of a module, inside a function (a lazy import is still a dependency), and
``importlib.import_module("...")`` with a literal name. Imports under ``if TYPE_CHECKING:`` never run
and are left out.

An edge goes to the module named and to the packages above it that importing it runs (``import a.b.c``
runs ``a/__init__`` and ``a/b/__init__``), except the importer's own enclosing packages, which Python
has always started before the importer runs. ``from pkg import name`` goes to ``pkg.name`` when that is
a module, else to ``pkg`` itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = "kernelbench"
#: The shells around the library: they import it, never the other way round (docs/architecture.md).
#: ``kernelbench.cli`` is the ``kernelbench`` command, a shell that ships inside the package.
SHELLS = ("modal_app", "leaderboard", "scripts", "kernelbench.cli")


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def library_modules(root: Path = ROOT, package: str = LIBRARY) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_nodes(tree: ast.AST):
    """Every node, skipping the bodies of ``if TYPE_CHECKING:`` blocks (their ``else`` still runs)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _resolve_relative(importer: str, is_package: bool, level: int, module: str | None) -> str:
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join([*base, *([module] if module else [])])


def imported_names(path: Path, importer: str) -> list[tuple[str, int]]:
    """(fully qualified name, line) for every import the module can run; a ``from`` import gives
    ``pkg.name`` for each name (whether that is a module is decided against the module list)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    out: list[tuple[str, int]] = []
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = (_resolve_relative(importer, is_package, node.level, node.module) if node.level
                    else node.module or "")
            out.append((base, node.lineno))
            out += [(f"{base}.{alias.name}", node.lineno) for alias in node.names if alias.name != "*"]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.append((node.args[0].value, node.lineno))
    return out


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_graph(root: Path = ROOT, package: str = LIBRARY) -> dict[str, dict[str, int]]:
    """Module -> {module it imports (inside the package, or a shell's top name): first line}."""
    modules = library_modules(root, package)
    graph: dict[str, dict[str, int]] = {}
    for importer, path in modules.items():
        own = {*_ancestors(importer), importer}
        edges: dict[str, int] = {}
        for name, line in imported_names(path, importer):
            targets = [*_ancestors(name), name]
            for target in targets:
                if target in own:
                    continue
                if target in modules:
                    edges.setdefault(target, line)
                elif target.split(".")[0] in {s.split(".")[0] for s in SHELLS} and target.split(".")[0] != package:
                    edges.setdefault(target.split(".")[0], line)
        graph[importer] = edges
    return graph


def find_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle (as a closed path) per strongly connected component of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's algorithm; the graph has a few hundred nodes
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in graph:
                continue
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, {}):
                components.append(comp)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return [_cycle_in(sorted(c), graph) for c in components]


def _cycle_in(component: list[str], graph: dict[str, dict[str, int]]) -> list[str]:
    """A shortest closed path through the component's first module (breadth first)."""
    members = set(component)
    start = component[0]
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    return [*paths[v], start]
                if w in members and w not in paths:
                    paths[w] = [*paths[v], w]
                    nxt.append(w)
        frontier = nxt
    return component  # unreachable for a strongly connected component


def describe_cycle(cycle: list[str], graph: dict[str, dict[str, int]]) -> str:
    return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"


def shell_imports(graph: dict[str, dict[str, int]]) -> list[str]:
    """``importer line N imports shell`` for every library module (outside the CLI) that imports a shell."""
    out = []
    for importer, edges in sorted(graph.items()):
        if any(importer == s or importer.startswith(s + ".") for s in SHELLS):
            continue
        for target, line in sorted(edges.items()):
            if any(target == s or target.startswith(s + ".") for s in SHELLS):
                out.append(f"{importer} (line {line}) imports {target}")
    return out


# ------------------------------------------------------------------------------------------------ tests
def test_the_library_has_no_import_cycle():
    graph = import_graph()
    cycles = find_cycles(graph)
    assert not cycles, "import cycles in kernelbench:\n" + "\n".join(describe_cycle(c, graph) for c in cycles)


def test_the_library_never_imports_a_shell():
    bad = shell_imports(import_graph())
    assert not bad, "kernelbench imports the shells around it:\n" + "\n".join(bad)


def test_the_graph_is_built_from_source(tmp_path):
    """The detector itself: a lazy import and an ``import_module`` count, ``TYPE_CHECKING`` does not."""
    pkg = tmp_path / "kernelbench"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from kernelbench.sub.b import B\n")
    (pkg / "a.py").write_text("def f():\n    from kernelbench.sub import b\n")
    (pkg / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kernelbench import c\n"
        "from . import helper\nB = 1\n")
    (pkg / "sub" / "helper.py").write_text("import importlib\nimportlib.import_module('kernelbench.a')\n")
    (pkg / "c.py").write_text("import kernelbench.sub.b\nimport modal_app.app\n")
    graph = import_graph(tmp_path)
    assert graph["kernelbench.sub.b"] == {"kernelbench.sub.helper": 4}
    assert set(graph["kernelbench.a"]) == {"kernelbench.sub", "kernelbench.sub.b"}
    cycles = find_cycles(graph)
    assert cycles == [["kernelbench.a", "kernelbench.sub.b", "kernelbench.sub.helper", "kernelbench.a"]]
    assert "kernelbench.sub.helper (line 2) -> kernelbench.a" in describe_cycle(cycles[0], graph)
    assert shell_imports(graph) == ["kernelbench.c (line 2) imports modal_app"]
