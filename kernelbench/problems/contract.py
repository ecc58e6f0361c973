"""The problem contract, checked when a problem is loaded (never by running it).

A problem file defines ``class Model``, ``def get_inputs()`` and ``def get_init_inputs()``;
that is the whole interface every source, the evaluator and the prompts rely on.
"""

from __future__ import annotations

import ast
import re
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


#: Optional module-level declaration in a problem file: the integer globals to use when the problem is
#: checked on the CPU (e.g. ``CPU_SIZE = {"batch_size": 16, "dim": 1024}``). Built-in problems are sized
#: for an H100; under the Triton interpreter that size takes minutes and gigabytes, so the CPU path may
#: check correctness at this size instead. A result at reduced size is marked and never scored.
REDUCED_SIZE_NAME = "CPU_SIZE"


def reduced_size(code: str) -> dict[str, int] | None:
    """The problem's ``CPU_SIZE`` overrides, or None when it declares none.

    Read from the source (never by running it). Each key must name a module-level integer assignment
    of the problem, so that ``get_inputs``/``get_init_inputs`` (which read those globals at call time)
    honour it; anything else raises ProblemFormatError.
    """
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    ints: set[str] = set()
    decl = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name == REDUCED_SIZE_NAME:
                decl = node.value
            elif isinstance(node.value, ast.Constant) and type(node.value.value) is int:
                ints.add(name)
    if decl is None:
        return None
    try:
        value = ast.literal_eval(decl)
    except ValueError:
        raise ProblemFormatError(f"{REDUCED_SIZE_NAME} must be a literal dict of name -> int") from None
    if not isinstance(value, dict) or not value:
        raise ProblemFormatError(f"{REDUCED_SIZE_NAME} must be a non-empty dict of name -> int")
    for k, v in value.items():
        if not isinstance(k, str) or type(v) is not int or v < 1:
            raise ProblemFormatError(f"{REDUCED_SIZE_NAME}[{k!r}] = {v!r}: expected a positive int")
        if k not in ints:
            raise ProblemFormatError(f"{REDUCED_SIZE_NAME} names {k!r}, which is not a module-level int "
                                     f"of the problem ({', '.join(sorted(ints)) or 'none'})")
    return dict(value)


def apply_reduced_size(code: str, sizes: dict[str, int]) -> str:
    """The problem source with its size globals rebound (appended, so line numbers stay the same)."""
    lines = [f"{k} = {int(v)}" for k, v in sizes.items()]
    return code.rstrip("\n") + "\n\n# reduced size for the CPU path (kernelbench: CPU_SIZE)\n" + "\n".join(lines) + "\n"


def identity_candidate(code: str) -> str:
    """The reference itself as a candidate (``Model`` renamed ``ModelNew``), for measuring the evaluator.

    Every mention is renamed, not only the class line: KernelBench's problems call ``super(Model, self)``,
    which a one-line rename leaves pointing at a name that no longer exists.
    """
    return re.sub(r"\bModel\b", "ModelNew", code)
