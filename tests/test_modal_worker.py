"""The container side of the Modal app: the retire-on-bad-GPU rule, compile-cache syncing, and
what the GPU-function body does when the evaluator or the GPU fails.
"""

from __future__ import annotations

import importlib.util

import pytest
from kbtesting import candidate_of, one_problem, problem_source

from kernelbench.evaluation.settings import EvalJob, EvalSettings
from kernelbench.results import EnvironmentInfo, KernelResult, Stage, StageError
from kernelbench.runners.wire import WIRE_VERSION, baseline_request_to_wire, job_to_wire, result_from_wire
from modal_app import health
from modal_app.worker import CacheSync, GpuUnhealthyError, baselines_payload, evaluate_payload

HAVE_MEASURE = False
if importlib.util.find_spec("kernelbench.baselines"):
    import kernelbench.baselines as _kb_baselines

    HAVE_MEASURE = hasattr(_kb_baselines, "measure_problem")


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def result_with(stage: Stage | None, type_: str = "", message: str = "", device: str = "cuda:0") -> KernelResult:
    err = StageError.make(stage, type_, message) if stage is not None else None
    return KernelResult(level=1, problem_id=1, problem_name="1_ReLU", backend="cuda", compiled=stage is None,
                        correct=stage is None, error=err, environment=EnvironmentInfo(device=device))


class Probe:
    def __init__(self, ok: bool):
        self.ok = ok
        self.calls = 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.ok


# ---------------------------------------------------------------------------------------------
# The decision


@pytest.mark.parametrize("type_, message", [
    ("RuntimeError", "CUDA error: an illegal memory access was encountered"),
    ("AcceleratorError", "CUDA error: unspecified launch failure"),
    ("cudaErrorIllegalAddress", ""),
    ("RuntimeError", "CUDA error: device-side assert triggered"),
    ("RuntimeError", "CUDA error: misaligned address"),
    ("XidError", "GPU has fallen off the bus"),
])
def test_sticky_device_errors_retire_the_container_without_probing(type_, message):
    probe = Probe(ok=True)
    d = health.retire_decision(result_with(Stage.RUN, type_, message), probe)
    assert d.stop and "sticky device error" in d.reason
    assert probe.calls == 0


@pytest.mark.parametrize("result", [
    result_with(None),
    result_with(Stage.CORRECTNESS, "OutputMismatch", "max abs error 0.5 > 1e-4"),
    result_with(Stage.COMPILE, "CompileError", "error: identifier 'foo' is undefined"),
    result_with(Stage.RUN, "OutOfMemoryError", "CUDA error: out of memory. Tried to allocate 80 GiB"),
])
def test_ordinary_failures_keep_the_container_when_the_gpu_is_healthy(result):
    probe = Probe(ok=True)
    assert health.retire_decision(result, probe).stop is False


def test_a_failed_probe_after_a_gpu_stage_failure_retires_the_container():
    probe = Probe(ok=False)
    d = health.retire_decision(result_with(Stage.TIMEOUT, "Timeout", "run stage exceeded 120 s"), probe)
    assert d.stop and "probe" in d.reason and probe.calls == 1


def test_no_probe_for_compile_failures_correct_results_or_cpu_runs():
    probe = Probe(ok=False)
    assert not health.retire_decision(result_with(Stage.COMPILE, "CompileError", "nvcc failed"), probe).stop
    assert not health.retire_decision(result_with(None), probe).stop
    assert not health.retire_decision(result_with(Stage.RUN, "ValueError", "bad shape", device="cpu"), probe).stop
    assert probe.calls == 0
    assert not health.retire_decision(result_with(Stage.RUN, "ValueError", "bad shape"), None).stop


@pytest.mark.skipif(_has_cuda(), reason="this machine has a GPU; the probe would pass")
def test_the_probe_fails_on_a_machine_without_a_gpu():
    assert health.probe_gpu(timeout_s=120) is False


