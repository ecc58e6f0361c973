"""The evaluator on a real GPU: CUDA and Triton candidates, failures it must survive, timing."""

from __future__ import annotations

import pytest

from kernelbench.evaluation import EvalJob, EvalSettings, evaluate_batch
from kernelbench.problems import load_builtin
from kernelbench.problems.contract import identity_candidate
from kernelbench.results import Stage
from tests.gpu_smoke_candidates import (
    CUDA_COMPILE_ERROR,
    CUDA_HANG,
    CUDA_ILLEGAL_ACCESS,
    CUDA_RELU,
    TORCH_OOM,
    TRITON_RELU,
)

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def relu():
    return load_builtin([1]).get(1, 8)


def test_gpu_batch_survives_failures_and_keeps_every_result(relu):
    fast = EvalSettings(backend="cuda", timing_budget_s=0.5, stage_timeout_s=20.0)
    jobs = [
        EvalJob(relu, CUDA_RELU, fast, 0),
        EvalJob(relu, CUDA_ILLEGAL_ACCESS, fast, 1),
        EvalJob(relu, CUDA_HANG, fast, 2),
        EvalJob(relu, CUDA_COMPILE_ERROR, fast, 3),
        EvalJob(relu, TRITON_RELU, fast.with_(backend="triton"), 4),
        EvalJob(relu, TORCH_OOM, fast.with_(backend="torch"), 5),
        EvalJob(relu, identity_candidate(relu.code), fast.with_(backend="torch"), 6),
    ]
    seen = []
    results = evaluate_batch(jobs, on_result=lambda i, r: seen.append(i), progress=False)
    for r in results:
        print(r.sample_id, r.verdict(), r.error.one_line() if r.error else "", r.speedup,
              {k: round(v, 2) for k, v in r.stage_times_s.items()}, [(f.rule, f.severity) for f in r.guard_findings])
    assert sorted(seen) == list(range(len(jobs)))
    ok, illegal, hang, broken, triton_ok, oom, ident = results
    assert ok.correct and ok.speedup is not None, ok.error
    assert not illegal.correct and illegal.error.stage in (Stage.RUN, Stage.CRASH)
    assert "illegal" in illegal.error.message.lower() or illegal.error.stage == Stage.CRASH
    assert hang.error.stage == Stage.TIMEOUT
    assert broken.error.stage == Stage.COMPILE and not broken.compiled
    assert "this_is_not_cuda" in (broken.compile_log or broken.error.message)
    assert triton_ok.correct and triton_ok.speedup is not None, triton_ok.error
    assert oom.error.stage == Stage.RUN and "OutOfMemory" in oom.error.type
    assert ident.correct and 0.9 < ident.speedup < 1.1


