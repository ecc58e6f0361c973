"""The evaluator end to end on the CPU path (no GPU): isolation, failure classification, verdicts.

Every failure the issue names that can happen without a GPU is here; the GPU-only ones
(CUDA compile error, illegal memory access, hung kernel, GPU out-of-memory) are in
test_evaluator_gpu.py. All candidates of a kind run in one batch, which also proves that one
candidate's crash loses no other result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kbtesting import CANDIDATE_HEAD, SCALED_RELU_PROBLEM, scaled_relu_candidate

from kernelbench.evaluation import EvalJob, EvalSettings, evaluate, evaluate_batch
from kernelbench.problems import load_directory
from kernelbench.results import KernelResult, Stage

PROBLEM = SCALED_RELU_PROBLEM
HEAD = CANDIDATE_HEAD
cand = scaled_relu_candidate


HONEST = cand("        return x.clamp_min(0) * self.scale\n")

FAILURES = {
    "syntax": (HEAD + "class ModelNew(nn.Module):\n    def forward(self, x)\n        return x\n", Stage.LOAD, "SyntaxError"),
    "import": ("import torch\nimport not_a_real_module_xyz\n" + HONEST, Stage.LOAD, "ModuleNotFoundError"),
    "no_modelnew": (HEAD + "class Something(nn.Module):\n    pass\n", Stage.LOAD, "MissingModelNew"),
    "init_raises": (cand("        return x\n", init="    def __init__(self, n):\n        raise ValueError('bad init')\n"),
                    Stage.INIT, "ValueError"),
    "forward_raises": (cand("        raise RuntimeError('kernel exploded')\n"), Stage.RUN, "RuntimeError"),
    "wrong_shape": (cand("        return (x.clamp_min(0) * self.scale)[:, :10]\n"), Stage.CORRECTNESS, "WrongOutput"),
    "wrong_values": (cand("        return x.clamp_min(0) * self.scale + 1e-2\n"), Stage.CORRECTNESS, "WrongOutput"),
    "nan_output": (cand("        y = x.clamp_min(0) * self.scale\n        y[0, 0] = float('nan')\n        return y\n"),
                   Stage.CORRECTNESS, "WrongOutput"),
    "python_loop": (cand("        while True:\n            pass\n"), Stage.TIMEOUT, "Timeout"),
    "segfault": (cand("        import ctypes\n        ctypes.string_at(0)\n        return x\n"), Stage.CRASH, "WorkerDied"),
    "sys_exit": (cand("        import sys\n        sys.exit(3)\n"), Stage.RUN, "SystemExit"),
    "os_exit": (cand("        import os\n        os._exit(0)\n"), Stage.CRASH, "WorkerDied"),
    "mutates_input": (cand("        y = x.clamp_min(0) * self.scale\n        x.zero_()\n        return y\n"),
                      Stage.CORRECTNESS, "InputsModified"),
}

NOISY = cand("        print('y' * 1_000_000)\n        return x.clamp_min(0) * self.scale\n",
             prefix="print('x' * 5_000_000)\n")

SECRET_PROBE = HEAD + (
    "import os\n"
    "raise RuntimeError('visible: ' + ','.join(sorted(k for k in os.environ if 'KB_TEST' in k)))\n"
)


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    root = tmp_path_factory.mktemp("problems")
    (root / "level1").mkdir()
    (root / "level1" / "1_Scaled_relu.py").write_text(PROBLEM)
    return load_directory(root).get(1, 1)


@pytest.fixture(scope="module")
def settings():
    return EvalSettings(backend="torch", device="cpu", stage_timeout_s=20.0, static_guard=False)


@pytest.fixture(scope="module")
def batch(problem, settings):
    names = ["honest", *FAILURES, "noisy"]
    sources = [HONEST, *(v[0] for v in FAILURES.values()), NOISY]
    jobs = [EvalJob(problem, src, settings, sample_id=i) for i, src in enumerate(sources)]
    seen: list[int] = []
    results = evaluate_batch(jobs, on_result=lambda i, r: seen.append(i), progress=False)
    return dict(zip(names, results)), seen


def test_every_job_has_a_result_in_order(batch):
    results, seen = batch
    assert sorted(seen) == list(range(len(results)))
    assert [r.sample_id for r in results.values()] == list(range(len(results)))


def test_honest_candidate_is_correct_on_the_cpu_path(batch):
    r = batch[0]["honest"]
    assert r.compiled and r.correct and r.error is None
    assert r.correctness.trials_passed == r.correctness.trials_run == 5
    assert r.runtime is None and r.speedup is None and "not measured" in r.timing_note
    assert r.environment.device == "cpu"


@pytest.mark.parametrize("name", list(FAILURES))
def test_failure_is_classified(batch, name):
    r = batch[0][name]
    _, stage, type_ = FAILURES[name]
    assert not r.correct
    assert r.error is not None, name
    assert (r.error.stage, r.error.type) == (stage, type_), r.error
    assert r.error.message


def test_failure_messages_are_readable(batch):
    res = batch[0]
    assert "kernel exploded" in res["forward_raises"].error.message
    assert "shape (32, 10)" in res["wrong_shape"].error.message and "(32, 64)" in res["wrong_shape"].error.message
    assert "NaN" in res["nan_output"].error.message
    assert "within 20 s" in res["python_loop"].error.message
    assert "SIGSEGV" in res["segfault"].error.message
    assert "modified in place" in res["mutates_input"].error.message
    assert res["wrong_values"].correctness.max_abs_error == pytest.approx(1e-2, rel=1e-3)


def test_megabytes_of_output_do_not_break_the_verdict(batch):
    r = batch[0]["noisy"]
    assert r.correct, r.error


def test_candidate_environment_has_no_secrets(problem, settings, monkeypatch):
    monkeypatch.setenv("KB_TEST_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("KB_TEST_TOKEN", "tok")
    monkeypatch.setenv("KB_TEST_PLAIN", "fine")
    r = evaluate(EvalJob(problem, SECRET_PROBE, settings))
    assert r.error.stage == Stage.LOAD
    assert "visible: KB_TEST_PLAIN" in r.error.message
    assert "KB_TEST_API_KEY" not in r.error.message and "KB_TEST_TOKEN" not in r.error.message
    assert "sk-should-not-leak" not in r.to_json()


TRITON_RELU_SCALE = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def relu_scale_kernel(x_ptr, s_ptr, y_ptr, n, cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    s = tl.load(s_ptr + offs % cols, mask=m)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0) * s, mask=m)

class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(n))
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        relu_scale_kernel[(triton.cdiv(n, 1024),)](x, self.scale, y, n, x.shape[-1], BLOCK=1024)
        return y
'''


def test_triton_candidate_runs_under_the_interpreter_and_cuda_needs_a_gpu(problem):
    s = EvalSettings(backend="triton", device="cpu")
    jobs = [EvalJob(problem, TRITON_RELU_SCALE, s, 0),
            EvalJob(problem, HONEST, s, 1),  # no Triton kernel at all
            EvalJob(problem, TRITON_RELU_SCALE, s.with_(backend="cuda"), 2)]
    ok, no_kernel, cuda = evaluate_batch(jobs, progress=False)
    assert ok.correct, ok.error
    assert any(f.rule == "launch-report" for f in ok.guard_findings)
    assert not no_kernel.correct and no_kernel.error.stage == Stage.GUARD
    assert cuda.error.type == "NoGPU" and not cuda.compiled


def test_stochastic_reference_is_judged_in_eval_mode(tmp_path):
    root = tmp_path / "p"
    (root / "level2").mkdir(parents=True)
    (root / "level2" / "1_Linear_dropout.py").write_text(
        "import torch\nimport torch.nn as nn\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(32, 32)\n        self.drop = nn.Dropout(0.5)\n"
        "    def forward(self, x):\n        return torch.softmax(self.drop(self.fc(x)), dim=-1)\n"
        "def get_inputs():\n    return [torch.randn(16, 32)]\n"
        "def get_init_inputs():\n    return []\n")
    p = load_directory(root).get(2, 1)
    src = ("import torch\nimport torch.nn as nn\n"
           "class ModelNew(nn.Module):\n"
           "    def __init__(self):\n        super().__init__()\n"
           "        self.fc = nn.Linear(32, 32)\n        self.drop = nn.Dropout(0.5)\n"
           "    def forward(self, x):\n        return torch.softmax(self.drop(self.fc(x)), dim=-1)\n")
    r = evaluate(EvalJob(p, src, EvalSettings(backend="torch", device="cpu")))
    assert r.correct, r.error
    assert any("eval() mode" in f for f in r.flags)


def test_result_survives_json_round_trip(batch):
    for r in batch[0].values():
        again = KernelResult.from_json(r.to_json())
        assert again == r


def test_eval_cli_prints_verdict_and_exits_zero_for_a_wrong_kernel(tmp_path, problem):
    root = Path(problem.source.split(":", 1)[1])
    kernel = tmp_path / "k.py"
    kernel.write_text(FAILURES["wrong_values"][0])
    out = subprocess.run([sys.executable, "-m", "kernelbench.cli.main", "eval", "--level", "1", "--problem-id", "1",
                          "--kernel", str(kernel), "--source", "directory", "--path", str(root),
                          "--backend", "torch", "--json"], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["correct"] is False and data["error"]["stage"] == "correctness"
    bad = subprocess.run([sys.executable, "-m", "kernelbench.cli.main", "eval", "--level", "1", "--problem-id", "9",
                          "--kernel", str(kernel), "--source", "directory", "--path", str(root)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "no problem with id 9" in bad.stderr
    missing = subprocess.run([sys.executable, "-m", "kernelbench.cli.main", "eval", "--level", "1", "--problem-id", "1",
                              "--kernel", str(tmp_path / "nope.py")], capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "does not exist" in missing.stderr


TF32_PROBE_PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """Reports, as its output, whether cuDNN may use TF32 in the process that runs it."""

    def forward(self, x):
        return x * 0 + float(torch.backends.cudnn.allow_tf32)


def get_inputs():
    return [torch.randn(4)]


def get_init_inputs():
    return []
'''

TF32_ON = HEAD + "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x * 0 + 1.0\n"


def test_strict_fp32_runs_the_reference_without_tf32_and_kernelbench_mode_keeps_the_default(tmp_path):
    root = tmp_path / "p"
    (root / "level1").mkdir(parents=True)
    (root / "level1" / "1_Tf32_probe.py").write_text(TF32_PROBE_PROBLEM)
    prob = load_directory(root).get(1, 1)
    strict = EvalSettings(backend="torch", device="cpu", stage_timeout_s=20.0, static_guard=False,
                          correctness_trials=1)
    assert strict.ieee_fp32 and not strict.with_(precision="fp16").ieee_fp32
    loose = strict.with_(tolerance_mode="kernelbench-v0.1")
    assert not loose.ieee_fp32
    a, b = evaluate_batch([EvalJob(prob, TF32_ON, strict, 0), EvalJob(prob, TF32_ON, loose, 1)], progress=False)
    # The candidate says "TF32 on"; the reference worker agrees only in KernelBench's mode.
    assert not a.correct and a.error.stage == Stage.CORRECTNESS
    assert b.correct, b.error
