"""A measuring run: what a file still lacks, measured one (problem, mode) at a time, each written as it comes.

:func:`plan` decides what to measure (mode by mode, so a run cut short has whole modes done) and what is
settled; :func:`measure_into` measures it with any measure function (:class:`~.measure.LocalMeasurer` on
this machine) and records every outcome in a :class:`BaselineRunReport`. Measuring on Modal is
:func:`kernelbench.baselines.remote.measure_into_via_modal`, over the same plan and report.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from kernelbench.baselines.format import check_modes, mode_order, one_line
from kernelbench.baselines.measure import BaselineMeasureError, MeasureFn, missing_packages
from kernelbench.baselines.writer import BaselineFile
from kernelbench.errors import BaselineError
from kernelbench.problems.model import Problem

if TYPE_CHECKING:
    from kernelbench.evaluation.compile_warmup import WarmupReport
    from kernelbench.evaluation.settings import EvalSettings

log = logging.getLogger(__name__)

Status = Literal["measured", "reused", "failed", "skipped", "pending"]


@dataclass(frozen=True)
class BaselineOutcome:
    """What happened to one (problem, mode) in a run."""

    level: int
    problem_id: int
    filename: str
    mode: str
    status: Status
    median_ms: float | None = None
    wall_s: float | None = None
    error: str | None = None

    @classmethod
    def of(cls, problem: Problem, mode: str, status: Status, **detail: Any) -> BaselineOutcome:
        return cls(problem.level, problem.problem_id, problem.filename, mode, status, **detail)


@dataclass
class BaselineRunReport:
    """The result of one ``measure_into`` call: per (problem, mode) outcomes, and why it stopped."""

    path: Path
    outcomes: list[BaselineOutcome] = field(default_factory=list)
    wall_s: float = 0.0
    stopped: str | None = None
    notes: list[str] = field(default_factory=list)

    def count(self, status: Status, mode: str | None = None) -> int:
        return sum(1 for o in self.outcomes if o.status == status and (mode is None or o.mode == mode))

    @property
    def failures(self) -> list[BaselineOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    @property
    def complete(self) -> bool:
        """Every requested (problem, mode) has a time in the file."""
        return all(o.status in ("measured", "reused") for o in self.outcomes)

    def summary_rows(self) -> list[list[Any]]:
        """Per level and mode: measured now, already there, failed, not tried; for the CLI's table."""
        keys = sorted({(o.level, o.mode) for o in self.outcomes}, key=lambda k: (k[0], mode_order(k[1])))
        rows = []
        for level, mode in keys:
            group = [o for o in self.outcomes if o.level == level and o.mode == mode]
            walls = [o.wall_s for o in group if o.status == "measured" and o.wall_s is not None]
            rows.append([level, mode, sum(o.status == "measured" for o in group),
                         sum(o.status == "reused" for o in group), sum(o.status == "failed" for o in group),
                         sum(o.status in ("skipped", "pending") for o in group), f"{sum(walls):.1f}"])
        return rows


def plan(file: BaselineFile, problems: Iterable[Problem], modes: Sequence[str],
         retry_failed: bool = True) -> tuple[list[tuple[Problem, str]], list[BaselineOutcome]]:
    """What to measure (mode by mode, so a run cut short has whole modes done) and what is already settled."""
    todo: list[tuple[Problem, str]] = []
    settled: list[BaselineOutcome] = []
    problems = list(problems)
    for mode in check_modes(modes):
        for p in problems:
            entry = file.entry(p.level, p.filename, mode)
            if entry is not None:
                settled.append(BaselineOutcome.of(p, mode, "reused", median_ms=entry.headline_ms))
            elif not retry_failed and file.failure(p, mode):
                settled.append(BaselineOutcome.of(p, mode, "skipped", error=f"failed before: {file.failure(p, mode)}"))
            else:
                todo.append((p, mode))
    return todo, settled