@pytest.mark.gpu
@pytest.mark.skipif(not _has_cuda(), reason="needs an NVIDIA GPU")
def test_the_probe_passes_on_a_healthy_gpu():
    assert health.probe_gpu(timeout_s=120) is True


# ---------------------------------------------------------------------------------------------
# The compile cache


def test_cache_sync_reloads_before_and_commits_only_when_builds_appeared(tmp_path):
    ext, triton = tmp_path / "kernelbench", tmp_path / "triton"
    ext.mkdir()
    events: list[str] = []
    sync = CacheSync([ext, triton], reload=lambda: events.append("reload"), commit=lambda: events.append("commit"))

    snap = sync.before()
    assert events == ["reload"]
    assert sync.after(snap) is False  # nothing new: no commit
    assert events == ["reload"]

    snap = sync.before()
    (ext / "3f2a9c").mkdir()  # a build published by rename
    assert sync.after(snap) is True
    assert events == ["reload", "reload", "commit"]

    snap = sync.before()
    triton.mkdir()
    (triton / "abc").mkdir()
    assert sync.after(snap) is True and events[-1] == "commit"


def test_cache_sync_survives_volume_errors(tmp_path):
    def boom():
        raise RuntimeError("there are open files preventing the operation")

    sync = CacheSync([tmp_path], reload=boom, commit=boom)
    snap = sync.before()
    (tmp_path / "k1").mkdir()
    assert sync.after(snap) is False  # logged, not raised: the result still goes back


# ---------------------------------------------------------------------------------------------
# The GPU-function body around the evaluator

@pytest.fixture()
def payload(relu_problem):
    job = EvalJob(problem=relu_problem, candidate_source=candidate_of(relu_problem.code),
                  settings=EvalSettings(backend="torch", measure_timing=False))
    return job_to_wire(job, 4)


def test_an_evaluator_exception_becomes_an_infrastructure_failure_when_the_gpu_is_fine(payload):
    def evaluator_bug(job):
        raise KeyError("reference_outputs")

    stops: list[int] = []
    out = evaluate_payload(payload, gpu="H100", evaluate_fn=evaluator_bug, probe=Probe(ok=True),
                           stop=lambda: stops.append(1))
    index, r = result_from_wire(out)
    assert index == 4 and r.key == "level_1_problem_1_sample_0"
    assert r.error.stage == Stage.INFRASTRUCTURE and r.error.type == "KeyError" and r.infrastructure_failure
    assert "reference_outputs" in r.error.message and "evaluator_bug" in r.error.traceback
    assert stops == []


def test_a_broken_gpu_raises_so_modal_retries_the_input_elsewhere(payload):
    def cuda_dead(job):
        raise RuntimeError("CUDA driver initialization failed")

    stops: list[int] = []
    with pytest.raises(GpuUnhealthyError, match="health probe"):
        evaluate_payload(payload, gpu="H100", evaluate_fn=cuda_dead, probe=Probe(ok=False),
                         stop=lambda: stops.append(1))
    assert stops == [1]


def test_a_sticky_error_is_returned_and_the_container_retires(payload):
    def illegal_access(job):
        return result_with(Stage.RUN, "RuntimeError", "CUDA error: an illegal memory access was encountered")

    stops: list[int] = []
    out = evaluate_payload(payload, gpu="H100", evaluate_fn=illegal_access, probe=Probe(ok=True),
                           stop=lambda: stops.append(1))
    _, r = result_from_wire(out)
    assert r.error.stage == Stage.RUN and not r.correct  # the verdict stands; no retry
    assert stops == [1]


def test_baseline_failures_come_back_as_data(relu_problem):
    request = baseline_request_to_wire(relu_problem, ["eager"], EvalSettings(backend="torch"), 2)

    def oom(problem, modes, settings):
        raise MemoryError("reference needs 90 GiB")

    out = baselines_payload(request, measure_fn=oom, environment=lambda gpu: {"gpu_name": gpu})
    assert out["wire_version"] == WIRE_VERSION and out["index"] == 2
    assert out["entries"] == {} and "MemoryError: reference needs 90 GiB" == out["error"]
    assert out["filename"] == "1_ReLU.py"


