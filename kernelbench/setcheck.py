"""Refuse to score a run or use a baseline made on another problem set.

Each check raises :class:`ProblemSetMismatchError` naming the first problems that differ, before
anything is scored or written, so a wrong pairing is one clear error instead of quietly wrong numbers.
"""

from __future__ import annotations

from collections.abc import Iterable

from kernelbench.baselines.format import Baseline
from kernelbench.problems.identity import (
    ProblemSetIdentity,
    ProblemSetMismatchError,
    check_names,
    check_same_set,
    problem_ref,
)
from kernelbench.problems.model import ProblemSet
from kernelbench.results import KernelResult

SHOWN = 5


def _first(items: list[str]) -> str:
    more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more


def check_run(identity: ProblemSetIdentity, problems: ProblemSet, results: Iterable[KernelResult],
              recorded: ProblemSetIdentity | None, what: str) -> None:
    """The run's recorded set (from its run.json, if any), and the problems its results name, must be
    those of ``problems``.

    Results read from KernelBench's own files carry no problem name (only an id); those are checked
    by id against the set, the rest by name as well, since an id alone says nothing across sets.
    """
    if recorded is not None:
        check_same_set(identity, recorded, what)
    by_key = {(p.level, p.problem_id): p for p in problems}
    foreign: list[str] = []
    unknown: list[str] = []
    for r in sorted(results, key=lambda r: (r.level, r.problem_id, r.sample_id)):
        p = by_key.get((r.level, r.problem_id))
        if p is None:
            unknown.append(f"level {r.level} problem {r.problem_id}")
        elif r.problem_name and not r.problem_name.isdigit() and r.problem_name != p.name:
            foreign.append(f"problem {r.problem_id} is {r.problem_name} in the run but {p.name} in {identity.label}")
    if foreign:
        raise ProblemSetMismatchError(f"{what} was made on another problem set: {_first(sorted(set(foreign)))}")
    if unknown:
        raise ProblemSetMismatchError(
            f"{what} has results for problems that {identity.label} lacks: {_first(sorted(set(unknown)))}")


def check_baseline(identity: ProblemSetIdentity, baseline: Baseline, level: int) -> None:
    """The baseline's recorded set (if any) and the problem names of ``level`` must be ``identity``'s."""
    what = f"baseline {baseline.path or ''}".strip()
    if baseline.problem_set is not None:
        check_same_set(identity, baseline.problem_set, what)
    check_names(identity, baseline.refs(level), what)


def level_refs(problems: ProblemSet, level: int) -> list[str]:
    return [problem_ref(p.level, p.filename) for p in problems if p.level == level]
