"""Evaluate on this machine's GPUs (or its CPU when it has none)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kernelbench.evaluation.settings import EvalJob
from kernelbench.results import KernelResult
from kernelbench.runners.base import ResultCallback

log = logging.getLogger(__name__)

#: Error type of the result for a kernel whose problem's hub model this machine's cache lacks.
HUB_MISSING_TYPE = "HubModelMissing"


class LocalRunner:
    name = "local"

    def __init__(self, devices: Sequence[str] | None = None):
        self.devices = list(devices) if devices else None

    def run(self, jobs: Sequence[EvalJob], on_result: ResultCallback | None = None,
            progress: bool = True) -> list[KernelResult]:
        """Evaluate every job here; results in job order.

        A kernel of a problem that loads a Hugging Face model (official level 4) runs only when the
        model is in the hub cache ``HF_HUB_CACHE`` names (:func:`kernelbench.problems.hub.local_hub_blocker`);
        otherwise it gets an infrastructure result saying which model is missing and where, without
        running: not a verdict on the kernel, so a later run, once the cache holds the model, evaluates it.
        """
        from kernelbench.evaluation import evaluate_batch
        from kernelbench.evaluation.parent import infrastructure_result
        from kernelbench.problems.hub import local_hub_blocker

        all_jobs = list(jobs)
        out: list[KernelResult | None] = [None] * len(all_jobs)
        runnable: list[int] = []
        for i, job in enumerate(all_jobs):
            reason = local_hub_blocker(job.problem.code)
            if reason is None:
                runnable.append(i)
                continue
            p = job.problem
            result = infrastructure_result(job, HUB_MISSING_TYPE,
                                           f"level {p.level} problem {p.problem_id} ({p.name}) {reason}")
            log.warning("%s not evaluated: %s", job.key, result.error.message if result.error else reason)
            out[i] = result
            if on_result is not None:
                on_result(i, result)

        def deliver(k: int, result: KernelResult) -> None:
            out[runnable[k]] = result
            if on_result is not None:
                on_result(runnable[k], result)

        if runnable:
            evaluate_batch([all_jobs[i] for i in runnable], devices=self.devices, on_result=deliver,
                           progress=progress)
        return [r for r in out if r is not None]
