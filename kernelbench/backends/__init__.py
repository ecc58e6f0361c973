"""Kernel backends (cuda, triton, cute, tilelang, torch): one :class:`BackendSpec` each, in one registry.

Everything that differs by backend reads the spec: settings validation and the ``--backend`` choices
(:func:`backend_names`), the static guard's conformity checks, the runtime guard's kernel names, the
worker's environment, prompts (:func:`prompt_backends`), worked solutions and the leaderboard
(:func:`submission_backends`). :func:`detect_backend` is the one place a backend is guessed from a
source. Adding a backend touches :mod:`kernelbench.backends.builtin` and the backend's own files
(docs/architecture.md, "Registries").

Imports only the standard library and :mod:`kernelbench.registry`, so the command line's ``--help`` stays light
and every layer (guards, evaluator, prompts, leaderboard) may import it without a cycle.
"""

from __future__ import annotations

import ast
from contextlib import AbstractContextManager

from kernelbench.backends.builtin import BUILTIN, DEFAULT_BACKEND
from kernelbench.backends.spec import BackendSpec, Detection, PromptSpec, Ref, resolve
from kernelbench.errors import KernelBenchError
from kernelbench.registry import Registry


class UnknownBackendError(KernelBenchError, ValueError):
    """The backend named is not registered; the message lists those that are."""


REGISTRY: Registry[BackendSpec] = Registry("backend", UnknownBackendError)
for _spec in BUILTIN:
    REGISTRY.register(_spec)


def get_backend(name: str) -> BackendSpec:
    """The spec of ``name``; raises :class:`UnknownBackendError` ("... (available: cuda, cute, tilelang, torch, triton)")."""
    return REGISTRY.get(name)


def backend_names() -> tuple[str, ...]:
    """Every registered backend, sorted: what ``--backend`` and the settings accept."""
    return REGISTRY.names()


def all_backends() -> tuple[BackendSpec, ...]:
    return REGISTRY.items()


def prompt_backends() -> tuple[str, ...]:
    """Backends generation has a prompt template for."""
    return tuple(s.name for s in REGISTRY.items() if s.prompt is not None)


def solution_backends() -> tuple[str, ...]:
    """Backends with hand-written worked solutions (``kernelbench/solutions/<name>/``)."""
    return tuple(s.name for s in REGISTRY.items() if s.worked_solutions)


def submission_backends() -> tuple[str, ...]:
    """Backends a leaderboard submission may declare."""
    return tuple(s.name for s in REGISTRY.items() if s.submissions)


def register_backend(spec: BackendSpec, replace: bool = False) -> BackendSpec:
    """Add a backend for the rest of the process (a plug-in); see :func:`backend_registered` for a block."""
    return REGISTRY.register(spec, replace=replace)


def unregister_backend(name: str) -> BackendSpec:
    return REGISTRY.unregister(name)


def backend_registered(spec: BackendSpec) -> AbstractContextManager[BackendSpec]:
    """``with backend_registered(spec): ...``: the backend exists inside the block only."""
    return REGISTRY.registered(spec)


# ------------------------------------------------------------------------------------------- detection
def _source_facts(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(modules imported, names used as a name or an attribute) of a parsed source."""
    imported: set[str] = set()
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported.add(node.module)
            imported.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
    return imported, used


def detect_backend(source: str) -> str | None:
    """The backend a candidate's source is written for, read from its imports and names, or None.

    None when the source does not parse or no backend marks it (plain PyTorch, or no kernel at all);
    a caller that needs a backend then uses its own declared one, else :data:`DEFAULT_BACKEND`
    (``detect_backend(src) or DEFAULT_BACKEND``). When several backends mark a source, the highest
    :attr:`Detection.precedence` wins (a CUDA extension beside Triton code is cuda). The leaderboard
    (metadata-less submissions, the backend-mismatch warning) and ``kernelbench guard`` use this
    function; the evaluator never guesses: it evaluates the backend the job names.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return None
    imported, used = _source_facts(tree)
    marked = [s for s in REGISTRY.items() if s.detection is not None and s.detection.marks(imported, used)]
    if not marked:
        return None
    return max(marked, key=lambda s: s.detection.precedence).name  # type: ignore[union-attr]


__all__ = [
    "DEFAULT_BACKEND", "REGISTRY", "BackendSpec", "Detection", "PromptSpec", "Ref", "UnknownBackendError",
    "all_backends", "backend_names", "backend_registered", "detect_backend", "get_backend", "prompt_backends",
    "register_backend", "resolve", "solution_backends", "submission_backends", "unregister_backend",
]
