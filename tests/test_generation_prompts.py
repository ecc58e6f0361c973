"""Prompts: content of the first-turn and feedback prompts, the worked examples really work, the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from kernelbench.problems import load_builtin
from kernelbench.prompts import (
    PromptError,
    build_feedback_prompt,
    build_prompt,
    describe_verdict,
    worked_example,
)
from kernelbench.results import CorrectnessDetail, KernelResult, Stage, StageError, TimingStats


@pytest.fixture(scope="module")
def relu():
    return load_builtin([1]).get(1, 8)


def result(**kw) -> KernelResult:
    base = dict(level=1, problem_id=8, problem_name="8_ReLU", backend="triton")
    base.update(kw)
    return KernelResult(**base)


#: What each backend's prompt must teach (its kernel marker, and how the kernel reaches the GPU).
BACKEND_MARKERS = {
    "cuda": ["load_inline"],
    "triton": ["@triton.jit"],
    "cute": ["@cute.kernel", "@cute.jit", ".launch(grid=", "cute.compile(", "cuda.CUstream(torch.cuda.current_stream()"
             ".cuda_stream)", "## CuTe DSL notes"],
    "tilelang": ["@T.prim_func", "@tilelang.jit(out_idx=[-1])", "tilelang.compile(func, out_idx=[...])", "T.Parallel",
                 "TF32 tensor cores", "## TileLang notes"],
}


def test_every_prompt_backend_has_markers():
    from kernelbench.backends import prompt_backends

    assert set(prompt_backends()) == set(BACKEND_MARKERS)


@pytest.mark.parametrize("backend", list(BACKEND_MARKERS))
def test_prompt_has_every_part(relu, backend):
    text = build_prompt(relu, backend, "fp32", "H100")
    model_src, model_new_src = worked_example(backend)
    assert relu.code.strip() in text
    assert model_src in text and model_new_src in text
    for marker in BACKEND_MARKERS[backend]:
        assert marker in text, marker
    assert "132 SMs" in text and "Hopper" in text and "3.35 TB/s" in text  # from kernelbench.hardware
    assert "float32" in text and "atol = 0.0001" in text
    assert "exactly one fenced code block" in text and "class ModelNew(nn.Module)" in text
    assert text.endswith("\n") and "{{" not in text and "{%" not in text


def test_prompt_precision_gpu_and_tolerance_mode(relu):
    text = build_prompt(relu, "triton", "bf16", "A100", tolerance_mode="default")
    assert "bfloat16" in text and "atol = 0.01" in text and "Ampere" in text
    assert "atol = rtol = 0.01" in build_prompt(relu, "cuda", "fp32", None, tolerance_mode="kernelbench-v0.1")
    assert "Not specified" in build_prompt(relu, "cuda", "fp32", None)
    assert "no detailed specification" in build_prompt(relu, "cuda", "fp32", "RTX 9999")


def test_unknown_backend_or_precision(relu):
    with pytest.raises(PromptError, match="torch"):
        build_prompt(relu, "torch")
    with pytest.raises(PromptError, match="fp8"):
        build_prompt(relu, "cuda", "fp8")


def test_feedback_compile_error(relu):
    r = result(error=StageError.make(Stage.COMPILE, "CompilationError", "nvcc failed"),
               compile_log="error: identifier \"foo\" is undefined")
    text = build_feedback_prompt(relu, "cuda", "fp32", "H100", "class ModelNew: broken = True", r, turn=1)
    assert text.startswith(build_prompt(relu, "cuda", "fp32", "H100").strip())
    assert "turn 1" in text and "class ModelNew: broken = True" in text
    assert 'identifier "foo" is undefined' in text and "Fix the problem." in text


def test_feedback_correctness_failure_and_speed(relu):
    r = result(compiled=True, error=StageError.make(Stage.CORRECTNESS, "OutputMismatch", "values differ"),
               correctness=CorrectnessDetail(trials_run=5, trials_passed=2, atol=1e-4, rtol=1e-4,
                                             max_abs_error=0.5, max_rel_error=0.25))
    text = describe_verdict(r)
    assert "2 of 5" in text and "0.5" in text and "values differ" in text
    good = result(compiled=True, correct=True, runtime=TimingStats(samples_ms=[2.0, 2.0, 2.0]),
                  ref_runtime=TimingStats(samples_ms=[3.0, 3.0, 3.0]))
    fb = build_feedback_prompt(relu, "triton", "fp32", "H100", "code", good, turn=2)
    assert "1.5x" in fb and "Make it faster" in fb


def test_feedback_without_code(relu):
    fb = build_feedback_prompt(relu, "triton", "fp32", None, None, None, turn=1,
                               extraction_error="no code in response")
    assert "no usable code" in fb and "no code in response" in fb and "Write the kernel." in fb


def test_feedback_mentions_best_so_far(relu):
    best = result(correct=True, compiled=True, runtime=TimingStats(samples_ms=[1.0] * 3),
                  ref_runtime=TimingStats(samples_ms=[4.0] * 3))
    bad = result(error=StageError.make(Stage.RUN, "RuntimeError", "boom"))
    fb = build_feedback_prompt(relu, "triton", "fp32", None, "code", bad, turn=3, best=best)
    assert "best correct kernel so far" in fb and "4x" in fb and "boom" in fb


_CHECK_TRITON_EXAMPLE = textwrap.dedent("""
    import torch
    from kernelbench.prompts import worked_example
    model_src, new_src = worked_example("triton")
    ref_ns, new_ns = {}, {}
    exec(compile(model_src, "model.py", "exec"), ref_ns)
    exec(compile(new_src, "triton_model_new.py", "exec"), new_ns)
    torch.manual_seed(0)
    for shape in [(37, 53), (4, 1024), (3000,)]:
        a, b = torch.randn(shape), torch.randn(shape)
        want = ref_ns["Model"]()(a, b)
        got = new_ns["ModelNew"]()(a, b)
        assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype)
        torch.testing.assert_close(got, want, atol=0, rtol=0)
        assert torch.equal(a, a.clone())
    print("OK")
