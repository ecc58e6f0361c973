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


RUNNERS = ("local", "modal")


def get_runner(name: str = "local", gpu: str | None = None, **options) -> Runner:
    if name == "local":
        from kernelbench.runners.local import LocalRunner

        return LocalRunner(**options)
    if name == "modal":
        from kernelbench.runners.modal_runner import ModalRunner

        return ModalRunner(gpu=gpu or "H100", **options)
    from kernelbench.errors import KernelBenchError

    raise KernelBenchError(f"unknown runner {name!r} (choose from {', '.join(RUNNERS)})")
