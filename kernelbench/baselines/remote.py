"""Measuring through a runner: the references timed in Modal containers, merged into the file as they arrive.

Each container measures one problem in the modes the file lacks, with the same
:func:`~kernelbench.baselines.measure.measure_problem` a local run uses; what comes back is checked and
written through the one writer (:class:`~kernelbench.baselines.writer.BaselineFile`), so a file made on
Modal and one made locally are the same file.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from kernelbench.baselines.format import BaselineEntry, one_line
from kernelbench.baselines.run import BaselineOutcome, BaselineRunReport, plan
from kernelbench.baselines.writer import BaselineFile
from kernelbench.errors import BaselineError, KernelBenchError
from kernelbench.problems.model import Problem

if TYPE_CHECKING:
    from kernelbench.evaluation.settings import EvalSettings
    from kernelbench.runners.modal_runner import ModalRunner

#: Recorded for a problem whose container never answered (after Modal's own retries).
NO_ANSWER = "Modal could not run this problem"


def measure_into_via_modal(file: BaselineFile, problems: Iterable[Problem], modes: Sequence[str],
                           settings: EvalSettings, runner: ModalRunner, *, retry_failed: bool = True,
                           progress: bool = True) -> BaselineRunReport:
    """As :func:`~kernelbench.baselines.run.measure_into`, with the measurements fanned out to Modal
    containers of one GPU type.

    Each container measures one problem in the modes it lacks; results are merged as they arrive.
    """
    started = time.monotonic()
    todo, settled = plan(file, problems, modes, retry_failed)
    report = BaselineRunReport(path=file.path, outcomes=list(settled), notes=file.notes)
    for group_modes, group in _groups(file, todo, report).items():
        answered: set[int] = set()

        def on_result(index: int, out: dict[str, Any], group=group, group_modes=group_modes,
                      answered=answered) -> None:
            answered.add(index)
            report.outcomes.extend(_merge_remote(file, group[index], group_modes, out, settings.precision))

        runner.measure_baselines(group, list(group_modes), settings, on_result=on_result, progress=progress)
        for i, p in enumerate(group):
            if i not in answered:
                for m in group_modes:
                    file.put_failure(p, m, NO_ANSWER)
                    report.outcomes.append(BaselineOutcome.of(p, m, "failed", error=NO_ANSWER))
    report.wall_s = time.monotonic() - started
    return report


def _groups(file: BaselineFile, todo: list[tuple[Problem, str]],
            report: BaselineRunReport) -> dict[tuple[str, ...], list[Problem]]:
    """The problems to send, grouped by the modes each lacks (one dispatch per group).

    A problem that cannot run on Modal (level 4 needs packages the image lacks) is recorded as failed in
    the file and the report, not sent; that is not fatal to the run.
    """
    from kernelbench.runners.modal_problems import check_runnable_on_modal

    by_problem: dict[tuple[int, int], tuple[Problem, list[str]]] = {}
    for p, m in todo:
        try:
            check_runnable_on_modal([p])
        except KernelBenchError as e:
            file.put_failure(p, m, str(e))
            report.outcomes.append(BaselineOutcome.of(p, m, "failed", error=one_line(str(e))))
            continue
        by_problem.setdefault((p.level, p.problem_id), (p, []))[1].append(m)
    groups: dict[tuple[str, ...], list[Problem]] = {}
    for p, ms in by_problem.values():
        groups.setdefault(tuple(ms), []).append(p)
    return groups


def _merge_remote(file: BaselineFile, problem: Problem, modes: Sequence[str], out: dict[str, Any],
                  precision: str) -> list[BaselineOutcome]:
    """Write one container's answer into the file: a time per mode it measured, a failure per mode it did not."""
    outcomes = []
    env = out.get("environment") or {}
    for mode in modes:
        raw = (out.get("entries") or {}).get(mode)
        error = (out.get("failures") or {}).get(mode) or out.get("error") or "no time came back for this mode"
        if raw is not None:
            try:
                entry = BaselineEntry.model_validate(raw)
                file.put(problem, mode, entry, environment=env, precision=precision)
                outcomes.append(BaselineOutcome.of(problem, mode, "measured", median_ms=entry.headline_ms,
                                                   wall_s=entry.wall_s))
                continue
            except ValidationError as e:
                error = f"malformed time from Modal: {e.errors()[0]['msg']}"
            except BaselineError as e:
                error = str(e)
        file.put_failure(problem, mode, error)
        outcomes.append(BaselineOutcome.of(problem, mode, "failed", error=one_line(error)))
    return outcomes