@pytest.mark.skipif(not HAVE_MEASURE, reason="kernelbench.baselines.measure_problem is not written yet")
def test_baselines_body_measures_the_reference_with_the_library(relu_problem):
    from kernelbench.baselines import BaselineEntry

    settings = EvalSettings(backend="torch", timing_budget_s=0.2, min_timing_trials=5, device="cpu")
    out = baselines_payload(baseline_request_to_wire(relu_problem, ["eager"], settings, 0))
    assert out["error"] is None, out["error"]
    entry = BaselineEntry.model_validate(out["entries"]["eager"])
    assert entry.mean > 0 and (entry.num_trials or 0) >= 1
    assert out["environment"]["timing_protocol"]


# ---------------------------------------------------------------------------------------------
# On a GPU: the body around the real evaluator, with the real probe and a real compile cache

CUDA_CANDIDATE = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = """
#include <torch/extension.h>
__global__ void relu_kernel(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) { STORE; }
}
torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
_mod = load_inline(name="NAME", cpp_sources="torch::Tensor relu(torch::Tensor x);", cuda_sources=_CUDA,
                   functions=["relu"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return _mod.relu(x.contiguous())
'''
GOOD_STORE = "y[i] = x[i] > 0.f ? x[i] : 0.f"
ILLEGAL_STORE = "y[i + (1L << 40)] = 0.f"  # four terabytes past the buffer: an illegal address


def _cuda_payload(tmp_path, store: str, name: str) -> dict:
    problem = one_problem(tmp_path / "problems", problem_source(), name="1_ReLU.py")
    source = CUDA_CANDIDATE.replace("STORE", store).replace("NAME", name)
    job = EvalJob(problem=problem, candidate_source=source,
                  settings=EvalSettings(backend="cuda", correctness_trials=2, measure_timing=False))
    return job_to_wire(job, 0)


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not _has_cuda(), reason="needs an NVIDIA GPU")
def test_gpu_body_builds_into_the_cache_commits_and_names_the_gpu(tmp_path, monkeypatch):
    cache_root = tmp_path / "cache"
    cache_root.mkdir()
    monkeypatch.setenv("KERNELBENCH_CACHE_DIR", str(cache_root))
    commits: list[int] = []
    stops: list[int] = []
    out = evaluate_payload(_cuda_payload(tmp_path, GOOD_STORE, "kb_modal_relu_ok"), gpu="H100",
                           probe=health.probe_gpu, stop=lambda: stops.append(1),
                           cache=CacheSync([cache_root], reload=lambda: None, commit=lambda: commits.append(1)))
    _, r = result_from_wire(out)
    assert r.correct, r.error.one_line() if r.error else r
    assert r.environment is not None and r.environment.gpu_name  # the GPU that actually ran it
    assert any(cache_root.iterdir()) and commits == [1]  # the build was published and committed
    assert stops == []


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not _has_cuda(), reason="needs an NVIDIA GPU")
def test_gpu_body_retires_the_container_after_an_illegal_memory_access(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELBENCH_CACHE_DIR", str(tmp_path / "cache"))
    stops: list[int] = []
    out = evaluate_payload(_cuda_payload(tmp_path, ILLEGAL_STORE, "kb_modal_relu_bad"), gpu="H100",
                           probe=health.probe_gpu, stop=lambda: stops.append(1))
    _, r = result_from_wire(out)
    assert not r.correct and r.error is not None and r.error.stage in health.GPU_STAGES, r.error
    assert stops == [1], f"not retired after: {r.error.one_line()}"
    assert health.probe_gpu() is True  # the fault died with the candidate's process; the GPU is fine
