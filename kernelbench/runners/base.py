"""The runner interface shared by the local pool and Modal."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from kernelbench.evaluation.settings import EvalJob
from kernelbench.results import KernelResult

#: Called as each result arrives, with the job's index in the input sequence.
ResultCallback = Callable[[int, KernelResult], None]


@runtime_checkable
class Runner(Protocol):
    name: str

    def run(self, jobs: Sequence[EvalJob], on_result: ResultCallback | None = None,
            progress: bool = True) -> list[KernelResult]:
        """Evaluate every job; results come back in job order, and ``on_result`` fires as each finishes."""
        ...