def warm_compile_caches(file: BaselineFile, problems: Iterable[Problem], modes: Sequence[str],
                        settings: EvalSettings, device: str, jobs: int | None = None, *, retry_failed: bool = True,
                        deadline_s: float | None = None, progress: bool = True) -> WarmupReport:
    """Compile, in parallel, the references that :func:`measure_into` is about to time in torch.compile modes.

    Only for GPU runs (on the CPU there is no GPU to keep quiet and nothing worth the processes).
    See :mod:`kernelbench.evaluation.compile_warmup` for what carries over to the timed runs.
    """
    from kernelbench.evaluation.compile_warmup import WarmupReport, warm_up

    if not device.startswith("cuda"):
        return WarmupReport()
    todo, _ = plan(file, problems, modes, retry_failed)
    return warm_up([(p, m) for p, m in todo if not missing_packages(p)], settings, device, jobs,
                   deadline_s=deadline_s, progress=progress)


def measure_into(file: BaselineFile, problems: Iterable[Problem], modes: Sequence[str], settings: EvalSettings,
                 measure: MeasureFn, *, retry_failed: bool = True, deadline_s: float | None = None,
                 progress: bool = True) -> BaselineRunReport:
    """Measure every (problem, mode) the file lacks and write each result as it comes.

    ``measure`` is :func:`~.measure.measure_problem` or anything with its signature (a
    :class:`~.measure.LocalMeasurer`; a stand-in in tests); if it has an ``expect(n)`` method, it is told
    how many calls follow. A failed measurement is recorded in the file and
    the run goes on. ``deadline_s`` stops starting new measurements after that many seconds; what
    is left is reported as pending and a rerun picks it up.
    """
    from kernelbench.progress import progress_bar

    started = time.monotonic()
    todo, settled = plan(file, problems, modes, retry_failed)
    report = BaselineRunReport(path=file.path, outcomes=list(settled), notes=file.notes)
    expect = getattr(measure, "expect", None)
    if callable(expect):
        expect(len(todo))
    bar = progress_bar(total=len(todo), desc=f"baselines -> {file.path.name}", unit="time",
                       enabled=progress and bool(todo))
    try:
        for i, (problem, mode) in enumerate(todo):
            if deadline_s is not None and time.monotonic() - started >= deadline_s:
                report.stopped = f"deadline of {deadline_s:g} s reached with {len(todo) - i} measurement(s) left"
                report.outcomes += [BaselineOutcome.of(p, m, "pending") for p, m in todo[i:]]
                break
            bar.set_postfix_str(f"{problem.key} {mode}")
            report.outcomes.append(_measure_one(file, problem, mode, settings, measure))
            bar.update(1)
    finally:
        bar.close()
        report.wall_s = time.monotonic() - started
    return report


def _measure_one(file: BaselineFile, problem: Problem, mode: str, settings: EvalSettings,
                 measure: MeasureFn) -> BaselineOutcome:
    t0 = time.monotonic()
    try:
        entries = measure(problem, [mode], settings)
        error = None if mode in entries else "the measurement returned no time for this mode"
    except BaselineMeasureError as e:
        entries = e.entries
        error = None if mode in entries else (e.failures.get(mode) or str(e))
    except BaselineError:
        raise
    except Exception as e:  # a bug or a broken worker start: recorded, the run goes on
        log.debug("measuring %s %s raised", problem.key, mode, exc_info=True)
        entries, error = {}, one_line(e)
    wall = time.monotonic() - t0
    if error is None:
        entry = entries[mode]
        if entry.wall_s is None:
            entry.wall_s = wall
        try:
            file.put(problem, mode, entry, precision=settings.precision)
        except BaselineError as e:  # measured on another GPU type than the file's: not written
            file.put_failure(problem, mode, str(e))
            return BaselineOutcome.of(problem, mode, "failed", wall_s=wall, error=str(e))
        return BaselineOutcome.of(problem, mode, "measured", median_ms=entry.headline_ms, wall_s=entry.wall_s)
    file.put_failure(problem, mode, error)
    return BaselineOutcome.of(problem, mode, "failed", wall_s=wall, error=one_line(error))
