"""Hand-written worked solutions for the built-in suite: the demo, test fixtures and a reference entry.

A solution is a candidate source exactly as an LLM would submit it: a file that defines
``ModelNew`` for one problem. They live at ``<backend>/level<L>/<id>_<Name>.py`` beside this
module and are package data, read as text and never imported as part of the package (their names
start with a digit on purpose, like the problems they answer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kernelbench.backends import solution_backends

_FILE_RE = re.compile(r"^(\d+)_(.+)\.py$")
_LEVEL_RE = re.compile(r"^level(\d+)$")


@dataclass(frozen=True)
class Solution:
    """One worked solution: which problem it answers, in which backend, and where its source is."""

    level: int
    problem_id: int
    name: str
    backend: str
    path: Path

    @property
    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def key(self) -> str:
        """The submission key (sample 0), matching ``level_<L>_problem_<P>_sample_<S>``."""
        return f"level_{self.level}_problem_{self.problem_id}_sample_0"


def solutions_root() -> Path:
    return Path(str(resources.files("kernelbench.solutions")))


def list_solutions(backend: str | None = None, level: int | None = None) -> list[Solution]:
    """All worked solutions, ordered by (backend, level, id); a bad backend name is an error.

    The backends are those whose spec says they have worked solutions (:func:`kernelbench.backends.solution_backends`).
    """
    backends = solution_backends()
    if backend is not None and backend not in backends:
        raise ValueError(f"no worked solutions for backend {backend!r} (available: {', '.join(backends)})")
    out: list[Solution] = []
    root = solutions_root()
    for be in backends if backend is None else (backend,):
        be_dir = root / be
        if not be_dir.is_dir():
            continue
        for level_dir in sorted(be_dir.iterdir()):
            m = _LEVEL_RE.match(level_dir.name)
            if not m or not level_dir.is_dir() or (level is not None and int(m.group(1)) != level):
                continue
            for f in sorted(level_dir.iterdir()):
                fm = _FILE_RE.match(f.name)
                if fm:
                    out.append(Solution(int(m.group(1)), int(fm.group(1)), f.stem, be, f))
    return sorted(out, key=lambda s: (s.backend, s.level, s.problem_id))


def get_solution(level: int, problem_id: int, backend: str) -> Solution:
    """The worked solution for one problem; a missing one raises LookupError naming it."""
    for s in list_solutions(backend, level):
        if s.problem_id == problem_id:
            return s
    raise LookupError(f"no worked {backend} solution for level {level} problem {problem_id}")


def submission_kernels(backend: str) -> dict[str, str]:
    """The solutions of one backend as a submission's ``kernels`` mapping (key -> source)."""
    return {s.key: s.source for s in list_solutions(backend)}


__all__ = ["Solution", "get_solution", "list_solutions", "solutions_root", "submission_kernels"]
