"""The problem contract, checked when a problem is loaded (never by running it).

A problem file defines ``class Model``, ``def get_inputs()`` and ``def get_init_inputs()``;
that is the whole interface every source, the evaluator and the prompts rely on.
"""

from __future__ import annotations

import ast
import sys

from kernelbench.errors import ProblemFormatError

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")

# Imports that every evaluation environment has; anything else is an extra requirement.
_ALWAYS_AVAILABLE = {"torch", "numpy", "math", "triton", "kernelbench", "__future__", "typing"}


def _defined_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    names.add(t.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
    return names


def imported_modules(tree: ast.AST) -> set[str]:
    """Top-level package names a module imports, anywhere in its body."""
    mods: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            mods.add(node.module.split(".")[0])
    return mods


def extra_requirements(code: str) -> tuple[str, ...]:
    """Third-party packages beyond the evaluator's own that a problem needs (e.g. transformers)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return ()
    stdlib = getattr(sys, "stdlib_module_names", frozenset())
    extra = sorted(m for m in imported_modules(tree) if m not in _ALWAYS_AVAILABLE and m not in stdlib)
    return tuple(extra)


def check_problem_code(code: str, where: str) -> None:
    """Raise ProblemFormatError naming ``where`` if the code breaks the problem contract."""
    try:
        tree = ast.parse(code, filename=where)
    except SyntaxError as e:
        raise ProblemFormatError(f"{where}: not valid Python (line {e.lineno}: {e.msg})") from None
    missing = [n for n in REQUIRED_NAMES if n not in _defined_names(tree)]
    if missing:
        raise ProblemFormatError(
            f"{where}: not a KernelBench problem, it does not define {', '.join(missing)} "
            f"(a problem defines class Model, get_inputs() and get_init_inputs())"
        )
