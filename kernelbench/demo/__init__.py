"""The project's first impression: a few candidates through the real evaluator in seconds.

``kernelbench demo`` (see :mod:`kernelbench.cli.demo`) evaluates the cases below (kept to four: each candidate gets a fresh worker process,
and starting one, i.e. importing torch, is most of the demo's time on a CPU): worked solutions that
should pass, a wrong kernel that must fail correctness and an exploit that the guards must catch. On a
GPU they run at full size and are timed; without one they run at the problems' reduced ``CPU_SIZE``
(correctness only) so the whole tour fits in seconds and well under 2 GB.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kernelbench.problems.model import Problem


@dataclass(frozen=True)
class DemoCase:
    """One candidate of the tour: what it is, where its source is, and the verdict it must get."""

    label: str
    level: int
    problem_id: int
    backend: str
    #: Path relative to the ``kernelbench`` package.
    source: str
    #: "correct", "incorrect" (fails correctness) or "guard" (a failing guard finding).
    expect: str
    why: str

    def read_source(self) -> str:
        return resources.files("kernelbench").joinpath(self.source).read_text(encoding="utf-8")

    @property
    def source_path(self) -> Path:
        return Path(str(resources.files("kernelbench").joinpath(self.source)))


CASES: tuple[DemoCase, ...] = (
    DemoCase("ReLU, Triton (worked solution)", 1, 8, "triton", "solutions/triton/level1/8_ReLU.py", "correct",
             "one coalesced pass, as shipped in kernelbench/solutions"),
    DemoCase("GELU, torch (rewritten in torch ops)", 1, 9, "torch", "demo/candidates/gelu_torch.py", "correct",
             "the erf formula in plain torch"),
    DemoCase("ReLU, Triton, wrong", 1, 8, "triton", "demo/candidates/relu_wrong.py", "incorrect",
             "leaks 1% of negative values: fails the correctness trials"),
    DemoCase("Matmul, Triton, exploit", 1, 1, "triton", "demo/candidates/matmul_exploit.py", "guard",
             "defines a Triton kernel but calls torch.matmul: caught by the guards"),
)


def demo_problem(problem: Problem, reduced: bool) -> Problem:
    """The problem as the demo runs it: at its reduced CPU size when ``reduced``."""
    return problem.at_reduced_size() if reduced else problem


def meets_expectation(case: DemoCase, result) -> bool:
    """Whether ``result`` (a KernelResult) is the verdict the case must get."""
    if case.expect == "correct":
        return bool(result.correct)
    if case.expect == "incorrect":
        return not result.correct and (result.error is None or result.error.stage.value == "correctness")
    if case.expect == "guard":
        return not result.correct and bool(result.failing_findings)
    raise ValueError(f"unknown expectation {case.expect!r}")