""")


def test_triton_worked_example_is_correct_in_the_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", _CHECK_TRITON_EXAMPLE], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("OK")


def _import_file(path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("backend", list(BACKEND_MARKERS))
def test_worked_examples_pass_the_static_guard_cleanly(backend):
    """The example a prompt teaches with is what the guard wants to see: a launch, no warning."""
    from kernelbench.backends import detect_backend
    from kernelbench.evaluation.guards import analyze_source

    _, new_src = worked_example(backend)
    report = analyze_source(new_src, backend)
    assert report.passed and not report.warnings and "kernel-launch" in report.rules("info"), report.to_text()
    assert detect_backend(new_src) == backend


@pytest.mark.gpu
@pytest.mark.parametrize("backend", list(BACKEND_MARKERS))
def test_worked_examples_are_correct_on_the_gpu(backend, tmp_path, monkeypatch):
    import torch

    from kernelbench.backends import get_backend

    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    if get_backend(backend).missing_packages():
        pytest.skip(get_backend(backend).missing_message())
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    model_src, new_src = worked_example(backend)
    (tmp_path / "kb_example_model.py").write_text(model_src)
    (tmp_path / f"kb_example_{backend}_new.py").write_text(new_src)
    ref = _import_file(tmp_path / "kb_example_model.py")
    new = _import_file(tmp_path / f"kb_example_{backend}_new.py")
    for dtype, tol in [(torch.float32, 0.0), (torch.float16, 1e-3), (torch.bfloat16, 1e-2)]:
        a = torch.randn(1000, 1037, device="cuda", dtype=dtype)
        b = torch.randn(1000, 1037, device="cuda", dtype=dtype)
        got, want = new.ModelNew()(a, b), ref.Model()(a, b)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, atol=tol, rtol=tol)


def test_prompt_cli_prints_the_exact_prompt(relu, capsys):
    from kernelbench.cli.main import main

    assert main(["prompt", "--level", "1", "--problem-id", "8", "--backend", "triton", "--gpu", "H100"]) == 0
    assert capsys.readouterr().out == build_prompt(relu, "triton", "fp32", "H100")


def test_prompt_cli_bad_input(capsys):
    from kernelbench.cli.main import main

    assert main(["prompt", "--level", "1", "--problem-id", "999"]) == 2
    assert "999" in capsys.readouterr().err
    assert main(["prompt", "--level", "1", "--problem-id", "8", "--gpu", "Z80"]) == 2
    assert "Z80" in capsys.readouterr().err


def test_feedback_carries_the_profile_of_the_last_correct_kernel(relu):
    ok = result(correct=True, runtime=TimingStats(samples_ms=[2.0, 2.0]), ref_runtime=TimingStats(samples_ms=[1.0]))
    wrong = result(correct=False, error=StageError.make(Stage.CORRECTNESS, "WrongOutput", "mismatch"))
    profile = "Nsight Compute profile of one forward ...\n- relu_kernel (yours) -> memory-bound (91% of peak)"
    fb = build_feedback_prompt(relu, "cute", "fp32", "H100", "code", ok, turn=2, profile=profile, profile_turn=2)
    assert "## Profile of your last correct kernel (the attempt above)\n\n" + profile in fb
    assert "the profile shows where its time goes" in fb
    # the last attempt was wrong: the profile is an earlier turn's, and it says which
    fb = build_feedback_prompt(relu, "cute", "fp32", "H100", "code", wrong, turn=3, profile=profile, profile_turn=2)
    assert "## Profile of your last correct kernel (turn 2)" in fb and "Fix the problem." in fb
    gone = build_feedback_prompt(relu, "cute", "fp32", None, "code", ok, turn=2,
                                 profile="profile unavailable: no NVIDIA GPU", profile_turn=2)
    assert "profile unavailable: no NVIDIA GPU" in gone and "the profile shows" not in gone
    assert "## Profile" not in build_feedback_prompt(relu, "cute", "fp32", None, "code", ok, turn=2)
