"""The decoy of issue 23 (own kernel on a scratch buffer, PyTorch's result returned) and the host-bound
measure's arithmetic, on the CPU: real evaluator, real Triton interpreter, real tensors.

The GPU side (own-kernel share and host share from the launch trace, a host-bound forward flagged) is in
test_evaluator_gpu.py (``-m gpu``)."""

from __future__ import annotations

import pytest
import torch
from kbtesting import MATMUL_SCRATCH_DECOY

from kernelbench.evaluation import EvalJob, EvalSettings, evaluate_batch
from kernelbench.evaluation.provenance import (
    busy_time_us,
    host_share,
    storage_range,
    tensor_ranges,
    unowned_outputs,
)
from kernelbench.problems import load_builtin
from kernelbench.solutions import get_solution

RELU = get_solution(1, 8, "triton").source
DECOY = RELU.replace("        return out\n", "        return getattr(torch, 'relu')(x)\n")
# The case on a matmul: a legal launch on a scratch buffer, the product from PyTorch.
MATMUL_DECOY = MATMUL_SCRATCH_DECOY


@pytest.fixture(scope="module")
def verdicts():
    suite = load_builtin([1])
    relu = suite.get(1, 8).at_reduced_size()
    matmul = suite.get(1, 1).at_reduced_size()
    s = EvalSettings(backend="triton", device="cpu", correctness_trials=1, stage_timeout_s=300.0)
    jobs = [EvalJob(relu, RELU, s, 0), EvalJob(relu, DECOY, s, 1), EvalJob(matmul, MATMUL_DECOY, s, 0)]
    return evaluate_batch(jobs, progress=False)


def test_the_decoys_are_correct_but_carry_a_library_output_warning(verdicts):
    _, relu_decoy, matmul_decoy = verdicts
    for r in (relu_decoy, matmul_decoy):
        assert r.correct, r.error
        found = [f for f in r.guard_findings if f.rule == "library-output"]
        assert len(found) == 1 and found[0].severity == "warning" and found[0].origin == "runtime", r.guard_findings
        assert "decoy" in found[0].message


def test_the_worked_solution_carries_no_warning(verdicts):
    honest = verdicts[0]
    assert honest.correct
    assert not [f for f in honest.guard_findings if f.severity in ("warning", "error")], honest.guard_findings
    assert honest.host_share is None and honest.timing_flags == []  # nothing timed on the CPU


def test_storage_ranges_see_views_and_miss_fresh_tensors():
    buf = torch.zeros(100)
    launched = tensor_ranges([buf, 3, [torch.ones(2)], {"k": "v"}])
    assert len(launched) == 2
    assert unowned_outputs([storage_range(buf[10:20].view(2, 5))], launched) == []  # a view of a written buffer
    assert unowned_outputs([storage_range(buf + 1)], launched) == [0]  # PyTorch made it
    assert storage_range("not a tensor") is None and storage_range(torch.empty(0)) is None


def test_busy_time_is_the_union_of_kernel_intervals():
    assert busy_time_us([]) == 0.0
    assert busy_time_us([(0, 10), (5, 10), (30, 5)]) == 20.0  # [0, 15) and [30, 35)
    assert busy_time_us([(100, 1), (0, 200)]) == 200.0  # one inside another
    assert host_share(300.0, 200.0) == 1.5 and host_share(1.0, 0.0) is None
