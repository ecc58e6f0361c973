"""Evaluate on this machine's GPUs (or its CPU when it has none)."""

from __future__ import annotations

from collections.abc import Sequence

from kernelbench.evaluation.settings import EvalJob
from kernelbench.results import KernelResult
from kernelbench.runners.base import ResultCallback


class LocalRunner:
    name = "local"

    def __init__(self, devices: Sequence[str] | None = None):
        self.devices = list(devices) if devices else None

    def run(self, jobs: Sequence[EvalJob], on_result: ResultCallback | None = None,
            progress: bool = True) -> list[KernelResult]:
        from kernelbench.evaluation import evaluate_batch

        return evaluate_batch(list(jobs), devices=self.devices, on_result=on_result, progress=progress)
