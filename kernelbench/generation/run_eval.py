"""Evaluate a run directory: every kernel without a result, saved as each result arrives.

The samples expected are the kernel files present plus, when ``run.json`` says how the run was
generated, every (problem, sample) it asked for: a sample whose generation failed has no kernel
file and gets a recorded ``load`` failure instead of silently shrinking the denominator. Such a
failure is re-evaluated once a later ``generate`` has produced the kernel.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kernelbench.runs import RunDirectory

if TYPE_CHECKING:
    from kernelbench.evaluation.settings import EvalSettings
    from kernelbench.problems.model import Problem, ProblemSet
    from kernelbench.results import KernelResult
    from kernelbench.runners.base import Runner

log = logging.getLogger(__name__)

MISSING_KERNEL = "MissingKernel"
EMPTY_KERNEL = "EmptyKernel"
_PLACEHOLDER_TYPES = (MISSING_KERNEL, EMPTY_KERNEL)


@dataclass(frozen=True)
class SampleRef:
    problem: Problem
    sample_id: int


@dataclass
class EvaluationSummary:
    results: list[KernelResult] = field(default_factory=list)
    already_done: int = 0
    evaluated: int = 0
    placeholders: int = 0

    @property
    def infrastructure_failures(self) -> int:
        """Jobs our side failed to evaluate (never verdicts); the next evaluate-run evaluates them again."""
        return sum(1 for r in self.results if r.infrastructure_failure)

    def verdict_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.results:
            out[r.verdict()] = out.get(r.verdict(), 0) + 1
        return dict(sorted(out.items()))


def missing_kernel_result(problem: Problem, sample_id: int, settings: EvalSettings, empty: bool) -> KernelResult:
    """The recorded failure for a sample that has no code to evaluate."""
    from kernelbench.results import KernelResult, Stage, StageError

    stem = f"level_{problem.level}_problem_{problem.problem_id}_sample_{sample_id}"
    if empty:
        err = StageError.make(Stage.LOAD, EMPTY_KERNEL, f"{stem}_kernel.py is empty")
    else:
        err = StageError.make(Stage.LOAD, MISSING_KERNEL,
                              f"no {stem}_kernel.py: generation failed or did not run (see {stem}_usage.json)")
    return KernelResult(level=problem.level, problem_id=problem.problem_id, problem_name=problem.name,
                        problem_hash=problem.hash, sample_id=sample_id, backend=settings.backend,
                        precision=settings.precision, compiled=False, correct=False, error=err)


def expected_samples(run_dir: RunDirectory, problems: ProblemSet, level: int) -> list[SampleRef]:
    """Kernel files present, plus what run.json says was asked for (problem ids x samples)."""
    info = run_dir.info()
    wanted: set[tuple[int, int]] = set()
    by_id = {p.problem_id: p for p in problems if p.level == level}
    for k in run_dir.kernels():
        if k.level == level:
            if k.problem_id not in by_id:
                log.warning("%s: problem %d is not in the problem set; skipped", k.path, k.problem_id)
                continue
            wanted.add((k.problem_id, k.sample_id))
    if info.samples is not None and info.samples > 0:
        for pid in info.problem_ids or sorted(by_id):
            if pid in by_id:
                wanted.update((pid, s) for s in range(info.samples))
    return [SampleRef(by_id[pid], sid) for pid, sid in sorted(wanted)]


def evaluate_run_dir(run_dir: RunDirectory, problems: ProblemSet, settings: EvalSettings, runner: Runner,
                     reevaluate: bool = False, progress: bool = True, problem_ids: Sequence[int] | None = None,
                     on_result: Callable[[KernelResult], None] | None = None) -> EvaluationSummary:
    """Evaluate what lacks a result; keep what is done (unless ``reevaluate``); never lose a saved result."""
    from kernelbench.evaluation.settings import EvalJob

    level = run_dir.level
    if level is None:
        from kernelbench.errors import RunDirectoryError

        raise RunDirectoryError(f"cannot tell the level of {run_dir.path}: no kernels and no run.json")
    existing = run_dir.load_results()
    summary = EvaluationSummary()
    jobs: list[EvalJob] = []
    for ref in expected_samples(run_dir, problems, level):
        p, sid = ref.problem, ref.sample_id
        if problem_ids is not None and p.problem_id not in problem_ids:
            continue
        path = run_dir.kernel_path(level, p.problem_id, sid)
        source = path.read_text(encoding="utf-8") if path.exists() else None
        has_code = source is not None and bool(source.strip())
        done = existing.get((p.problem_id, sid))
        stale_placeholder = (done is not None and done.error is not None
                             and done.error.type in _PLACEHOLDER_TYPES and has_code)
        # A job lost to the remote infrastructure (not a verdict on the kernel) is retried on resume.
        stale_placeholder = stale_placeholder or (done is not None and done.infrastructure_failure)
        if done is not None and not reevaluate and not stale_placeholder:
            summary.results.append(done)
            summary.already_done += 1
            continue
        if not has_code:
            result = missing_kernel_result(p, sid, settings, empty=source is not None)
            run_dir.save_result(result)
            summary.results.append(result)
            summary.placeholders += 1
            if on_result is not None:
                on_result(result)
            continue
        jobs.append(EvalJob(p, source or "", settings, sid))

    if jobs:
        saved: set[int] = set()

        def save(index: int, result: KernelResult) -> None:
            run_dir.save_result(result)
            saved.add(index)
            if on_result is not None:
                on_result(result)

        results = runner.run(jobs, on_result=save, progress=progress)
        by_index: dict[int, KernelResult] = {}
        if len(results) == len(jobs):
            by_index = dict(enumerate(results))
        for i, result in by_index.items():
            if i not in saved:  # a runner that reports only at the end
                save(i, result)
        summary.results.extend(results)
        summary.evaluated = len(results)
        if len(results) != len(jobs):
            log.warning("the runner returned %d results for %d jobs; rerun evaluate-run to finish",
                        len(results), len(jobs))
    summary.results.sort(key=lambda r: (r.problem_id, r.sample_id))
    return summary