def test_cuda_build_cache_makes_the_second_evaluation_fast(relu, tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELBENCH_CACHE_DIR", str(tmp_path / "cache"))
    s = EvalSettings(backend="cuda", measure_timing=False)
    first = evaluate_batch([EvalJob(relu, CUDA_RELU, s)], progress=False)[0]
    second = evaluate_batch([EvalJob(relu, CUDA_RELU, s)], progress=False)[0]
    assert first.correct and second.correct
    assert second.stage_times_s["load"] < 2.0 < first.stage_times_s["load"]


def test_reference_alone_in_eager_and_compiled_modes(relu):
    from kernelbench.evaluation.parent import DeviceSession, measure_reference

    session = DeviceSession("cuda:0")
    try:
        eager = measure_reference(session, relu, "eager")
        compiled = measure_reference(session, relu, "compile-default")
    finally:
        session.close()
    print("eager", eager.timing.median_ms, eager.note, "compiled", compiled.timing.median_ms, compiled.note)
    floor = EvalSettings().min_timing_trials
    assert eager.timing.n >= floor and compiled.timing.n >= floor
    assert eager.environment.gpu_name
    assert 0.5 < compiled.timing.median_ms / eager.timing.median_ms < 2.0


def test_evaluator_keeps_the_reference_between_jobs(relu):
    from kernelbench.evaluation.parent import Evaluator

    s = EvalSettings(backend="triton", timing_budget_s=0.3)
    with Evaluator(["cuda:0"]) as ev:
        first = ev.evaluate(EvalJob(relu, TRITON_RELU, s, 0))
        second = ev.evaluate(EvalJob(relu, TRITON_RELU, s, 1))
    assert first.correct and second.correct
    assert second.stage_times_s["reference_setup"] < 0.05


FP64_CONV = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """The 3x3 convolution computed in float64 and rounded once: as exact as an fp32 kernel can be."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=kernel_size // 2)

    def forward(self, x):
        w, b = self.conv.weight.double(), self.conv.bias.double()
        return F.conv2d(x.double(), w, b, padding=self.conv.padding).float()
'''


def test_strict_fp32_reference_is_ieee_so_an_exact_convolution_passes():
    """cuDNN runs fp32 convolutions in TF32 unless told not to; a reference computed that way is off by
    about 1e-3 and would fail an exact candidate at the strict 1e-4 tolerance."""
    conv = load_builtin([1]).get(1, 5)
    strict = EvalSettings(backend="torch", timing_budget_s=0.2, correctness_trials=2)
    loose = strict.with_(tolerance_mode="kernelbench-v0.1")
    results = evaluate_batch([EvalJob(conv, FP64_CONV, strict, 0), EvalJob(conv, FP64_CONV, loose, 1)],
                             devices=["cuda:0"], progress=False)
    exact, tf32 = results
    assert exact.correct, exact.error
    assert exact.correctness.max_abs_error < 1e-4
    # KernelBench's mode keeps PyTorch's defaults: the reference itself is TF32 there.
    assert tf32.correct and tf32.correctness.max_abs_error > 1e-4


LATE_HOST_PROBLEM = '''
import time

import torch
import torch.nn as nn


class Model(nn.Module):
    """A tiny kernel launched only after 100 us of host work: a slow host, on purpose."""

    def forward(self, x):
        t = time.perf_counter()
        while time.perf_counter() - t < 100e-6:
            pass
        return x + 1


def get_inputs():
    return [torch.rand(4096)]


def get_init_inputs():
    return []
'''


def test_launch_cushion_keeps_host_latency_out_of_the_timed_region(monkeypatch):
    """With the cushion the start event waits behind a device-side spin, so 100 us of host work before
    the first launch is not timed; with the cushion off (``KB_LAUNCH_CUSHION_US=0``) the GPU reaches the
    start event idle and the timed call includes the host's 100 us."""
    from kernelbench.problems import Problem
    from kernelbench.problems.contract import extra_requirements

    problem = Problem(level=1, problem_id=900, name="900_Late_host", code=LATE_HOST_PROBLEM, source="test",
                      requirements=extra_requirements(LATE_HOST_PROBLEM))
    settings = EvalSettings(backend="torch", timing_budget_s=0.3, correctness_trials=1)
    job = EvalJob(problem, identity_candidate(LATE_HOST_PROBLEM), settings, 0)
    cushioned, = evaluate_batch([job], devices=["cuda:0"], progress=False)
    monkeypatch.setenv("KB_LAUNCH_CUSHION_US", "0")  # the settings' default follows it from now on
    bare_settings = EvalSettings(backend="torch", timing_budget_s=0.3, correctness_trials=1)
    assert bare_settings.launch_cushion_us == 0
    bare, = evaluate_batch([EvalJob(problem, identity_candidate(LATE_HOST_PROBLEM), bare_settings, 0)], devices=["cuda:0"],
                           progress=False)
    for r in (cushioned, bare):
        assert r.correct and r.runtime is not None and r.ref_runtime is not None, r.error
    assert (cushioned.environment.launch_cushion_us, bare.environment.launch_cushion_us) == (200, 0)
    assert isinstance(cushioned.environment.cpu_pinned, bool)
    assert cushioned.runtime.median_ms < 0.05 and cushioned.ref_runtime.median_ms < 0.05
    assert bare.runtime.median_ms > 0.09 and bare.ref_runtime.median_ms > 0.09
